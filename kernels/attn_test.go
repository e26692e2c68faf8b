package kernels

import (
	"fmt"
	"math/rand/v2"
	"slices"
	"testing"

	"github.com/pipe-engine/pipe/quant"
)

// TestAttnHelpersIdentical: the helpers in use equal the pure-Go loops bit
// for bit (row lengths with and without tails, strides wider than a row,
// 1–9 rows, values spanning the f16 range incl. subnormals).
func TestAttnHelpersIdentical(t *testing.T) {
	rng := rand.New(rand.NewPCG(51, 52))
	for _, dim := range []int{3, 4, 8, 60, 64, 72, 128, 130} {
		for rows := 1; rows <= 9; rows++ {
			t.Run(fmt.Sprintf("dim%d/rows%d", dim, rows), func(t *testing.T) {
				stride := dim + rng.IntN(3)*8
				n := (rows-1)*stride + dim
				q, kf, p := make([]float32, dim), make([]float32, n), make([]float32, rows)
				kh := make([]uint16, n)
				for i := range q {
					q[i] = float32(rng.NormFloat64())
				}
				for i := range kf {
					kf[i] = float32(rng.NormFloat64() * []float64{1, 1e-6, 300}[rng.IntN(3)])
					kh[i] = quant.FP32ToFP16(kf[i])
				}
				for i := range p {
					p[i] = rng.Float32()
				}
				got, want := make([]float32, rows), make([]float32, rows)
				DotsF16(q, kh, stride, got)
				refDotsF16(q, kh, stride, want)
				if !bitsEqual(got, want) {
					t.Fatalf("DotsF16 %v, reference %v", got, want)
				}
				DotsF32(q, kf, stride, got)
				refDotsF32(q, kf, stride, want)
				if !bitsEqual(got, want) {
					t.Fatalf("DotsF32 %v, reference %v", got, want)
				}
				o1, o2 := slices.Clone(q), slices.Clone(q)
				AxpysF16(o1, p, kh, stride)
				refAxpysF16(o2, p, kh, stride)
				if !bitsEqual(o1, o2) {
					t.Fatal("AxpysF16 differs from the reference")
				}
				o1, o2 = slices.Clone(q), slices.Clone(q)
				AxpysF32(o1, p, kf, stride)
				refAxpysF32(o2, p, kf, stride)
				if !bitsEqual(o1, o2) {
					t.Fatal("AxpysF32 differs from the reference")
				}
			})
		}
	}
}

// BenchmarkAttnHelpers: the per-row work of one decode token's attention
// for one query head of Qwen3-30B-A3B at a 1024-token context (head width
// 128, an F16 cache), and one layer's routed SwiGLU (8 experts of 768),
// each as the kernel in use and as the pure-Go reference
// (scripts/arm64-insns.py counts their instructions under emulation).
func BenchmarkAttnHelpers(b *testing.B) {
	const dim, rows = 128, 1024
	rng := rand.New(rand.NewPCG(3, 4))
	q, p, out := make([]float32, dim), make([]float32, rows), make([]float32, dim)
	k := make([]uint16, dim*rows)
	for i := range q {
		q[i] = float32(rng.NormFloat64())
	}
	for i := range k {
		k[i] = quant.FP32ToFP16(float32(rng.NormFloat64()))
	}
	sc := make([]float32, rows)
	for i := range p {
		p[i] = rng.Float32() / rows
		sc[i] = float32(rng.NormFloat64() * 4)
	}
	gate, up, act := make([]float32, 8*768), make([]float32, 8*768), make([]float32, 8*768)
	for i := range gate {
		gate[i], up[i] = float32(rng.NormFloat64()*2), float32(rng.NormFloat64())
	}
	x := make([]float32, rows)
	for _, bc := range []struct {
		name        string
		kernel, ref func()
	}{
		{"DotsF16", func() { dotsF16(q, k, dim, p) }, func() { refDotsF16(q, k, dim, p) }},
		{"AxpysF16", func() { axpysF16(out, p, k, dim) }, func() { refAxpysF16(out, p, k, dim) }},
		{"Softmax", func() { copy(x, sc); expShift(x, 12) }, func() { copy(x, sc); refExpShift(x, 12) }},
		{"SwiGLU", func() { swiGLU(act, gate, up) }, func() { refSwiGLU(act, gate, up) }},
	} {
		for _, impl := range []struct {
			name string
			f    func()
		}{{"kernel", bc.kernel}, {"scalar", bc.ref}} {
			b.Run(bc.name+"/"+impl.name, func(b *testing.B) {
				for range b.N {
					impl.f()
				}
			})
		}
	}
}
