package gemma4

import (
	"math"
	"testing"

	"github.com/pipe-engine/pipe/model"
	"github.com/pipe-engine/pipe/model/goldentest"
)

// TestSeparateGateUp: a layer with ffn_gate_exps and ffn_up_exps apart
// computes what the fused ffn_gate_up_exps does (its first n_ff rows are the
// gate, the next n_ff the up projection): the F32 golden file's fused bytes,
// split, give bit-identical expert outputs.
func TestSeparateGateUp(t *testing.T) {
	const path = "../../testdata/golden/models/tiny-gemma4-F32.gguf"
	mm, d, raw := goldentest.Load(t, path, model.Options{})
	m := mm.(*Model)
	E := m.nEmbd
	x := make([]float32, 2*E)
	for i := range x {
		x[i] = float32(math.Sin(float64(i)))
	}
	var s model.Scratch
	for e := 0; e < m.nExpert; e++ {
		sl := d.Experts[1][e]
		gu := raw[sl[0].Off : sl[0].Off+sl[0].Len]
		down := raw[sl[1].Off : sl[1].Off+sl[1].Len]
		fused := make([]float32, 2*E)
		if err := m.ComputeExpert(1, e, [][]byte{gu, down}, 2, x, fused, &s); err != nil {
			t.Fatal(err)
		}
		sep := *m.Experts
		sep.ByLayer = append([]model.ExpertLayer(nil), m.ByLayer...)
		X := &sep.ByLayer[1]
		X.Fused, X.GateT, X.UpT = false, X.GateUpT, X.GateUpT
		half := len(gu) / 2
		apart := make([]float32, 2*E)
		if err := sep.ComputeExpert(1, e, [][]byte{gu[:half], gu[half:], down}, 2, x, apart, &s); err != nil {
			t.Fatal(err)
		}
		for i := range fused {
			if math.Float32bits(fused[i]) != math.Float32bits(apart[i]) {
				t.Fatalf("expert %d output %d: fused %v, separate %v", e, i, fused[i], apart[i])
			}
		}
		if err := sep.ComputeExpert(1, e, [][]byte{gu, down}, 2, x, apart, &s); err == nil {
			t.Fatal("two parts accepted for separate gate and up")
		}
	}
}
