package kernels

import (
	"fmt"
	"math/rand/v2"
	"testing"

	"github.com/pipe-engine/pipe/quant"
)

// BenchmarkGEMM: n tokens against one matrix through Pool.MatMul, with the
// multi-token kernels ("gemm") and with them switched off ("vec": the
// vector kernel once per token over cached rows), side by side. SetBytes
// counts the weight bytes once per product; tok/s is tokens through the
// matrix per wall second, cpuGB/s weight bytes per CPU-second. "used" is
// the chain of kernels MatMul runs on this machine, the others one set's.
//
//	go test -run '^$' -bench GEMM -count 3 ./kernels/
func BenchmarkGEMM(b *testing.B) {
	shapes := []struct {
		name       string
		rows, cols int
		typ        quant.Type
		n          []int
	}{
		{"expert-gate-2048x768", 768, 2048, quant.Q4_K, []int{2, 4, 8, 32}},
		{"expert-down-768x2048", 2048, 768, quant.Q6_K, []int{2, 4, 8}},
		{"attn-q-2048x4096", 4096, 2048, quant.Q4_K, []int{128}},
		{"attn-v-2048x512", 512, 2048, quant.Q6_K, []int{128}},
		{"q8_0-2880x2880", 2880, 2880, quant.Q8_0, []int{2, 3, 4, 6, 7, 8, 128}},
		{"gptoss-expert-2880x2880", 2880, 2880, quant.MXFP4, []int{2, 3, 4, 6, 7, 8}},
		{"gemma4-expert-down-704x2816", 2816, 704, quant.Q5_0, []int{2, 4, 8}},
		{"router-2048x128", 128, 2048, quant.F32, []int{8, 128}},
		{"f16-2048x512", 512, 2048, quant.F16, []int{8, 128}},
	}
	kinds := map[*implementation]string{}
	for _, sh := range shapes {
		cold := &coldSet{t: sh.typ, rows: sh.rows, cols: sh.cols}
		for _, n := range sh.n {
			x := randX(rand.New(rand.NewPCG(45, 46)), n*sh.cols)
			y := make([]float32, n*sh.rows)
			var variants []*implementation
			vec := *impl
			vec.gemm = nil
			variants = append(variants, &vec)
			if impl.gemm[sh.typ] != nil { // the kernels MatMul uses here
				variants = append(variants, impl)
				kinds[impl] = "used"
			}
			for _, set := range gemmSets()[1:] {
				if set.kernels[sh.typ] != nil {
					m := *impl
					m.gemm = set.kernels
					variants = append(variants, &m)
					kinds[&m] = set.name
				}
			}
			for _, m := range variants {
				kind := kinds[m]
				if kind == "" {
					kind = "vec"
				}
				for _, threads := range []int{1, 2} {
					b.Run(fmt.Sprintf("%s/%v/n%d/%s/t%d", sh.name, sh.typ, n, kind, threads), func(b *testing.B) {
						saved := impl
						impl = m
						defer func() { impl = saved }()
						w, size, ncopies := cold.get(b)
						p := NewPool(threads)
						defer p.Close()
						b.SetBytes(int64(size))
						b.ResetTimer()
						cpu0 := processCPUSeconds()
						for i := 0; i < b.N; i++ {
							c := i % ncopies
							if err := p.MatMul(sh.typ, w[c*size:(c+1)*size], sh.rows, sh.cols, x, n, y); err != nil {
								b.Fatal(err)
							}
						}
						b.ReportMetric(float64(n)*float64(b.N)/b.Elapsed().Seconds(), "tok/s")
						cpuMetric(b, int64(size), cpu0)
					})
				}
			}
		}
		cold.free()
	}
}
