package model

import (
	"math"
	"math/rand"
	"testing"
)

// ropeTestPositions are the positions the table tests rotate at: every one
// of a short context and some far ones.
func ropeTestPositions() []int {
	var ps []int
	for p := 0; p < 300; p++ {
		ps = append(ps, p)
	}
	return append(ps, 1023, 4095, 4096, 32767, 40960, 131071, 1<<20)
}

// ropeTestVector is a head vector of random values with zeros of both signs
// and a large value among them.
func ropeTestVector(rng *rand.Rand, n int) []float32 {
	x := make([]float32, n)
	for i := range x {
		x[i] = float32(rng.NormFloat64() * 3)
	}
	x[0], x[1], x[n/2] = 0, float32(math.Copysign(0, -1)), 1e30
	return x
}

// sameBits fails t unless got and want are equal bit for bit.
func sameBits(t *testing.T, what string, pos int, got, want []float32) {
	t.Helper()
	for i := range want {
		if math.Float32bits(got[i]) != math.Float32bits(want[i]) {
			t.Fatalf("%s at pos %d: dim %d = %v (%#x), per-head rotation gives %v (%#x)",
				what, pos, i, got[i], math.Float32bits(got[i]), want[i], math.Float32bits(want[i]))
		}
	}
}

// ropeTables are the table rotations under test, with their head width.
func ropeTables() []struct {
	name string
	r    interface {
		TableRotation
		TableNormRotation
	}
	hd int
} {
	ff := make([]float32, 32)
	for i := range ff {
		ff[i] = 1 + float32(i)*0.37
	}
	yarn := func(nDims int, base, fs, ext, attn float32, corr [2]float32) *YaRN {
		return &YaRN{NDims: nDims, Base: base, FreqScale: fs, ExtFactor: ext, AttnFactor: attn, Corr: corr,
			thetaScale: float32(math.Pow(float64(base), float64(float32(-2.0)/float32(nDims))))}
	}
	return []struct {
		name string
		r    interface {
			TableRotation
			TableNormRotation
		}
		hd int
	}{
		{"rope-qwen3", Rope{NDims: 128, Base: 1e6, FreqScale: 1, AttnScale: 1}, 128},
		{"rope-partial-scaled", Rope{NDims: 64, Base: 10000, FreqScale: 0.25, AttnScale: 1.3}, 128},
		{"rope-freq-factors", Rope{NDims: 64, Base: 1e6, FreqScale: 0.5, AttnScale: 1, FreqFactors: ff}, 96},
		{"yarn-unscaled", yarn(64, 10000, 1, 0, 1, [2]float32{}), 64},
		{"yarn", yarn(64, 150000, 1.0/32, 1, 1.3465736, YarnCorrDims(64, 4096, 150000, 32, 1)), 64},
		{"yarn-partial", yarn(32, 10000, 0.025, 1, 1.2, YarnCorrDims(32, 4096, 10000, 32, 1)), 48},
	}
}

// TestRotationTablesMatchPerHead checks that rotating from a position's
// table (Angles once, then RotateNeoX/RotateNorm on several heads) equals
// ApplyNeoX/ApplyNorm bit for bit, for every rotation kind of this package.
func TestRotationTablesMatchPerHead(t *testing.T) {
	rng := rand.New(rand.NewSource(27))
	for _, tc := range ropeTables() {
		t.Run(tc.name, func(t *testing.T) {
			cs := make([]float32, tc.r.TableLen())
			for _, pos := range ropeTestPositions() {
				tc.r.Angles(pos, cs)
				for head := 0; head < 3; head++ {
					x := ropeTestVector(rng, tc.hd)
					want, got := append([]float32(nil), x...), append([]float32(nil), x...)
					tc.r.ApplyNeoX(want, pos)
					tc.r.RotateNeoX(got, cs)
					sameBits(t, "RotateNeoX", pos, got, want)
					want, got = append(want[:0], x...), append(got[:0], x...)
					tc.r.ApplyNorm(want, pos)
					tc.r.RotateNorm(got, cs)
					sameBits(t, "RotateNorm", pos, got, want)
				}
			}
		})
	}
}

// neoxOnly is a Rotation without a table: prepareHeads falls back to
// ApplyNeoX per head.
type neoxOnly struct{ r Rope }

func (n neoxOnly) ApplyNeoX(x []float32, pos int) { n.r.ApplyNeoX(x, pos) }

