// Package olmoe is AI2's OLMoE architecture (OLMoE-1B-7B), following
// llama.cpp's src/models/olmoe.cpp graph and build_moe_ffn:
//
//	x = embd(tokens)
//	per layer: h = RMSNorm(x)·attn_norm; q,k,v = Wq h, Wk h, Wv h
//	           q = RMSNorm(q)·q_norm, k = RMSNorm(k)·k_norm over the whole
//	           projection (all heads at once), then per head NeoX RoPE
//	           causal attention; x = Wo attn + x
//	           h = RMSNorm(x)·ffn_norm; logits = Wgate_inp h
//	           x = x + Σ_rank w_r · down_e(silu(gate_e h) · up_e h)   (the MoE seam)
//	             w = softmax over all experts, top-k, not renormalised
//	logits = Woutput RMSNorm(x)·output_norm
//
// The experts' width is feed_forward_length (llama.cpp's n_ff for olmoe).
// llama.cpp sizes attn_k_norm by n_embd, so K has as many heads as Q. The
// routed experts are computed behind model.MoE with model.Experts (SwiGLU).
//
// The package is the whole family (family.Family): Family's model side is
// here, its `pipe gen` presets, tensors and metadata in gen.go. It
// registers itself as "olmoe" on import.
package olmoe

import (
	"fmt"

	"github.com/pipe-engine/pipe/model"
	"github.com/pipe-engine/pipe/model/family"
)

func init() { family.Register(Family{}) }

// Family is the olmoe family: the model here, the generator side in gen.go.
type Family struct{ model.AttentionOnly }

// Arch implements family.Family.
func (Family) Arch() string { return "olmoe" }

// New implements model.Family.
func (Family) New(d *model.Desc, src model.DenseSource, opt model.Options) (model.Model, error) {
	return New(d, src, opt)
}

// New builds an OLMoE from its description and dense weights: the shared
// decoder with whole-projection Q/K norms and a routed FFN per layer, plus
// the expert math (softmax top-k, not renormalised: build_moe_ffn with
// norm_w false).
func New(d *model.Desc, src model.DenseSource, opt model.Options) (model.Model, error) {
	hp := d.HParams
	geom, err := model.NeoXGeom(hp, "olmoe", true)
	if err != nil {
		return nil, err
	}
	E := hp.NEmbd
	if geom.QDim() != E || geom.KVDim() != E {
		return nil, fmt.Errorf("%w: olmoe: %d heads and %d KV heads of %d, want n_embd %d each (llama.cpp's q/k norms are n_embd wide)",
			model.ErrBadModel, geom.NHead, geom.NHeadKV, geom.HeadDim, E)
	}
	m, ld, err := model.NewMoEModel(d, src, opt, hp.NFF, model.SwiGLU, hp.RMSEps, model.SoftmaxTopK, false)
	if err != nil {
		return nil, err
	}
	for l := 0; l < hp.NLayer; l++ {
		p := fmt.Sprintf("blk.%d.", l)
		a := ld.Attention(l, E, geom)
		a.QNorm = ld.Vector(p+"attn_q_norm.weight", E)
		a.KNorm = ld.Vector(p+"attn_k_norm.weight", E)
		a.QKNormWhole = true
		m.Layers = append(m.Layers, model.Layer{Attn: a, FFN: ld.RoutedFFN(l, E, hp.NExpert)})
		m.AddLayer(ld, l)
	}
	return m.Finish(ld)
}
