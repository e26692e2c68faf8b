package kernels

import (
	"fmt"
	"math/rand/v2"
	"slices"
	"testing"
)

// deltaInputs is a random state of rows × w and a token's k, q, v.
func deltaInputs(rng *rand.Rand, rows, w int) (m, k, q, v []float32) {
	vec := func(n int, std float64) []float32 {
		x := make([]float32, n)
		for i := range x {
			x[i] = float32(rng.NormFloat64() * std * []float64{1, 1, 1e-3, 40}[rng.IntN(4)])
		}
		return x
	}
	return vec(rows*w, 0.3), vec(w, 0.1), vec(w, 0.1), vec(rows, 1)
}

// unfusedDelta is the delta rule as the qwen35moe delta-net computed it
// before DeltaRule: the whole state scaled, DotsF32 of k, δ, the rank-1
// update row by row, DotsF32 of q, then the scale.
func unfusedDelta(m, k, q, v, out []float32, eg, beta, scale float32) {
	w := len(k)
	for i := range m {
		m[i] *= eg
	}
	delta := make([]float32, len(out))
	refDotsF32(k, m, w, delta)
	for i := range delta {
		delta[i] = (v[i] - delta[i]) * beta
	}
	for r := range delta {
		mr, dr := m[r*w:(r+1)*w], delta[r]
		for i, ki := range k {
			mr[i] += float32(ki * dr)
		}
	}
	refDotsF32(q, m, w, out)
	for i := range out {
		out[i] *= scale
	}
}

// TestDeltaRuleIdentical: DeltaRule (the assembly where it runs), its Go
// reference and the unfused sequence of whole-state passes leave the same
// state and outputs bit for bit, over several tokens, for row counts and
// widths with and without remainders of the 4-row groups and 4-lane dots.
func TestDeltaRuleIdentical(t *testing.T) {
	rng := rand.New(rand.NewPCG(39, 1))
	for _, w := range []int{1, 3, 4, 8, 12, 32, 128, 130} {
		for _, rows := range []int{1, 3, 4, 5, 8, 13, 128} {
			t.Run(fmt.Sprintf("w%d/rows%d", w, rows), func(t *testing.T) {
				m, _, _, _ := deltaInputs(rng, rows, w)
				m1, m2 := slices.Clone(m), slices.Clone(m)
				o0, o1, o2 := make([]float32, rows), make([]float32, rows), make([]float32, rows)
				for tok := range 3 {
					_, k, q, v := deltaInputs(rng, rows, w)
					eg, beta, scale := float32(0.9+0.1*rng.Float64()), rng.Float32(), float32(0.088388)
					unfusedDelta(m, k, q, v, o0, eg, beta, scale)
					refDeltaRule(m1, k, q, v, o1, eg, beta, scale)
					DeltaRule(m2, k, q, v, o2, eg, beta, scale)
					if !bitsEqual(m1, m) || !bitsEqual(o1, o0) {
						t.Fatalf("token %d: the reference differs from the unfused passes", tok)
					}
					if !bitsEqual(m2, m) || !bitsEqual(o2, o0) {
						t.Fatalf("token %d (%s): DeltaRule differs from the unfused passes", tok, Implementation())
					}
				}
			})
		}
	}
}

// BenchmarkDeltaRule: one token of one Qwen3.6-35B-A3B value head (a
// 128×128 state).
func BenchmarkDeltaRule(b *testing.B) {
	rng := rand.New(rand.NewPCG(1, 2))
	m, k, q, v := deltaInputs(rng, 128, 128)
	out := make([]float32, 128)
	for _, bc := range []struct {
		name string
		f    func(m, k, q, v, out []float32, eg, beta, scale float32)
	}{{"kernel", DeltaRule}, {"reference", refDeltaRule}} {
		b.Run(bc.name, func(b *testing.B) {
			for range b.N {
				bc.f(m, k, q, v, out, 0.99, 0.5, 0.088)
			}
		})
	}
}
