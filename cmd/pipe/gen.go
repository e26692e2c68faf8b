package main

import (
	"fmt"

	"github.com/rs/zerolog"

	"github.com/pipe-engine/pipe/model/gen"
)

// GenCmd is `pipe gen`: write a synthetic model with a real model's shapes.
type GenCmd struct {
	Preset      string  `required:"" help:"Model shape: ${presets} (every registered family's)."`
	Out         string  `required:"" short:"o" type:"path" help:"Output GGUF file (written to a temporary file and renamed)."`
	Quant       string  `help:"Quantization mix as llama-quantize names it: F32, F16, BF16, Q4_0, Q8_0, Q4_K_S, Q4_K_M, Q5_K_S, Q5_K_M, Q6_K, MXFP4_MOE (alias MXFP4). Default: the preset's (Q4_K_M; MXFP4_MOE for gpt-oss)."`
	Seed        uint64  `default:"1" help:"Weight seed: the same seed and flags give a byte-identical file."`
	Layers      int     `help:"Keep only the first N blocks (0 = all)."`
	Vocab       string  `type:"existingfile" help:"Copy the tokenizer.* keys of this GGUF (e.g. a vocab-only file); default: a built-in byte-level BPE padded to the preset's vocabulary size."`
	VocabSize   int     `name:"vocab-size" help:"Size of the built-in vocabulary (0 = the preset's real size)."`
	RoutingSkew float64 `name:"routing-skew" default:"0.85" help:"Expert popularity skew (0 = uniform routing; the default is calibrated on the real Qwen3-30B-A3B traces)."`
	Progress    bool    `negatable:"" default:"true" help:"Show progress on stderr."`
}

// Run generates the file.
func (c *GenCmd) Run(g *Globals) error {
	o := gen.Options{
		Preset: c.Preset, Quant: c.Quant, Seed: c.Seed, Layers: c.Layers,
		VocabPath: c.Vocab, VocabSize: c.VocabSize, RoutingSkew: c.RoutingSkew,
	}
	if c.Progress {
		switch {
		case g.JSONLog:
			o.Progress = newEventLines(g.Log, zerolog.InfoLevel, "gen_progress")
		case g.Status != nil:
			o.Status = g.Status
		default:
			o.Progress = g.Stderr
		}
	}
	m, err := gen.Prepare(o)
	if err != nil {
		return fmt.Errorf("gen: %w", err)
	}
	g.Log.Info().Str("event", "gen_start").Str("preset", c.Preset).Str("quant", m.Plan.FileType.Name).
		Int("layers", m.Plan.Preset.NLayer).Int("vocab", m.Vocab.Size).Int("tensors", len(m.Plan.Tensors)).
		Uint64("tensor_bytes", m.Plan.TotalBytes()).Str("out", c.Out).Msg("generating model")
	res, err := gen.GenerateFile(g.Ctx, o, c.Out)
	if err != nil {
		return fmt.Errorf("gen: %w", err)
	}
	secs := res.Elapsed.Seconds()
	g.Log.Info().Str("event", "gen_done").Str("out", c.Out).Int64("bytes", res.Bytes).
		Float64("seconds", secs).Float64("MiB_per_s", float64(res.Bytes)/(1<<20)/max(secs, 1e-9)).Msg("model written")
	if isTerminal(g.Stdout) {
		// The path, for a human; a script has it from --out or the event.
		if _, err := fmt.Fprintf(g.Stdout, "%s\n", c.Out); err != nil {
			return fmt.Errorf("stdout: %w", err)
		}
	}
	return nil
}
