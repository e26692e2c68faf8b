package bailingmoe2

// family.go: the bailingmoe2 family's value (family.Family) and its model
// side beyond New: its own metadata key and its inspect rows. Its state is
// a plain KV cache in every layer (model.AttentionOnly).

import (
	"fmt"

	"github.com/pipe-engine/pipe/model"
	"github.com/pipe-engine/pipe/model/family"
)

func init() { family.Register(Family{}) }

// Family is the bailingmoe2 family: the model (New), the key and inspect
// rows here, the generator side in gen.go.
type Family struct{ model.AttentionOnly }

// Arch implements family.Family.
func (Family) Arch() string { return "bailingmoe2" }

// ReadHParams implements model.Family: nextn_predict_layers, which must be
// 0 (llama.cpp loads NextN layers and skips them; pipe does not run files
// that have them yet).
func (Family) ReadHParams(r *model.MetaReader, _ *model.HParams) (any, error) {
	if n := r.Int("nextn_predict_layers", false, model.MaxDim); n > 0 {
		return nil, fmt.Errorf("%w: bailingmoe2.nextn_predict_layers = %d (NextN/MTP layers)", model.ErrUnsupportedArch, n)
	}
	return nil, nil
}

// New implements model.Family.
func (Family) New(d *model.Desc, src model.DenseSource, opt model.Options) (model.Model, error) {
	return New(d, src, opt)
}

// InspectRows implements model.Family: the attention's shape (the dense /
// expert split and the gating are common rows).
func (Family) InspectRows(d *model.Desc) []model.InspectRow {
	hp := &d.HParams
	return []model.InspectRow{
		{Key: "attention", Value: fmt.Sprintf("fused attn_qkv, q/k norm, NeoX RoPE over %d of %d dims", hp.NRot, hp.HeadDim)},
		{Key: "shared expert width", Value: fmt.Sprint(sharedWidth(*hp))},
	}
}
