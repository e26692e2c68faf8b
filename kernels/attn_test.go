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
