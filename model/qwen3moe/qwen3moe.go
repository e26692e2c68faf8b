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
// the gating rule (softmax over all experts, top-k, renormalise). Every shape comes from GGUF metadata. The package
// registers itself as "qwen3moe" on import.
package qwen3moe

import (
	"fmt"
	"math"

	"github.com/pipe-engine/pipe/model"
)

func init() { model.Register("qwen3moe", New) }

// Model is a loaded Qwen3-MoE: the shared decoder skeleton with a routed
// FFN per layer, plus the expert math.
type Model struct {
	*model.Decoder
	*model.Experts
	d          *model.Desc
	nEmbd, nFF int
	nExpert, k int
}

// New builds a Qwen3-MoE from its description and dense weights.
func New(d *model.Desc, src model.DenseSource, opt model.Options) (model.Model, error) {
	hp := d.HParams
	k, err := model.ExpertsUsed(hp, opt)
	if err != nil {
		return nil, err
	}
	m := &Model{d: d, nEmbd: hp.NEmbd, nFF: hp.NFFExp, nExpert: hp.NExpert, k: k}
	hd := hp.HeadDim
	if hd == 0 && hp.NHead > 0 {
		hd = hp.NEmbd / hp.NHead
	}
	if hp.NLayer <= 0 || m.nEmbd <= 0 || hp.NHead <= 0 || hp.NHeadKV <= 0 || hp.NHead%hp.NHeadKV != 0 || m.nExpert <= 0 || m.k <= 0 || m.nFF <= 0 || hd <= 0 || hd%2 != 0 {
		return nil, fmt.Errorf("%w: qwen3moe hyper-parameters %+v", model.ErrBadModel, hp)
	}
	eps := hp.RMSEps
	if eps == 0 {
		eps = 1e-6
	}
	base := hp.RopeFreqBase
	if base == 0 {
		base = 10000
	}
	fs := float32(1)
	if hp.RopeScaleLinear > 0 {
		fs = 1 / hp.RopeScaleLinear
	}
	geom := model.Geom{NHead: hp.NHead, NHeadKV: hp.NHeadKV, HeadDim: hd,
		Rope: model.Rope{NDims: hd, Base: base, FreqScale: fs, AttnScale: 1}, Scale: float32(1 / math.Sqrt(float64(hd)))}
	m.Decoder = &model.Decoder{Pool: opt.Pool, NEmbd: hp.NEmbd, Eps: eps, Timings: opt.Timings}
	m.Experts = &model.Experts{Arch: "qwen3moe", Pool: opt.Pool, NEmbd: m.nEmbd, NFF: m.nFF, NExpert: m.nExpert, Act: model.SwiGLU}
	ld := model.NewLoader(d, src)
	ld.Embeddings(m.Decoder)
	for l := 0; l < hp.NLayer; l++ {
		p := fmt.Sprintf("blk.%d.", l)
		a := ld.Attention(l, m.nEmbd, geom)
		a.QNorm = ld.Vector(p+"attn_q_norm.weight", hd)
		a.KNorm = ld.Vector(p+"attn_k_norm.weight", hd)
		ffn := &model.RoutedFFN{
			Norm: ld.Vector(p+"ffn_norm.weight", m.nEmbd),
			Gate: ld.Matrix(p+"ffn_gate_inp.weight", m.nEmbd, m.nExpert),
		}
		m.Layers = append(m.Layers, model.Layer{Attn: a, FFN: ffn})
		m.AddLayer(ld, l)
	}
	if err := ld.CheckVocab(m.Decoder, hp.NVocab); err != nil {
		return nil, err
	}
	return m, nil
}

// Desc implements model.Model.
func (m *Model) Desc() *model.Desc { return m.d }

// Router implements model.Model.
func (m *Model) Router(int) model.RouterSpec {
	return model.RouterSpec{Gating: model.SoftmaxTopK, NExpert: m.nExpert, K: m.k, Normalize: true}
}
