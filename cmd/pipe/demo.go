package main

import (
	"fmt"

	"github.com/pipe-engine/pipe/model/gen"
)

// demoCacheMB is the expert cache of the default run: smaller than the demo
// model's experts, so the run streams and evicts.
const demoCacheMB = 256

// demoCache is the demo's input to the engine's resolution: the budget that
// --cache-mb auto stands for (decode.Options.AutoCache), 0 for a model of the
// user's.
func demoCache(demo bool) int64 {
	if demo {
		return demoCacheMB << 20
	}
	return 0
}

// ensureDemo returns the path of the embedded default model, generating it
// once under the user cache directory.
func ensureDemo(g *Globals) (string, error) {
	dir := gen.DefaultCacheDir()
	g.Log.Info().Str("event", "demo_model").Str("dir", dir).Msg("no -m given: using the demo model (generated on first use); its weights are random, so its text is noise")
	p, err := gen.EnsureDemo(g.Ctx, dir, g.Status)
	if err != nil {
		return "", fmt.Errorf("demo model: %w", err)
	}
	return p, nil
}

// demoNext is what the demo says when it is done: its weights are random,
// and what to run with a real model.
const demoNext = "that was the demo model: its weights are random, so the text above is noise; with a real model try " +
	`pipe run -m Qwen3-30B-A3B-Q4_K_M.gguf -p "Why is the sky blue?" -n 128 --chat --csv run.csv` +
	" (any Qwen3-MoE, gpt-oss or Gemma-4 GGUF), or pipe serve -m MODEL for the chat page and API"

// sayDemoNext logs demoNext.
func sayDemoNext(g *Globals) {
	g.Log.Info().Str("event", "demo_next").Msg(demoNext)
}
