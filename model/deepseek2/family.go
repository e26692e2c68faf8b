package deepseek2

// family.go: the deepseek2 family's value (family.Family) and its model
// side beyond New: the latent attention's per-sequence state.

import (
	"github.com/pipe-engine/pipe/model"
	"github.com/pipe-engine/pipe/model/family"
)

func init() { family.Register(Family{}) }

// Family is the deepseek2 family: the model (New), its state here, the
// generator side in gen.go.
type Family struct{}

// Arch implements family.Family.
func (Family) Arch() string { return "deepseek2" }

// ReadHParams implements model.Family: the latent-attention keys
// (model.MLAGeom) and the MoE keys (model.MoEGeom) are read for every file,
// as the shared pieces deepseek2's kin (GLM, DeepSeek V3/V4) build on;
// deepseek2 has none of its own.
func (Family) ReadHParams(*model.MetaReader, *model.HParams) (any, error) { return nil, nil }

// New implements model.Family.
func (Family) New(d *model.Desc, src model.DenseSource, opt model.Options) (model.Model, error) {
	return New(d, src, opt)
}

// StateBytes implements model.Family: every layer caches, per position,
// the kv_lora_rank latent and its n_rot rotated key part (the value is
// the latent's leading part).
func (Family) StateBytes(d *model.Desc, positions, elemBytes int) int64 {
	hp := &d.HParams
	return model.KVStateBytes(hp.NLayer, hp.MLA.KVLoraRank+hp.NRot, positions, elemBytes)
}

// InspectRows implements model.Family: the latent attention and gating
// rows are the common ones.
func (Family) InspectRows(*model.Desc) []model.InspectRow { return nil }

// TokenWork implements model.Family: every layer's attention reads, per
// position, the cached kv_lora_rank latent and its n_rot rotated key part.
func (Family) TokenWork(d *model.Desc, positions int) model.TokenWork {
	hp := &d.HParams
	return model.TokenWork{Attention: model.AttentionWork(hp.NLayer, hp.MLA.KVLoraRank+hp.NRot, positions)}
}
