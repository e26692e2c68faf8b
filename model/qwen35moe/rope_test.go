package qwen35moe

import (
	"math"
	"math/rand"
	"testing"

	"github.com/pipe-engine/pipe/model"
)

// TestIMRopeTableMatchesApplyNeoX checks that imrope rotates from a
// position's table (Angles once, RotateNeoX on several heads) bit for bit as
// ApplyNeoX, still pairs included, for text positions near and far.
func TestIMRopeTableMatchesApplyNeoX(t *testing.T) {
	anyStill := false
	for _, hp := range []model.HParams{
		{NRot: 64, HeadDim: 256, RopeSections: []int{11, 11, 10, 0}, RopeFreqBase: 1e7},
		{NRot: 128, HeadDim: 128, RopeSections: []int{24, 20, 20, 0}, RopeFreqBase: 5e6, RopeScaleLinear: 4},
		{NRot: 32, HeadDim: 64, RopeSections: []int{3, 2, 2, 5}, RopeFreqBase: 10000},
	} {
		r, err := newIMRope(hp)
		if err != nil {
			t.Fatal(err)
		}
		var tr model.TableRotation = r
		for _, s := range r.still {
			anyStill = anyStill || s
		}
		rng := rand.New(rand.NewSource(35))
		cs := make([]float32, tr.TableLen())
		for _, pos := range []int{0, 1, 2, 3, 7, 100, 1000, 4095, 65535, 262143} {
			tr.Angles(pos, cs)
			for head := 0; head < 3; head++ {
				x := make([]float32, hp.HeadDim)
				for i := range x {
					x[i] = float32(rng.NormFloat64())
				}
				x[0], x[hp.NRot/2] = float32(math.Copysign(0, -1)), float32(math.Inf(1))
				want, got := append([]float32(nil), x...), append([]float32(nil), x...)
				r.ApplyNeoX(want, pos)
				tr.RotateNeoX(got, cs)
				for i := range want {
					if math.Float32bits(got[i]) != math.Float32bits(want[i]) {
						t.Fatalf("sections %v pos %d dim %d: table %v, ApplyNeoX %v", hp.RopeSections, pos, i, got[i], want[i])
					}
				}
			}
		}
	}
	if !anyStill {
		t.Fatal("no section layout with still pairs: the test does not cover them")
	}
}
