// Package qwen3moe is the Qwen3-MoE architecture (Qwen3-30B-A3B,
// Qwen3-235B-A22B, Qwen3-Coder-30B-A3B), following llama.cpp's
// src/models/qwen3moe.cpp graph and build_moe_ffn:
//
//	x = embd(tokens)
//	per layer: h = RMSNorm(x)·attn_norm; q,k,v = Wq h, Wk h, Wv h
//	           q,k per head: RMSNorm·{q,k}_norm, NeoX RoPE; causal GQA attention
//	           x = Wo attn + x
//	           h = RMSNorm(x)·ffn_norm; logits = Wgate_inp h
//	           x = x + Σ_rank w_r · down_e(silu(gate_e h) · up_e h)   (the MoE seam)
//	logits = Woutput RMSNorm(x)·output_norm
//
// The routed experts are computed behind model.MoE; this package supplies
// their math (model.Experts with SwiGLU: ComputeExpert, ComputeExperts) and
// the gating rule (softmax over all experts, top-k, renormalise). Every
// shape comes from GGUF metadata.
//
// The package is the whole family (family.Family): Family's model side is
// here, its `pipe gen` presets, tensors and metadata in gen.go. It
// registers itself as "qwen3moe" on import.
package qwen3moe

import (
	"fmt"

	"github.com/pipe-engine/pipe/model"
	"github.com/pipe-engine/pipe/model/family"
)

func init() { family.Register(Family{}) }

// Family is the qwen3moe family: the model here, the generator side in
// gen.go.
type Family struct{ model.AttentionOnly }

// Arch implements family.Family.
func (Family) Arch() string { return "qwen3moe" }

// New implements model.Family.
func (Family) New(d *model.Desc, src model.DenseSource, opt model.Options) (model.Model, error) {
	return New(d, src, opt)
}

// New builds a Qwen3-MoE from its description and dense weights: the shared
// decoder with per-head Q/K norms and a routed FFN per layer, plus the
// expert math (softmax top-k, renormalised).
func New(d *model.Desc, src model.DenseSource, opt model.Options) (model.Model, error) {
	hp := d.HParams
	geom, err := model.NeoXGeom(hp, "qwen3moe", false)
	if err != nil {
		return nil, err
	}
	eps := hp.RMSEps
	if eps == 0 {
		eps = 1e-6
	}
	m, ld, err := model.NewMoEModel(d, src, opt, hp.NFFExp, model.SwiGLU, eps, model.SoftmaxTopK, true)
	if err != nil {
		return nil, err
	}
	hd := geom.HeadDim
	for l := 0; l < hp.NLayer; l++ {
		p := fmt.Sprintf("blk.%d.", l)
		a := ld.Attention(l, hp.NEmbd, geom)
		a.QNorm = ld.Vector(p+"attn_q_norm.weight", hd)
		a.KNorm = ld.Vector(p+"attn_k_norm.weight", hd)
		m.Layers = append(m.Layers, model.Layer{Attn: a, FFN: ld.RoutedFFN(l, hp.NEmbd, hp.NExpert)})
		m.AddLayer(ld, l)
	}
	return m.Finish(ld)
}
