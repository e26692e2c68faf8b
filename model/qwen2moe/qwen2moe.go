// Package qwen2moe is the Qwen2-MoE architecture (Qwen1.5-MoE-A2.7B,
// Qwen2-57B-A14B), following llama.cpp's src/models/qwen2moe.cpp graph and
// build_moe_ffn:
//
//	x = embd(tokens)
//	per layer: h = RMSNorm(x)·attn_norm; q,k,v = Wq h + bq, Wk h + bk, Wv h + bv
//	           q,k per head: NeoX RoPE; causal GQA attention
//	           x = Wo attn + x
//	           h = RMSNorm(x)·ffn_norm; logits = Wgate_inp h
//	           moe = Σ_rank w_r · down_e(silu(gate_e h) · up_e h)   (the MoE seam)
//	             w = softmax over all experts, top-k, not renormalised
//	           shared = σ(Wgate_inp_shexp h) · down_s(silu(gate_s h) · up_s h)
//	           x = x + (moe + shared)
//	logits = Woutput RMSNorm(x)·output_norm
//
// The sigmoid of the shared expert's gate is llama.cpp's silu(g)/g. The
// routed experts are computed behind model.MoE with model.Experts (SwiGLU);
// the shared expert is model.SharedExpert, a dense part of the layer. Every
// shape comes from GGUF metadata (expert_feed_forward_length,
// expert_shared_feed_forward_length).
//
// The package is the whole family (family.Family): Family's model side is
// here, its `pipe gen` presets, tensors and metadata in gen.go. It
// registers itself as "qwen2moe" on import.
package qwen2moe

import (
	"fmt"

	"github.com/pipe-engine/pipe/model"
	"github.com/pipe-engine/pipe/model/family"
)

func init() { family.Register(Family{}) }

// Family is the qwen2moe family: the model here, the generator side in
// gen.go.
type Family struct{ model.AttentionOnly }

// Arch implements family.Family.
func (Family) Arch() string { return "qwen2moe" }

// New implements model.Family.
func (Family) New(d *model.Desc, src model.DenseSource, opt model.Options) (model.Model, error) {
	return New(d, src, opt)
}

// New builds a Qwen2-MoE from its description and dense weights: the shared
// decoder with a routed FFN and a gated shared expert per layer, plus the
// expert math (softmax top-k, not renormalised: build_moe_ffn with norm_w
// false).
func New(d *model.Desc, src model.DenseSource, opt model.Options) (model.Model, error) {
	hp := d.HParams
	geom, err := model.NeoXGeom(hp, "qwen2moe", true)
	if err != nil {
		return nil, err
	}
	nFF := hp.NFFExp // expert_feed_forward_length, else llama.cpp's n_ff / n_expert_used
	if _, ok := d.File.Get("qwen2moe.expert_feed_forward_length"); !ok && hp.NExpertUsed > 0 {
		nFF = hp.NFF / hp.NExpertUsed
	}
	nFFSh := hp.NFFShExp // expert_shared_feed_forward_length, else n_ff
	if nFFSh == 0 {
		nFFSh = hp.NFF
	}
	if nFFSh <= 0 {
		return nil, fmt.Errorf("%w: qwen2moe: no shared expert width (expert_shared_feed_forward_length, feed_forward_length)", model.ErrBadModel)
	}
	m, ld, err := model.NewMoEModel(d, src, opt, nFF, model.SwiGLU, hp.RMSEps, model.SoftmaxTopK, false)
	if err != nil {
		return nil, err
	}
	E := hp.NEmbd
	for l := 0; l < hp.NLayer; l++ {
		p := fmt.Sprintf("blk.%d.", l)
		a := ld.Attention(l, E, geom)
		a.Bq, _ = ld.OptionalVector(p+"attn_q.bias", geom.QDim())
		a.Bk, _ = ld.OptionalVector(p+"attn_k.bias", geom.KVDim())
		a.Bv, _ = ld.OptionalVector(p+"attn_v.bias", geom.KVDim())
		f := ld.RoutedFFN(l, E, hp.NExpert)
		f.Shared = model.LoadSharedExpert(ld, l, E, nFFSh, model.SwiGLU)
		if f.Shared.Scale.Data == nil && ld.Err() == nil {
			return nil, fmt.Errorf("%w: tensor %sffn_gate_inp_shexp.weight is missing", model.ErrBadModel, p)
		}
		m.Layers = append(m.Layers, model.Layer{Attn: a, FFN: f})
		m.AddLayer(ld, l)
	}
	return m.Finish(ld)
}
