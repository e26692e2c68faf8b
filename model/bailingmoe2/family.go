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

// InspectRows implements model.Family: the layers (dense leading layers,
// MoE layers with their shared experts; NextN layers, which ReadHParams
// refuses, are none), the attention's shape and the shared expert's width
// (the gating is a common row).
func (Family) InspectRows(d *model.Desc) []model.InspectRow {
	hp := &d.HParams
	return []model.InspectRow{
		{Key: "layers", Value: layersRow(hp)},
		{Key: "NextN (MTP) layers", Value: "none (files with them are refused)"},
		{Key: "attention", Value: fmt.Sprintf("fused attn_qkv, q/k norm, NeoX RoPE over %d of %d dims", hp.NRot, hp.HeadDim)},
		{Key: "shared expert width", Value: fmt.Sprint(sharedWidth(*hp))},
	}
}

// layersRow is the dense / expert split: the leading dense layers (plain
// SwiGLU FFN) and the MoE layers (routed top-k of n plus the shared
// experts).
func layersRow(hp *model.HParams) string {
	dense, moe := hp.MoE.LeadingDense, hp.NLayer-hp.MoE.LeadingDense
	var row string
	switch dense {
	case 0:
		row = "no dense layers"
	case 1:
		row = fmt.Sprintf("1 dense (0, FFN %d)", hp.NFF)
	default:
		row = fmt.Sprintf("%d dense (0-%d, FFN %d)", dense, dense-1, hp.NFF)
	}
	return fmt.Sprintf("%s + %d MoE (routed top-%d of %d + %d shared expert(s))", row, moe, hp.NExpertUsed, hp.NExpert, hp.MoE.NShared)
}
