// Package lfm2moe is Liquid AI's LFM2-MoE architecture (LFM2-8B-A1B),
// following llama.cpp's src/models/lfm2moe.cpp (tensors, hyper-parameters)
// and the LFM2 graph of src/models/lfm2.cpp it builds:
//
//	x = embd(tokens)
//	per layer: h = RMSNorm(x)·attn_norm (the operator norm)
//	  short-conv layers (attention.head_count_kv 0): b|c|u = Win h;
//	    y = Wout (c ⊙ conv(b ⊙ u)), conv a causal depthwise convolution of
//	    shortconv.l_cache taps over the previous inputs kept in the state
//	  attention layers: q,k per head RMSNorm·{q,k}_norm, NeoX RoPE, GQA; y = Wo attn
//	  x = x + y; h = RMSNorm(x)·ffn_norm
//	  leading_dense_block_count dense layers: x += down(silu(gate h)·up h)
//	  the others: logits = Wgate_inp h; experts chosen by σ(logits) + exp_probs_b,
//	    weighted by σ(logits) renormalised (× expert_weights_scale);
//	    x += Σ_rank w_r · down_e(silu(gate_e h) · up_e h)        (the MoE seam)
//	logits = Woutput RMSNorm(x)·token_embd_norm  (tied to token_embd when output is absent)
//
// The short-conv layers are model.Mixer hooks (their state beside the
// attention layers' KV rows in model.State, convolved by model.CausalConv);
// the routed experts are model.Experts (SwiGLU) behind model.MoE.
//
// The package is the whole family (family.Family, family.go): its own key
// (shortconv.l_cache, in HParams), its per-sequence state, its inspect
// rows; its `pipe gen` presets, tensors and metadata are in gen.go. It
// registers itself as "lfm2moe" on import.
package lfm2moe

import (
	"fmt"
	"math"

	"github.com/pipe-engine/pipe/model"
)

// Model is a loaded LFM2-MoE.
type Model struct {
	*model.Decoder
	*model.Experts
	d      *model.Desc
	router []model.RouterSpec // per layer (zero for a dense layer)
}

// llama.cpp's llama_expert_gating_func_type: LFM2-MoE files carry sigmoid.
const gatingSigmoid = 2

// New builds an LFM2-MoE from its description and dense weights.
func New(d *model.Desc, src model.DenseSource, opt model.Options) (model.Model, error) {
	hp := d.HParams
	k, err := model.ExpertsUsed(hp, opt)
	if err != nil {
		return nil, err
	}
	E, hd := hp.NEmbd, hp.HeadDim
	own, _ := d.FamilyHP.(HParams)
	switch {
	case hp.NLayer <= 0 || E <= 0 || hp.NHead <= 0 || hd <= 0 || hd%2 != 0 || hp.NExpert <= 0 || hp.NFFExp <= 0 ||
		(hp.MoE.LeadingDense > 0 && hp.NFF <= 0):
		return nil, fmt.Errorf("%w: lfm2moe hyper-parameters %+v", model.ErrBadModel, hp)
	case own.ShortConvL < 2 || len(hp.HeadCountKVLayers) != hp.NLayer:
		return nil, fmt.Errorf("%w: lfm2moe needs shortconv.l_cache ≥ 2 and attention.head_count_kv per layer (got %d and %d values)", model.ErrBadModel, own.ShortConvL, len(hp.HeadCountKVLayers))
	case hp.MoE.GatingFunc != gatingSigmoid:
		return nil, fmt.Errorf("%w: lfm2moe expert_gating_func %d (llama.cpp's LFM2-MoE gating is sigmoid, 2)", model.ErrUnsupportedArch, hp.MoE.GatingFunc)
	}
	eps := hp.RMSEps
	if eps == 0 {
		eps = 1e-5
	}
	nRot := hp.NRot
	if nRot <= 0 || nRot > hd {
		nRot = hd
	}
	m := &Model{d: d, Experts: &model.Experts{Arch: "lfm2moe", Pool: opt.Pool, NEmbd: E, NFF: hp.NFFExp, NExpert: hp.NExpert, Act: model.SwiGLU}}
	m.Decoder = &model.Decoder{Pool: opt.Pool, NEmbd: E, Eps: eps, Timings: opt.Timings, Clock: opt.Clock}
	ld := model.NewLoader(d, src)
	m.TokEmbd = ld.Matrix("token_embd.weight", E, -1)
	m.Output = m.TokEmbd
	if out, ok := ld.OptionalMatrix("output.weight", E, -1); ok {
		m.Output = out
	}
	m.OutNorm = ld.Vector("token_embd_norm.weight", E) // llama.cpp's LLM_TENSOR_OUTPUT_NORM_LFM2
	spec := model.RouterSpec{Gating: model.SigmoidTopK, NExpert: hp.NExpert, K: k, Normalize: true, Scale: hp.MoE.WeightsScale}
	for l := 0; l < hp.NLayer; l++ {
		p := fmt.Sprintf("blk.%d.", l)
		var layer model.Layer
		if nkv := hp.HeadCountKVLayers[l]; nkv == 0 {
			layer.Mixer = loadShortConv(ld, l, E, own.ShortConvL)
		} else {
			if hp.NHead%nkv != 0 {
				return nil, fmt.Errorf("%w: lfm2moe layer %d: %d heads over %d KV heads", model.ErrBadModel, l, hp.NHead, nkv)
			}
			g := model.Geom{NHead: hp.NHead, NHeadKV: nkv, HeadDim: hd, Scale: float32(1 / math.Sqrt(float64(hd))),
				Rope: model.Rope{NDims: nRot, Base: hp.RopeFreqBase, FreqScale: 1, AttnScale: 1}}
			layer.Attn = ld.Attention(l, E, g)
			layer.Attn.QNorm = ld.Vector(p+"attn_q_norm.weight", hd)
			layer.Attn.KNorm = ld.Vector(p+"attn_k_norm.weight", hd)
		}
		norm := ld.Vector(p+"ffn_norm.weight", E)
		if l < hp.MoE.LeadingDense {
			layer.FFN = &model.DenseFFN{Norm: norm, GLU: model.LoadGLU(ld, p+"ffn_", ".weight", E, hp.NFF, model.SwiGLU)}
			m.SkipLayer()
			m.router = append(m.router, spec)
		} else {
			layer.FFN = &model.RoutedFFN{Norm: norm, Gate: ld.Matrix(p+"ffn_gate_inp.weight", E, hp.NExpert)}
			m.AddLayer(ld, l)
			s := spec
			s.Bias = ld.Vector(p+"exp_probs_b.bias", hp.NExpert)
			m.router = append(m.router, s)
		}
		m.Layers = append(m.Layers, layer)
	}
	if err := ld.Err(); err != nil {
		return nil, err
	}
	if err := ld.CheckVocab(m.Decoder, hp.NVocab); err != nil {
		return nil, err
	}
	return m, nil
}

// Desc implements model.Model.
func (m *Model) Desc() *model.Desc { return m.d }

// Router implements model.Model.
func (m *Model) Router(l int) model.RouterSpec {
	if l < 0 || l >= len(m.router) {
		return model.RouterSpec{}
	}
	return m.router[l]
}
