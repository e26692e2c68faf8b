package stages

import (
	"context"
	"testing"

	"github.com/pipe-engine/pipe/dense"
	"github.com/pipe-engine/pipe/model"
)

// BenchmarkDecodeStep measures one decode step of the tiny Q4_K_M golden
// model end to end (attention, router, planner, lanes, cache, FFN), streaming
// with a cache below the working set and with the whole file mmap'd, so the
// pipeline's per-step overhead can be compared with the mmap path's.
func BenchmarkDecodeStep(b *testing.B) {
	for _, bc := range []struct {
		name string
		cfg  func() Config
	}{
		{"mmap", func() Config { c := baseCfg(); c.Stream = false; c.Dense = dense.Mmap; return c }},
		{"stream-cache-all", func() Config { c := baseCfg(); c.Cache.Bytes = 64 << 20; return c }},
		{"stream-cache-0", func() Config { c := baseCfg(); c.Cache.Bytes = 0; return c }},
	} {
		b.Run(bc.name, func(b *testing.B) {
			cfg := bc.cfg()
			cfg.Path = "../testdata/golden/models/tiny-qwen3moe-Q4_K_M.gguf"
			ctx := context.Background()
			e, err := Open(ctx, cfg)
			if err != nil {
				b.Fatal(err)
			}
			defer e.Close()
			s, err := e.NewSession(len(prompt)+b.N+1, model.KVF16)
			if err != nil {
				b.Fatal(err)
			}
			if _, _, err := s.Prefill(ctx, prompt, false); err != nil {
				b.Fatal(err)
			}
			b.ResetTimer()
			var wall float64
			for i := 0; i < b.N; i++ {
				_, m, err := s.Step(ctx, int32(100+i%200), b.N)
				if err != nil {
					b.Fatal(err)
				}
				wall += m.WallMS
			}
			b.ReportMetric(float64(b.N)/(wall/1000), "tok/s")
		})
	}
}
