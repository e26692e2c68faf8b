//go:build arm64 && !purego

package kernels

import (
	"math"
	"math/rand/v2"
	"testing"
)

// TestExpF64MatchesMathExp: the assembly's float64 exponential equals
// math.Exp (Go's arm64 archExp) bit for bit on its whole domain, which the
// float32 results of SwiGLU and the softmax cannot show (they round away
// a float64 ulp almost always): a product left unfused where archExp
// fuses, or the reverse, changes some of these values.
func TestExpF64MatchesMathExp(t *testing.T) {
	rng := rand.New(rand.NewPCG(91, 92))
	xs := []float64{-700, 700, math.Nextafter(-700, 0), math.Nextafter(700, 0), 0x1p-28, -0x1p-28, 0.5, -0.5,
		math.Ln2 / 2, -math.Ln2 / 2, 1, -1, 88.72283935546875, -103.97207641601562}
	for len(xs) < 1<<20 {
		var x float64
		switch len(xs) % 4 {
		case 0:
			x = (rng.Float64()*2 - 1) * 700
		case 1:
			x = (rng.Float64()*2 - 1) * 2
		case 2:
			x = float64(float32(rng.NormFloat64() * 30)) // a float32's exact value, as SwiGLU's inputs
		default:
			x = math.Copysign(math.Ldexp(1+rng.Float64(), -rng.IntN(28)), rng.Float64()-0.5)
		}
		if math.Abs(x) >= 0x1p-28 && math.Abs(x) <= 700 {
			xs = append(xs, x)
		}
	}
	got := append([]float64(nil), xs...)
	expF64NEON(&got[0], len(got))
	for i, x := range xs {
		if want := math.Exp(x); math.Float64bits(got[i]) != math.Float64bits(want) {
			t.Fatalf("exp(%v) = %v (%#x), math.Exp %v (%#x)", x, got[i], math.Float64bits(got[i]), want, math.Float64bits(want))
		}
	}
}
