package qwen3next

// family.go: the qwen3next family's value (family.Family) and its model
// side beyond New: the state of its delta-net and attention layers, and
// its `pipe inspect` rows.

import (
	"fmt"

	"github.com/pipe-engine/pipe/model"
	"github.com/pipe-engine/pipe/model/family"
)

func init() { family.Register(Family{}) }

// Family is the qwen3next family: the model (New), its state here, the
// generator side in gen.go.
type Family struct{}

// Arch implements family.Family.
func (Family) Arch() string { return "qwen3next" }

// ReadHParams implements model.Family: the delta-net's ssm.* keys and
// full_attention_interval are the shared recurrent-mixer keys every file
// is read for (model.SSMGeom); qwen3next has none of its own. As llama.cpp,
// a file without expert_feed_forward_length has experts of
// feed_forward_length / expert_used_count.
func (Family) ReadHParams(r *model.MetaReader, h *model.HParams) (any, error) {
	if _, ok := r.Get("expert_feed_forward_length"); !ok && h.NExpertUsed > 0 {
		h.NFFExp = h.NFF / h.NExpertUsed
	}
	return nil, nil
}

// New implements model.Family.
func (Family) New(d *model.Desc, src model.DenseSource, opt model.Options) (model.Model, error) {
	return New(d, src, opt)
}

// StateBytes implements model.Family: the attention layers' K and V rows
// and each delta-net layer's convolution inputs and d_state × d_inner
// state (model.SSMGeom.StateFloats), in float32.
func (Family) StateBytes(d *model.Desc, positions, elemBytes int) int64 {
	hp := &d.HParams
	return model.HybridStateBytes(hp, hp.SSM.IsRecurrent, hp.SSM.StateFloats(), positions, elemBytes)
}

// InspectRows implements model.Family: the delta-net rows are the common
// recurrent rows; these add how its heads are shared and the attention's
// partial rotation.
func (Family) InspectRows(d *model.Desc) []model.InspectRow {
	hp := &d.HParams
	g := &hp.SSM
	if g.GroupCount <= 0 {
		return nil
	}
	return []model.InspectRow{
		{Key: "delta-net heads", Value: fmt.Sprintf("%d key heads, each read by %d consecutive value heads of %d", g.GroupCount, g.TimeStepRank/g.GroupCount, g.StateSize)},
		{Key: "attention rope", Value: fmt.Sprintf("NeoX on %d of %d dims per head, gated output", hp.NRot, hp.HeadDim)},
	}
}

// TokenWork implements model.Family: the attention layers' K and V rows
// at the depth, and per delta-net layer its S×S state per value head
// (d_state × d_inner) read and written and its convolution (conv_kernel
// taps over the q, k and v channels).
func (Family) TokenWork(d *model.Desc, positions int) model.TokenWork {
	hp := &d.HParams
	g := &hp.SSM
	return model.HybridWork(hp, g.IsRecurrent, g.StateSize*g.InnerSize, g.ConvKernel*g.ConvChannels(), positions)
}
