package main

import (
	"fmt"

	"github.com/pipe-engine/pipe/gen"
)

// demoCacheMB is the expert cache of the default run: smaller than the demo
// model's experts, so the run streams and evicts.
const demoCacheMB = 256

// ensureDemo returns the path of the embedded default model, generating it
// once under the user cache directory.
func ensureDemo(g *Globals) (string, error) {
	dir := gen.DefaultCacheDir()
	g.Log.Info().Str("event", "demo_model").Str("dir", dir).Msg("no -m given: using the demo model (generated on first use)")
	p, err := gen.EnsureDemo(g.Ctx, dir, g.Status)
	if err != nil {
		return "", fmt.Errorf("demo model: %w", err)
	}
	return p, nil
}
