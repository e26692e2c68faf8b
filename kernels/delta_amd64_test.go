//go:build amd64 && !purego

package kernels

import (
	"fmt"
	"math/rand/v2"
	"slices"
	"testing"
)

// TestDeltaRuleAsmIdentical: each amd64 DeltaRule routine this CPU runs
// (AVX2, AVX-512) equals the reference bit for bit over several tokens,
// whichever deltaRule would pick.
func TestDeltaRuleAsmIdentical(t *testing.T) {
	sets := map[string]func(m, k, q, v, out []float32, r4 int, eg, beta, scale float32){}
	if hasAVX2 {
		sets["avx2"] = deltaAVX2
	}
	if hasAVX512 {
		sets["avx512"] = deltaAVX512
	}
	if len(sets) == 0 {
		t.Skip("no AVX2 on this CPU")
	}
	rng := rand.New(rand.NewPCG(39, 3))
	for name, f := range sets {
		for _, w := range []int{16, 48, 128} {
			for _, rows := range []int{4, 12, 128} {
				t.Run(fmt.Sprintf("%s/w%d/rows%d", name, w, rows), func(t *testing.T) {
					m, _, _, _ := deltaInputs(rng, rows, w)
					m2 := slices.Clone(m)
					o1, o2 := make([]float32, rows), make([]float32, rows)
					for tok := range 3 {
						_, k, q, v := deltaInputs(rng, rows, w)
						eg, beta := float32(0.9+0.1*rng.Float64()), rng.Float32()
						refDeltaRule(m, k, q, v, o1, eg, beta, 0.0883883)
						f(m2, k, q, v, o2, rows, eg, beta, 0.0883883)
						if !bitsEqual(m2, m) || !bitsEqual(o2, o1) {
							t.Fatalf("token %d: %s differs from the reference", tok, name)
						}
					}
				})
			}
		}
	}
}

// BenchmarkDeltaRuleAsm: one 128×128 value head per routine.
func BenchmarkDeltaRuleAsm(b *testing.B) {
	rng := rand.New(rand.NewPCG(1, 2))
	m, k, q, v := deltaInputs(rng, 128, 128)
	out := make([]float32, 128)
	for _, bc := range []struct {
		name string
		ok   bool
		f    func(m, k, q, v, out []float32, r4 int, eg, beta, scale float32)
	}{{"avx2", hasAVX2, deltaAVX2}, {"avx512", hasAVX512, deltaAVX512}} {
		b.Run(bc.name, func(b *testing.B) {
			if !bc.ok {
				b.Skip("not on this CPU")
			}
			for range b.N {
				bc.f(m, k, q, v, out, 128, 0.99, 0.5, 0.088)
			}
		})
	}
}
