package minimaxm2

// family.go: the minimax-m2 family's value (family.Family) and its model
// side beyond New: no metadata keys of its own, a KV cache in every layer
// (model.AttentionOnly) and its inspect rows.

import (
	"fmt"

	"github.com/pipe-engine/pipe/model"
	"github.com/pipe-engine/pipe/model/family"
)

func init() { family.Register(Family{}) }

// Family is the minimax-m2 family: the model (New), the inspect rows
// here, the generator side in gen.go.
type Family struct{ model.AttentionOnly }

// Arch implements family.Family.
func (Family) Arch() string { return "minimax-m2" }

// New implements model.Family.
func (Family) New(d *model.Desc, src model.DenseSource, opt model.Options) (model.Model, error) {
	return New(d, src, opt)
}

// InspectRows implements model.Family: every layer MoE, the partial
// rotation, the whole-projection Q/K norms and the gating.
func (Family) InspectRows(d *model.Desc) []model.InspectRow {
	hp := &d.HParams
	gating := "sigmoid"
	switch hp.MoE.GatingFunc {
	case gatingSoftmax:
		gating = "softmax"
	case gatingNone:
		gating = "missing (refused)"
	case gatingSigmoid:
	default:
		gating = fmt.Sprintf("%d (unsupported)", hp.MoE.GatingFunc)
	}
	return []model.InspectRow{
		{Key: "layers", Value: fmt.Sprintf("%d MoE (no dense layers, no shared experts)", hp.NLayer)},
		{Key: "rotary dims", Value: fmt.Sprintf("%d of head %d (NeoX)", hp.NRot, hp.HeadDim)},
		{Key: "q/k norm", Value: fmt.Sprintf("whole projection (%d and %d wide)", hp.NHead*hp.HeadDim, hp.NHeadKV*hp.HeadDim)},
		{Key: "routing", Value: gating + " top-k with exp_probs_b, renormalised"},
	}
}
