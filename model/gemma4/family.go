package gemma4

// family.go: the gemma4 family's value (family.Family) and its model side
// beyond New.

import (
	"github.com/pipe-engine/pipe/model"
	"github.com/pipe-engine/pipe/model/family"
)

func init() { family.Register(Family{}) }

// Family is the gemma4 family: the model (New), its state here, the
// generator side in gen.go.
type Family struct{}

// Arch implements family.Family.
func (Family) Arch() string { return "gemma4" }

// ReadHParams implements model.Family: the sliding-window geometry, the
// per-layer pattern and the soft-cap are read for every file (model.SWAGeom
// and the HParams fields gemma4's kin share); gemma4 has none of its own.
func (Family) ReadHParams(*model.MetaReader, *model.HParams) (any, error) { return nil, nil }

// New implements model.Family.
func (Family) New(d *model.Desc, src model.DenseSource, opt model.Options) (model.Model, error) {
	return New(d, src, opt)
}

// StateBytes implements model.Family: every layer sized as the widest
// (the full-attention layers' KV heads × key_length), the bound the engine
// has always checked.
func (Family) StateBytes(d *model.Desc, positions, elemBytes int) int64 {
	return model.AttentionStateBytes(&d.HParams, positions, elemBytes)
}

// InspectRows implements model.Family: the sliding-window rows are the
// common ones.
func (Family) InspectRows(*model.Desc) []model.InspectRow { return nil }
