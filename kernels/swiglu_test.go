package kernels

import (
	"math"
	"math/rand/v2"
	"slices"
	"testing"
)

// TestSwiGLUIdentical: SwiGLU and SiLU equal the scalar loop bit for bit (NaN for
// NaN) over float32 bit patterns spread across the whole range (subnormals,
// the exponential's overflow and underflow edges, infinities, NaNs), random
// activations, lengths around the vector width, and out aliasing gate.
func TestSwiGLUIdentical(t *testing.T) {
	var gate []float32
	for b := uint64(0); b < 1<<32; b += 4099 {
		gate = append(gate, math.Float32frombits(uint32(b)))
	}
	for _, v := range []float32{0, 1, -1, 87.3, -87.3, 88.7, -88.7, 103.9, -103.9, 104.1, -104.1, 700, -700,
		float32(math.Inf(1)), float32(math.Inf(-1)), float32(math.NaN()), math.SmallestNonzeroFloat32, -math.MaxFloat32} {
		gate = append(gate, v, math.Nextafter32(v, 0), math.Nextafter32(v, float32(math.Inf(1))))
	}
	rng := rand.New(rand.NewPCG(27, 5))
	for range 1 << 16 {
		gate = append(gate, float32(rng.NormFloat64()*[]float64{0.01, 1, 4, 30}[rng.IntN(4)]))
	}
	up := make([]float32, len(gate))
	for i := range up {
		up[i] = float32(rng.NormFloat64())
	}
	up[7] = float32(math.Inf(1))
	want := make([]float32, len(gate))
	refSwiGLU(want, gate, up)
	for _, n := range []int{0, 1, 7, 8, 9, 17, len(gate)} {
		got := make([]float32, n)
		SwiGLU(got, gate, up)
		if !bitsEqualNaN(got, want[:n]) {
			for i := range got {
				if math.Float32bits(got[i]) != math.Float32bits(want[i]) && !(got[i] != got[i] && want[i] != want[i]) {
					t.Fatalf("n=%d: gate %g up %g: SwiGLU %g (%#x), scalar %g (%#x)", n, gate[i], up[i], got[i], math.Float32bits(got[i]), want[i], math.Float32bits(want[i]))
				}
			}
		}
	}
	alias := slices.Clone(gate)
	SwiGLU(alias, alias, up)
	if !bitsEqualNaN(alias, want) {
		t.Fatal("SwiGLU with out aliasing gate differs from the scalar loop")
	}
	refSiLU(want, gate)
	for _, n := range []int{0, 1, 7, 8, 9, 17, len(gate)} {
		got := make([]float32, n)
		SiLU(got, gate)
		if !bitsEqualNaN(got, want[:n]) {
			t.Fatalf("n=%d: SiLU differs from the scalar loop", n)
		}
	}
	alias = slices.Clone(gate)
	SiLU(alias, alias)
	if !bitsEqualNaN(alias, want) {
		t.Fatal("SiLU in place differs from the scalar loop")
	}
}

// BenchmarkSwiGLU: one Qwen3-30B-A3B layer's routed activations (8 experts
// of 768).
func BenchmarkSwiGLU(b *testing.B) {
	rng := rand.New(rand.NewPCG(1, 2))
	gate, up, out := make([]float32, 8*768), make([]float32, 8*768), make([]float32, 8*768)
	for i := range gate {
		gate[i], up[i] = float32(rng.NormFloat64()*2), float32(rng.NormFloat64())
	}
	for _, bc := range []struct {
		name string
		f    func(out, gate, up []float32)
	}{{"kernel", SwiGLU}, {"scalar", refSwiGLU}} {
		b.Run(bc.name, func(b *testing.B) {
			for range b.N {
				bc.f(out, gate, up)
			}
		})
	}
}

// TestExpIdentical: Exp equals float32(math.Exp(float64(x))) bit for bit
// (NaN for NaN), around the vector width, over the float32 range: overflow
// to +Inf, underflow through subnormals to zero, ±0, ±Inf and NaN.
func TestExpIdentical(t *testing.T) {
	rng := rand.New(rand.NewPCG(9, 10))
	specials := []float32{0, float32(math.Copysign(0, -1)), 88.72, 88.73, -87.3, -103.9, -104, -150, 700, -700, 1e-30,
		float32(math.Inf(1)), float32(math.Inf(-1)), float32(math.NaN())}
	for _, n := range []int{1, 7, 8, 9, 16, 31, 1000} {
		x := make([]float32, n)
		for i := range x {
			x[i] = float32(rng.NormFloat64() * 40)
			if rng.IntN(4) == 0 {
				x[i] = specials[rng.IntN(len(specials))]
			}
		}
		got := slices.Clone(x)
		Exp(got)
		for i, v := range x {
			want := float32(math.Exp(float64(v)))
			if math.Float32bits(got[i]) != math.Float32bits(want) && !(got[i] != got[i] && want != want) {
				t.Fatalf("n %d: Exp(%g) = %g (%#x), math.Exp %g (%#x)", n, v, got[i], math.Float32bits(got[i]), want, math.Float32bits(want))
			}
		}
	}
}
