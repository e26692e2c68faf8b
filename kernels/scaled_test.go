package kernels

import (
	"math"
	"math/rand/v2"
	"slices"
	"testing"
)

// TestScaledIdentical: MulScalar and AddMulScalar equal the scalar loops
// bit for bit (NaN for NaN) for lengths around the vector width, values
// across the float32 range with subnormals, infinities and NaNs, and
// weights that overflow, underflow and are zero.
func TestScaledIdentical(t *testing.T) {
	rng := rand.New(rand.NewPCG(27, 7))
	special := []float32{0, float32(math.Copysign(0, -1)), float32(math.Inf(1)), float32(math.Inf(-1)),
		float32(math.NaN()), math.SmallestNonzeroFloat32, math.MaxFloat32, -1e-40}
	val := func() float32 {
		if rng.IntN(8) == 0 {
			return special[rng.IntN(len(special))]
		}
		return math.Float32frombits(rng.Uint32())
	}
	for _, n := range []int{0, 1, 7, 8, 9, 16, 31, 2048, 2053} {
		for _, w := range []float32{0.37, -1, 0, 1e-30, 3e30, float32(math.Inf(1)), val(), val()} {
			y, out := make([]float32, n), make([]float32, n)
			for i := range y {
				y[i], out[i] = val(), float32(rng.NormFloat64())
			}
			a, b := slices.Clone(out), slices.Clone(out)
			MulScalar(a, y, w)
			refMulScalar(b, y, w)
			if !bitsEqualNaN(a, b) {
				t.Fatalf("n=%d w=%g: MulScalar %v, scalar %v", n, w, a, b)
			}
			a, b = slices.Clone(out), slices.Clone(out)
			AddMulScalar(a, y, w)
			refAddMulScalar(b, y, w)
			if !bitsEqualNaN(a, b) {
				t.Fatalf("n=%d w=%g: AddMulScalar %v, scalar %v", n, w, a, b)
			}
		}
	}
}

// BenchmarkAddMulScalar: one token's weighted sum of 8 expert outputs of
// 2048 (Qwen3-30B-A3B's ffn.Stage.Finish per layer).
func BenchmarkAddMulScalar(b *testing.B) {
	rng := rand.New(rand.NewPCG(1, 2))
	ys, out := make([]float32, 8*2048), make([]float32, 2048)
	for i := range ys {
		ys[i] = float32(rng.NormFloat64())
	}
	for _, bc := range []struct {
		name     string
		mul, add func(out, y []float32, w float32)
	}{{"kernel", MulScalar, AddMulScalar}, {"scalar", refMulScalar, refAddMulScalar}} {
		b.Run(bc.name, func(b *testing.B) {
			for range b.N {
				bc.mul(out, ys[:2048], 0.3)
				for r := 1; r < 8; r++ {
					bc.add(out, ys[r*2048:(r+1)*2048], 0.1)
				}
			}
		})
	}
}
