//go:build unix

package model

import (
	"fmt"
	"syscall"
	"testing"

	"github.com/pipe-engine/pipe/kernels"
)

// cpuSeconds is this process's user+system CPU time: benchmarks report CPU
// per operation, robust on a shared machine.
func cpuSeconds() float64 {
	var ru syscall.Rusage
	if err := syscall.Getrusage(syscall.RUSAGE_SELF, &ru); err != nil {
		return 0
	}
	return float64(ru.Utime.Sec+ru.Stime.Sec) + float64(ru.Utime.Usec+ru.Stime.Usec)/1e6
}

// BenchmarkAttention is one layer's attention over the KV cache, one
// thread: Qwen3-30B-A3B's (32 query heads, 4 KV heads of 128: the grouped
// kernels) and gemma4's sliding-window layers' ("g2": 16 query heads, 8 KV
// heads of 256, head by head), n query tokens at positions pos…pos+n-1
// (n = 1: a decode step; n > 1: a prompt). cpu-us/op is the CPU time of
// one layer.
func BenchmarkAttention(b *testing.B) {
	qwen := &Attention{Geom: Geom{NHead: 32, NHeadKV: 4, HeadDim: 128, Scale: 0.0884}}
	g2 := &Attention{Geom: Geom{NHead: 16, NHeadKV: 8, HeadDim: 256, Scale: 0.0625}}
	pool := kernels.NewPool(1)
	defer pool.Close()
	for _, kv := range []KVType{KVF16, KVF32} {
		for _, c := range []struct {
			geo    string
			pos, n int
		}{{"", 64, 1}, {"", 256, 1}, {"", 2048, 1}, {"", 0, 128}, {"", 2048, 32}, {"g2", 1024, 1}, {"g2", 0, 512}} {
			a := qwen
			if c.geo == "g2" {
				a = g2
			}
			b.Run(fmt.Sprintf("%v/%spos%d/n%d", kv, c.geo, c.pos, c.n), func(b *testing.B) {
				st, q := attnFixture(b, a, c.pos+c.n, kv)
				p := attnPass(pool, a, c.n, c.pos)
				att := make([]float32, c.n*a.QDim())
				b.ResetTimer()
				cpu0 := cpuSeconds()
				for i := 0; i < b.N; i++ {
					if err := p.attendPrompt(st, 0, a, q[:c.n*a.QDim()], att); err != nil {
						b.Fatal(err)
					}
				}
				b.ReportMetric((cpuSeconds()-cpu0)*1e6/float64(b.N), "cpu-us/op")
			})
		}
	}
}
