package qwen3next

// family.go: the qwen3next family's value (family.Family) and its model
// side beyond New: its own metadata key (nextn_predict_layers), the state
// of its delta-net and attention layers, and its `pipe inspect` rows.

import (
	"fmt"

	"github.com/pipe-engine/pipe/model"
	"github.com/pipe-engine/pipe/model/family"
)

func init() { family.Register(Family{}) }

// Family is the qwen3next family: the model (New), its state here, the
// generator side in gen.go.
type Family struct{}

// HParams are qwen3next's own hyper-parameters (model.Desc.FamilyHP).
type HParams struct {
	// NextN is nextn_predict_layers: the last NextN blocks of block_count
	// are multi-token-prediction layers, checked and never run (nextn.go).
	NextN int `json:"nextn_predict_layers"`
}

// Arch implements family.Family.
func (Family) Arch() string { return "qwen3next" }

// ReadHParams implements model.Family: nextn_predict_layers, which must
// leave a layer to run (llama.cpp asserts the same); the delta-net's ssm.*
// keys and full_attention_interval are the shared recurrent-mixer keys
// every file is read for (model.SSMGeom). As llama.cpp: a file with NextN
// layers and no attention.recurrent_layers marks the recurrent layers
// among the run ones only (is_recr_impl), and a file without
// expert_feed_forward_length has experts of feed_forward_length /
// expert_used_count.
func (Family) ReadHParams(r *model.MetaReader, h *model.HParams) (any, error) {
	own := HParams{NextN: r.Int("nextn_predict_layers", false, model.MaxDim)}
	if r.Known() && h.NLayer > 0 && own.NextN >= h.NLayer {
		return nil, r.Bad("qwen3next.nextn_predict_layers %d is not below block_count %d", own.NextN, h.NLayer)
	}
	if own.NextN > 0 && h.SSM.Recurrent == nil && h.SSM.StateSize > 0 {
		h.SSM.Recurrent = recurrentLayers(h.NLayer, own.NextN, h.SSM.FullAttentionInterval)
	}
	if _, ok := r.Get("expert_feed_forward_length"); !ok && h.NExpertUsed > 0 {
		h.NFFExp = h.NFF / h.NExpertUsed
	}
	return own, nil
}

// New implements model.Family.
func (Family) New(d *model.Desc, src model.DenseSource, opt model.Options) (model.Model, error) {
	return New(d, src, opt)
}

// StateBytes implements model.Family: the run attention layers' K and V
// rows and each delta-net layer's convolution inputs and d_state × d_inner
// state (model.SSMGeom.StateFloats), in float32; the NextN layers keep
// none.
func (Family) StateBytes(d *model.Desc, positions, elemBytes int) int64 {
	hp := runHParams(d)
	return model.HybridStateBytes(hp, hp.SSM.IsRecurrent, hp.SSM.StateFloats(), positions, elemBytes)
}

// InspectRows implements model.Family: the delta-net rows are the common
// recurrent rows; these add the layers run (mixer and FFN: every layer
// routed experts plus a gated shared expert) and the NextN layers skipped,
// how the delta-net's heads are shared and the attention's partial
// rotation.
func (Family) InspectRows(d *model.Desc) []model.InspectRow {
	hp := &d.HParams
	g := &hp.SSM
	run, nextn, rec := runLayers(d), nextnLayers(d), runHParams(d).RecurrentLayers()
	rows := []model.InspectRow{
		{Key: "layers run", Value: fmt.Sprintf("%d of %d: %d delta-net + %d attention, every one MoE (routed top-%d of %d + a gated shared expert of %d; no dense layers)",
			run, hp.NLayer, rec, run-rec, hp.NExpertUsed, hp.NExpert, hp.NFFShExp)},
		{Key: "NextN (MTP) layers", Value: nextnRow(run, nextn)},
		{Key: "attention rope", Value: fmt.Sprintf("NeoX on %d of %d dims per head, gated output", hp.NRot, hp.HeadDim)},
	}
	if g.GroupCount > 0 {
		rows = append(rows, model.InspectRow{Key: "delta-net heads", Value: fmt.Sprintf("%d key heads, each read by %d consecutive value heads of %d", g.GroupCount, g.TimeStepRank/g.GroupCount, g.StateSize)})
	}
	return rows
}

func nextnRow(run, nextn int) string {
	switch nextn {
	case 0:
		return "none"
	case 1:
		return fmt.Sprintf("1 (blk.%d: checked, not run)", run)
	}
	return fmt.Sprintf("%d (blk.%d-%d: checked, not run)", nextn, run, run+nextn-1)
}

// TokenWork implements model.Family: the attention layers' K and V rows
// at the depth, and per delta-net layer its S×S state per value head
// (d_state × d_inner) read and written and its convolution (conv_kernel
// taps over the q, k and v channels).
func (Family) TokenWork(d *model.Desc, positions int) model.TokenWork {
	hp := runHParams(d)
	g := &hp.SSM
	return model.HybridWork(hp, g.IsRecurrent, g.StateSize*g.InnerSize, g.ConvKernel*g.ConvChannels(), positions)
}
