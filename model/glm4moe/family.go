package glm4moe

// family.go: the glm4moe family's value (family.Family) and its model side
// beyond New: its own metadata key (nextn_predict_layers), the
// per-sequence state of the layers it runs and its inspect rows.

import (
	"fmt"

	"github.com/pipe-engine/pipe/model"
	"github.com/pipe-engine/pipe/model/family"
)

func init() { family.Register(Family{}) }

// Family is the glm4moe family: the model (New), the key, state and
// inspect rows here, the generator side in gen.go.
type Family struct{}

// HParams are glm4moe's own hyper-parameters (model.Desc.FamilyHP).
type HParams struct {
	// NextN is nextn_predict_layers: the last NextN blocks of block_count
	// are multi-token-prediction layers, loaded and never run.
	NextN int `json:"nextn_predict_layers"`
}

// Arch implements family.Family.
func (Family) Arch() string { return "glm4moe" }

// ReadHParams implements model.Family: nextn_predict_layers, which must
// leave at least one layer to run (llama.cpp asserts the same).
func (Family) ReadHParams(r *model.MetaReader, h *model.HParams) (any, error) {
	own := HParams{NextN: r.Int("nextn_predict_layers", false, model.MaxDim)}
	if r.Known() && h.NLayer > 0 && own.NextN >= h.NLayer {
		return nil, r.Bad("glm4moe.nextn_predict_layers %d is not below block_count %d", own.NextN, h.NLayer)
	}
	return own, nil
}

// New implements model.Family.
func (Family) New(d *model.Desc, src model.DenseSource, opt model.Options) (model.Model, error) {
	return New(d, src, opt)
}

// runLayers is the number of layers the decoder runs: block_count
// without the NextN layers.
func runLayers(d *model.Desc) int { return max(d.HParams.NLayer-nextnLayers(d), 0) }

// StateBytes implements model.Family: K and V rows of the KV heads in
// every layer that runs (the NextN layers keep none).
func (Family) StateBytes(d *model.Desc, positions, elemBytes int) int64 {
	hp := &d.HParams
	return model.KVStateBytes(runLayers(d), 2*hp.NHeadKV*hp.HeadDim, positions, elemBytes)
}

// TokenWork implements model.Family: every run layer's attention reads K
// and V rows at the depth.
func (Family) TokenWork(d *model.Desc, positions int) model.TokenWork {
	hp := &d.HParams
	return model.TokenWork{Attention: model.AttentionWork(runLayers(d), 2*hp.NHeadKV*hp.HeadDim, positions)}
}

// InspectRows implements model.Family: the layers run (dense and MoE), the
// NextN layers loaded and skipped, the partial rotation and the Q/K norms.
func (Family) InspectRows(d *model.Desc) []model.InspectRow {
	hp := &d.HParams
	run, nextn := runLayers(d), nextnLayers(d)
	dense := min(hp.MoE.LeadingDense, run)
	rows := []model.InspectRow{
		{Key: "layers run", Value: fmt.Sprintf("%d of %d: %d dense + %d MoE", run, hp.NLayer, dense, run-dense)},
		{Key: "NextN (MTP) layers", Value: nextnRow(run, nextn)},
		{Key: "rotary dims", Value: fmt.Sprintf("%d of head %d (NeoX)", hp.NRot, hp.HeadDim)},
	}
	_, qn := d.Tensor(blk(0, "attn_q_norm.weight"))
	_, qb := d.Tensor(blk(0, "attn_q.bias"))
	rows = append(rows, model.InspectRow{Key: "q/k norm, qkv bias", Value: fmt.Sprintf("%s, %s", yesNo(qn), yesNo(qb))})
	return rows
}

func nextnRow(run, nextn int) string {
	switch nextn {
	case 0:
		return "none"
	case 1:
		return fmt.Sprintf("1 (blk.%d: loaded, not run)", run)
	}
	return fmt.Sprintf("%d (blk.%d-%d: loaded, not run)", nextn, run, run+nextn-1)
}

func yesNo(b bool) string {
	if b {
		return "yes"
	}
	return "no"
}
