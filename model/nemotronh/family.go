package nemotronh

// family.go: the nemotron_h_moe family's value (family.Family) and its
// model side beyond New: its own metadata keys (the per-layer
// feed_forward_length that, with attention.head_count_kv, says each
// block's kind), its per-sequence state and its inspect rows.

import (
	"fmt"
	"strings"

	"github.com/pipe-engine/pipe/model"
	"github.com/pipe-engine/pipe/model/family"
)

// arch is the GGUF general.architecture of the family.
const arch = "nemotron_h_moe"

// llama.cpp's LLAMA_EXPERT_GATING_FUNC_TYPE_SIGMOID, the gating
// nemotron-h.cpp passes to build_moe_ffn whatever the file says.
const gatingSigmoid = 2

func init() { family.Register(Family{}) }

// Family is the nemotron_h_moe family: the model (New), the keys, state
// and inspect rows here, the generator side in gen.go.
type Family struct{}

// HParams are nemotron_h_moe's own hyper-parameters (model.Desc.FamilyHP).
type HParams struct {
	// Pattern is each block's kind, as llama.cpp's loader tells them: M
	// a Mamba-2 block (head_count_kv and feed_forward_length both 0), *
	// attention (feed_forward_length 0), E a MoE block.
	Pattern string `json:"pattern"`
	// LatentSize is moe_latent_size (Nemotron 3 Super's latent MoE,
	// which pipe refuses); NextN is nextn_predict_layers (an MTP block
	// appended to the trunk, refused).
	LatentSize int `json:"moe_latent_size,omitempty"`
	NextN      int `json:"nextn_predict_layers,omitempty"`
}

// Arch implements family.Family.
func (Family) Arch() string { return arch }

// ReadHParams implements model.Family: the per-layer feed_forward_length
// (with the common per-layer head_count_kv, the blocks' kinds; the Mamba-2
// ones are marked recurrent in h.SSM, so the shared state and inspect
// code count them), moe_latent_size and nextn_predict_layers.
func (Family) ReadHParams(r *model.MetaReader, h *model.HParams) (any, error) {
	_, ff := r.Ints("feed_forward_length", false, model.MaxDim)
	own := HParams{LatentSize: r.Int("moe_latent_size", false, model.MaxDim), NextN: r.Int("nextn_predict_layers", false, model.MaxDim)}
	var b strings.Builder
	rec := make([]bool, h.NLayer)
	for il := range rec {
		kv, f := h.NHeadKV, h.NFF
		if h.HeadCountKVLayers != nil {
			kv = at(h.HeadCountKVLayers, il)
		}
		if ff != nil {
			f = at(ff, il)
		}
		switch {
		case kv == 0 && f == 0:
			b.WriteByte('M')
			rec[il] = true
		case f == 0:
			b.WriteByte('*')
		default:
			b.WriteByte('E')
		}
	}
	own.Pattern = b.String()
	h.SSM.Recurrent = rec
	return own, nil
}

// at is xs[i], 0 past its end (a short per-layer array, refused by New).
func at(xs []int, i int) int {
	if i < len(xs) {
		return xs[i]
	}
	return 0
}

// New implements model.Family.
func (Family) New(d *model.Desc, src model.DenseSource, opt model.Options) (model.Model, error) {
	return New(d, src, opt)
}

// own is d's HParams.
func own(d *model.Desc) HParams {
	h, _ := d.FamilyHP.(HParams)
	return h
}

// count is the number of blocks of kind c.
func (h HParams) count(c byte) int { return strings.Count(h.Pattern, string(c)) }

// StateBytes implements model.Family: the attention blocks' K and V rows
// and the Mamba-2 blocks' float32 convolution and SSM states; the MoE
// blocks keep nothing.
func (Family) StateBytes(d *model.Desc, positions, elemBytes int) int64 {
	hp, o := &d.HParams, own(d)
	kv := model.KVStateBytes(o.count('*'), 2*hp.NHeadKV*hp.HeadDim, positions, elemBytes)
	if kv == 1<<62 {
		return kv
	}
	return kv + int64(o.count('M'))*4*int64(hp.SSM.StateFloats())
}

// StateKeys implements model.StateKeyer: the keys that size the Mamba-2
// blocks' state.
func (Family) StateKeys(d *model.Desc) string {
	g := d.HParams.SSM
	return fmt.Sprintf("ssm.conv_kernel %d, ssm.inner_size %d, ssm.state_size %d, ssm.group_count %d", g.ConvKernel, g.InnerSize, g.StateSize, g.GroupCount)
}

// TokenWork implements model.Family: the attention blocks' K and V rows at
// the depth, each Mamba-2 block's state read and written and its
// convolution (d_conv taps over x, B and C).
func (Family) TokenWork(d *model.Desc, positions int) model.TokenWork {
	hp, o := &d.HParams, own(d)
	g := hp.SSM
	n := int64(o.count('M'))
	return model.TokenWork{
		Attention: model.AttentionWork(o.count('*'), 2*hp.NHeadKV*hp.HeadDim, positions),
		Recurrent: n * 2 * int64(g.StateSize*g.InnerSize),
		Conv:      n * int64(g.ConvKernel*g.ConvChannels()),
	}
}

// InspectRows implements model.Family: the block pattern, the dense and
// expert blocks, the Mamba-2 geometry and the routing.
func (Family) InspectRows(d *model.Desc) []model.InspectRow {
	hp, o := &d.HParams, own(d)
	g := hp.SSM
	heads := max(g.TimeStepRank, 1)
	return []model.InspectRow{
		{Key: "block pattern", Value: o.Pattern + " (M Mamba-2, * attention, E MoE)"},
		{Key: "layers", Value: fmt.Sprintf("%d MoE (routed + 1 shared expert, squared ReLU), %d Mamba-2, %d attention (no RoPE); dense blocks: the Mamba-2 and attention ones", o.count('E'), o.count('M'), o.count('*'))},
		{Key: "mamba-2", Value: fmt.Sprintf("%d heads of %d, state %d, %d groups, conv %d (state %d floats per block)", g.TimeStepRank, g.InnerSize/heads, g.StateSize, g.GroupCount, g.ConvKernel, g.StateFloats())},
		{Key: "routing", Value: fmt.Sprintf("sigmoid top-k with exp_probs_b, renormalised %v, scaled ×%g", hp.MoE.WeightsNorm, hp.MoE.WeightsScale)},
	}
}
