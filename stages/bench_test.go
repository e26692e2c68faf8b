package stages

import (
	"context"
	"testing"

	"github.com/pipe-engine/pipe/dense"
	"github.com/pipe-engine/pipe/model"
)

// BenchmarkDecodeStep measures one steady decode step of the tiny Q4_K_M
// golden model end to end (attention, router, planner, lanes, cache, FFN,
// head, metrics) in each of decodeModes, so the pipeline's per-step
// overhead can be compared with the mmap path's; it reports allocations.
func BenchmarkDecodeStep(b *testing.B) {
	for _, bc := range decodeModes() {
		b.Run(bc.name, func(b *testing.B) {
			s, done := steadySession(b, bc.cfg(), b.N)
			defer done()
			ctx := context.Background()
			b.ReportAllocs()
			b.ResetTimer()
			var wall float64
			for i := 0; i < b.N; i++ {
				_, m, err := s.Step(ctx, int32(100+i%warmSteps), b.N)
				if err != nil {
					b.Fatal(err)
				}
				wall += m.WallMS
			}
			b.ReportMetric(float64(b.N)/(wall/1000), "tok/s")
		})
	}
}

// decodeModes are the ways a decode step gets its experts: the whole file
// mmap'd, streaming with a cache that holds every expert, streaming with no
// cache (every routed expert read every step), and streaming with a 1 MiB
// cache under the default "layer" policy (hits, misses and evictions).
func decodeModes() []struct {
	name string
	cfg  func() Config
} {
	return []struct {
		name string
		cfg  func() Config
	}{
		{"mmap", func() Config { c := baseCfg(); c.Stream = StreamOff; c.Dense = dense.Mmap; return c }},
		{"stream-cache-all", func() Config { c := baseCfg(); c.Cache.Bytes = 64 << 20; return c }},
		{"stream-cache-0", func() Config { c := baseCfg(); c.Cache.Bytes = NoCache; return c }},
		{"stream-cache-part-layer", func() Config { c := baseCfg(); c.Cache.Bytes = 1 << 20; c.Cache.Policy = "layer"; return c }},
	}
}

// warmSteps is how many distinct tokens steadySession feeds before the
// measured steps, which cycle through the same tokens: by then every expert
// they route to has been looked up (its planner record made) and, with a
// cache, is resident.
const warmSteps = 32

// steadySession opens the tiny Q4_K_M golden model with cfg, prefills the
// prompt and decodes warmSteps tokens, leaving room for n more steps.
func steadySession(tb testing.TB, cfg Config, n int) (*Session, func()) {
	tb.Helper()
	return steadySessionOf(tb, "tiny-qwen3moe-Q4_K_M", cfg, n)
}

// steadySessionOf is steadySession on testdata/golden/models/name.gguf.
func steadySessionOf(tb testing.TB, name string, cfg Config, n int) (*Session, func()) {
	tb.Helper()
	cfg.Path = "../testdata/golden/models/" + name + ".gguf"
	ctx := context.Background()
	e, err := Open(ctx, cfg, Inputs{})
	if err != nil {
		tb.Fatal(err)
	}
	s, err := e.NewSession(len(prompt)+warmSteps+n+1, model.KVF16)
	if err != nil {
		e.Close()
		tb.Fatal(err)
	}
	if _, _, err := s.Prefill(ctx, prompt, false); err != nil {
		e.Close()
		tb.Fatal(err)
	}
	for i := 0; i < warmSteps; i++ {
		if _, _, err := s.Step(ctx, int32(100+i), warmSteps); err != nil {
			e.Close()
			tb.Fatal(err)
		}
	}
	return s, func() { e.Close() }
}

// moeCase sets up one layer's MoE call on the tiny Q4_K_M model: inputs,
// router logits and the output row, the slices wrapped once.
func moeCase(tb testing.TB, cfg Config) (*Engine, func(layer int) error) {
	tb.Helper()
	return moeCaseWith(tb, cfg, Inputs{})
}

// moeCaseWith is moeCase with the engine's Inputs.
func moeCaseWith(tb testing.TB, cfg Config, in Inputs) (*Engine, func(layer int) error) {
	tb.Helper()
	cfg.Path = "../testdata/golden/models/tiny-qwen3moe-Q4_K_M.gguf"
	e, err := Open(context.Background(), cfg, in)
	if err != nil {
		tb.Fatal(err)
	}
	hp := e.Desc().HParams
	x, logits, out := make([]float32, hp.NEmbd), make([]float32, hp.NExpert), make([]float32, hp.NEmbd)
	for i := range x {
		x[i] = float32(i%7) - 3
	}
	for i := range logits {
		logits[i] = float32(i % 5)
	}
	xs, ls, os := [][]float32{x}, [][]float32{logits}, [][]float32{out}
	ctx := context.Background()
	return e, func(layer int) error { return e.pipe.RunMoE(ctx, layer, xs, ls, os) }
}

// BenchmarkRunMoE is one layer of the MoE hand-off — routing, the FFN job,
// the planner request, cache lookups, the Ready values and the weighted sum
// — with every expert resident (streaming, cache holding all) and through
// the whole-file mapping. Steady state allocates nothing.
func BenchmarkRunMoE(b *testing.B) {
	for _, bc := range []struct {
		name string
		cfg  func() Config
	}{
		{"stream-cache-all", func() Config { c := baseCfg(); c.Cache.Bytes = 64 << 20; return c }},
		{"mmap", func() Config { c := baseCfg(); c.Stream = StreamOff; c.Dense = dense.Mmap; return c }},
	} {
		b.Run(bc.name, func(b *testing.B) {
			e, run := moeCase(b, bc.cfg())
			defer e.Close()
			if err := run(0); err != nil { // warm: reads the routed experts once
				b.Fatal(err)
			}
			b.ReportAllocs()
			b.ResetTimer()
			for i := 0; i < b.N; i++ {
				if err := run(0); err != nil {
					b.Fatal(err)
				}
			}
		})
	}
}