// TestPrepareHeadsTableAndFallback checks that prepareHeads rotates every
// token's Q and K heads as ApplyNeoX does, through the table and through
// the fallback for a Rotation without one.
func TestPrepareHeadsTableAndFallback(t *testing.T) {
	rope := Rope{NDims: 32, Base: 10000, FreqScale: 1, AttnScale: 1}
	const n, pos0 = 3, 41
	rng := rand.New(rand.NewSource(5))
	for _, r := range []Rotation{rope, neoxOnly{rope}} {
		a := &Attention{Geom: Geom{NHead: 4, NHeadKV: 2, HeadDim: 32, Rope: r}}
		d := &Decoder{Layers: []Layer{{Attn: *a}}, NEmbd: 8}
		p := d.newPass(n, pos0+n)
		p.Pos0 = pos0
		q, k := ropeTestVector(rng, n*a.QDim()), ropeTestVector(rng, n*a.KVDim())
		wantQ, wantK := append([]float32(nil), q...), append([]float32(nil), k...)
		for t := 0; t < n; t++ {
			for i := 0; i < a.NHead; i++ {
				rope.ApplyNeoX(wantQ[(t*a.NHead+i)*32:(t*a.NHead+i+1)*32], pos0+t)
			}
			for i := 0; i < a.NHeadKV; i++ {
				rope.ApplyNeoX(wantK[(t*a.NHeadKV+i)*32:(t*a.NHeadKV+i+1)*32], pos0+t)
			}
		}
		p.prepareHeads(a, q, k, make([]float32, len(k)))
		sameBits(t, "prepareHeads Q", pos0, q, wantQ)
		sameBits(t, "prepareHeads K", pos0, k, wantK)
	}
}

// BenchmarkPrepareHeads rotates one decode token's heads at Qwen3-30B-A3B's
// shapes (32 query and 4 KV heads of 128, NeoX over all 128 dims, base 1e6)
// through the position's table and per head (ApplyNeoX, the fallback).
func BenchmarkPrepareHeads(b *testing.B) {
	rope := Rope{NDims: 128, Base: 1e6, FreqScale: 1, AttnScale: 1}
	for _, bc := range []struct {
		name string
		r    Rotation
	}{{"table", rope}, {"per-head", neoxOnly{rope}}} {
		b.Run(bc.name, func(b *testing.B) {
			a := &Attention{Geom: Geom{NHead: 32, NHeadKV: 4, HeadDim: 128, Rope: bc.r}}
			d := &Decoder{Layers: []Layer{{Attn: *a}}, NEmbd: 8}
			p := d.newPass(1, 4096)
			rng := rand.New(rand.NewSource(1))
			q, k := ropeTestVector(rng, a.QDim()), ropeTestVector(rng, a.KVDim())
			v := make([]float32, len(k))
			b.ReportAllocs()
			b.ResetTimer()
			for i := 0; i < b.N; i++ {
				p.Pos0 = 100 + i%1024
				p.prepareHeads(a, q, k, v)
			}
		})
	}
}

// TestSwiGLUIsSiLUTimesUp: SwiGLU (the kernels' vectorized loop) equals
// SiLU(gate)·up bit for bit.
func TestSwiGLUIsSiLUTimesUp(t *testing.T) {
	rng := rand.New(rand.NewSource(3))
	n := 8*768 + 5
	gate, up := ropeTestVector(rng, n), ropeTestVector(rng, n)
	for i := range gate {
		gate[i] *= 10
	}
	got, want := make([]float32, n), make([]float32, n)
	SwiGLU(got, gate, up)
	for i := range want {
		want[i] = SiLU(gate[i]) * up[i]
	}
	sameBits(t, "SwiGLU", 0, got, want)
}

// TestRMSNormHeadsIsRMSNorm: RMSNormHeads equals RMSNorm of every row bit
// for bit, for row counts that leave every remainder of the groups of four,
// with and without a weight.
func TestRMSNormHeadsIsRMSNorm(t *testing.T) {
	rng := rand.New(rand.NewSource(9))
	const hd = 128
	w := ropeTestVector(rng, hd)
	w[hd/2] = 1.5
	for rows := 1; rows <= 9; rows++ {
		for _, wt := range [][]float32{nil, w} {
			x := ropeTestVector(rng, rows*hd)
			for i := range x {
				x[i] *= float32(1 + i/hd) // rows of different scales
			}
			x[hd/2] = 3 // not 1e30: a finite sum of squares
			want := append([]float32(nil), x...)
			for r := 0; r < rows; r++ {
				RMSNorm(want[r*hd:(r+1)*hd], want[r*hd:(r+1)*hd], 1e-6, wt)
			}
			RMSNormHeads(x, hd, 1e-6, wt)
			sameBits(t, "RMSNormHeads", rows, x, want)
		}
	}
}

// BenchmarkRMSNormHeads: one decode token's per-head Q norms at
// Qwen3-30B-A3B's shapes (32 heads of 128), four rows at a time and one by
// one.
func BenchmarkRMSNormHeads(b *testing.B) {
	rng := rand.New(rand.NewSource(1))
	x, w := make([]float32, 32*128), make([]float32, 128)
	for i := range x {
		x[i] = float32(rng.NormFloat64())
	}
	for i := range w {
		w[i] = 1
	}
	b.Run("heads", func(b *testing.B) {
		for range b.N {
			RMSNormHeads(x, 128, 1e-6, w)
		}
	})
	b.Run("rows", func(b *testing.B) {
		for range b.N {
			for r := 0; r < 32; r++ {
				RMSNorm(x[r*128:(r+1)*128], x[r*128:(r+1)*128], 1e-6, w)
			}
		}
	})
}
