//go:build amd64 && !purego

package kernels

import (
	"math"
	"math/rand/v2"
	"testing"
)

// TestExpSum8MatchesMathExp: the vectorized exponential gives
// float32(math.Exp(float64(x))) bit for bit over the whole float32 range
// that matters (random values, every bound, infinities, NaN), and the
// per-slot sums are the scalar float64 sums in order.
func TestExpSum8MatchesMathExp(t *testing.T) {
	if !hasGroupAVX2 {
		t.Skip("no AVX2/FMA on this machine")
	}
	rng := rand.New(rand.NewPCG(71, 72))
	var xs []float32
	for _, x := range []float64{0, -0.0, 1e-30, -1e-30, -1, -87.3, -88.72, -103.28, -103.97, -104, -700, -700.0001,
		-699.9999, -745, -746, -1e30, 88.72, 89, 700, 700.0001, 709, 710, math.Inf(-1), math.Inf(1), math.NaN()} {
		xs = append(xs, float32(x))
	}
	for i := 0; i < 1<<16; i++ {
		xs = append(xs, float32(-rng.ExpFloat64()*[]float64{0.01, 1, 30, 300}[i%4]))
		xs = append(xs, math.Float32frombits(rng.Uint32())) // any bit pattern
	}
	for len(xs)%GroupSlots != 0 {
		xs = append(xs, 0)
	}
	n := len(xs) / GroupSlots
	got := append([]float32(nil), xs...)
	var mx [GroupSlots]float32
	var sum [GroupSlots]float64
	expSum8AVX2(&got[0], n, &mx, &sum)
	var want [GroupSlots]float64
	for i, x := range xs {
		e := float32(math.Exp(float64(x)))
		if math.Float32bits(got[i]) != math.Float32bits(e) {
			t.Fatalf("exp(%g) = %g (%#x), math.Exp %g (%#x)", x, got[i], math.Float32bits(got[i]), e, math.Float32bits(e))
		}
		want[i%GroupSlots] += float64(e)
	}
	for s := range sum {
		if math.Float64bits(sum[s]) != math.Float64bits(want[s]) && !(math.IsNaN(sum[s]) && math.IsNaN(want[s])) {
			t.Fatalf("slot %d sum %g, scalar %g", s, sum[s], want[s])
		}
	}
}
