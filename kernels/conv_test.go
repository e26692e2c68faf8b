package kernels

import (
	"math"
	"math/rand/v2"
	"slices"
	"testing"
)

// TestConv4Identical: Conv4 and ConvStep4 equal the scalar references bit
// for bit (NaN for NaN) — the outputs and ConvStep4's new state — for
// channel counts around both vector widths, on slices that start off
// alignment, with signed zeros, subnormals, infinities and NaNs among the
// values, and rows of signed zeros only (the sum from +0 turns -0 products
// into +0).
func TestConv4Identical(t *testing.T) {
	rng := rand.New(rand.NewPCG(4, 4))
	special := []float32{0, float32(math.Copysign(0, -1)), float32(math.Inf(1)), float32(math.Inf(-1)),
		float32(math.NaN()), math.SmallestNonzeroFloat32, math.MaxFloat32, -1e-40}
	zeros := false
	val := func() float32 {
		if zeros {
			return float32(math.Copysign(0, float64(rng.IntN(2)*2-1)))
		}
		switch rng.IntN(16) {
		case 0:
			return special[rng.IntN(len(special))]
		case 1:
			return math.Float32frombits(rng.Uint32())
		}
		return float32(rng.NormFloat64())
	}
	fill := func(n int) []float32 {
		v := unaligned(n)
		for i := range v {
			v[i] = val()
		}
		return v
	}
	for _, n := range []int{0, 1, 3, 4, 5, 7, 8, 9, 12, 15, 16, 17, 31, 64, 257, 2051} {
		for round := range 5 {
			zeros = round == 4
			in0, in1, in2, w, x, state := fill(n), fill(n), fill(n), fill(4*n), fill(n), fill(3*n)
			a, b := slices.Clone(x), slices.Clone(x)
			Conv4(a, in0, in1, in2, w)
			refConv4(b, in0, in1, in2, w)
			if !bitsEqualNaN(a, b) {
				t.Fatalf("n=%d: Conv4 %v, scalar %v", n, a, b)
			}
			a, b = slices.Clone(x), slices.Clone(x)
			sa, sb := slices.Clone(state), slices.Clone(state)
			ConvStep4(sa, a, w)
			refConvStep4(sb, b, w)
			if !bitsEqualNaN(a, b) || !bitsEqualNaN(sa, sb) {
				t.Fatalf("n=%d: ConvStep4 %v state %v, scalar %v state %v", n, a, sa, b, sb)
			}
		}
	}
}

// TestConvStep4IsConv4: a decode step is the prompt form over the state's
// three inputs and the token, and leaves the last three inputs as state.
func TestConvStep4IsConv4(t *testing.T) {
	rng := rand.New(rand.NewPCG(5, 5))
	const n = 37
	state, x, w := make([]float32, 3*n), make([]float32, n), make([]float32, 4*n)
	for _, v := range [][]float32{state, x, w} {
		for i := range v {
			v[i] = float32(rng.NormFloat64())
		}
	}
	in := [3][]float32{make([]float32, n), make([]float32, n), make([]float32, n)}
	for c := range n {
		for i := range 3 {
			in[i][c] = state[3*c+i]
		}
	}
	want := slices.Clone(x)
	Conv4(want, in[0], in[1], in[2], w)
	got := slices.Clone(x)
	ConvStep4(state, got, w)
	if !bitsEqualNaN(got, want) {
		t.Fatalf("ConvStep4 %v, Conv4 %v", got, want)
	}
	for c := range n {
		if st := state[3*c : 3*c+3]; st[0] != in[1][c] || st[1] != in[2][c] || st[2] != x[c] {
			t.Fatalf("channel %d: state %v, want %v %v %v", c, st, in[1][c], in[2][c], x[c])
		}
	}
}

// BenchmarkConv4: one token of Qwen3.6's delta-net convolution (8192
// channels), the prompt form and the decode step.
func BenchmarkConv4(b *testing.B) {
	const n = 8192
	rng := rand.New(rand.NewPCG(1, 2))
	v := make([]float32, 11*n)
	for i := range v {
		v[i] = float32(rng.NormFloat64())
	}
	in0, in1, in2, w, x, state := v[:n], v[n:2*n], v[2*n:3*n], v[3*n:7*n], v[7*n:8*n], v[8*n:]
	for _, bc := range []struct {
		name       string
		conv, step func()
	}{
		{"kernel", func() { Conv4(x, in0, in1, in2, w) }, func() { ConvStep4(state, x, w) }},
		{"scalar", func() { refConv4(x, in0, in1, in2, w) }, func() { refConvStep4(state, x, w) }},
	} {
		b.Run("prompt/"+bc.name, func(b *testing.B) {
			for range b.N {
				bc.conv()
			}
		})
		b.Run("step/"+bc.name, func(b *testing.B) {
			for range b.N {
				bc.step()
			}
		})
	}
}
