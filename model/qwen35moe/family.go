package qwen35moe

// family.go: the qwen35moe family's value (family.Family) and its model
// side beyond New: the state of its delta-net and attention layers.

import (
	"github.com/pipe-engine/pipe/model"
	"github.com/pipe-engine/pipe/model/family"
)

func init() { family.Register(Family{}) }

// Family is the qwen35moe family: the model (New), its state here, the
// generator side in gen.go.
type Family struct{}

// Arch implements family.Family.
func (Family) Arch() string { return "qwen35moe" }

// ReadHParams implements model.Family: the delta-net's ssm.* keys,
// full_attention_interval and rope.dimension_sections are the shared
// recurrent-mixer and RoPE keys every file is read for (model.SSMGeom,
// HParams.RopeSections); qwen35moe has none of its own.
func (Family) ReadHParams(*model.MetaReader, *model.HParams) (any, error) { return nil, nil }

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
// recurrent rows.
func (Family) InspectRows(*model.Desc) []model.InspectRow { return nil }

// TokenWork implements model.Family: the attention layers' K and V rows
// at the depth, and per delta-net layer its S×S state per value head
// (d_state × d_inner) read and written and its convolution (conv_kernel
// taps over the q, k and v channels).
func (Family) TokenWork(d *model.Desc, positions int) model.TokenWork {
	hp := &d.HParams
	g := &hp.SSM
	return model.HybridWork(hp, g.IsRecurrent, g.StateSize*g.InnerSize, g.ConvKernel*g.ConvChannels(), positions)
}
