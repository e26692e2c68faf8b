// Package bailingmoe2 is the BailingMoeV2 architecture (Ling 2.0:
// Ling-mini-2.0, Ling-flash-2.0; Ring 2.0), following llama.cpp's
// src/models/bailingmoe2.cpp graph and build_moe_ffn:
//
//	x = embd(tokens)
//	per layer: h = RMSNorm(x)·attn_norm; q,k,v = rows of Wqkv h (one fused matrix)
//	           q,k per head: RMSNorm·{q,k}_norm, NeoX RoPE over the first n_rot dims
//	           (half the head: "half RoPE"); causal GQA attention, scale 1/√head_dim
//	           x = Wo attn + x
//	           h = RMSNorm(x)·ffn_norm
//	           layers < leading_dense_block_count: x += down(silu(gate h)·up h)
//	           the others: logits = Wgate_inp h
//	                       x += Σ_rank w_r · down_e(silu(gate_e h)·up_e h)   (the MoE seam)
//	                            + down_s(silu(gate_s h)·up_s h)              (shared experts)
//	logits = Woutput RMSNorm(x)·output_norm
//
// The gating is expert_gating_func's (sigmoid in Ling 2.0) with the
// optional selection bias exp_probs_b, renormalisation
// (expert_weights_norm), scale (expert_weights_scale) and group-limited
// choice (expert_group_count, expert_group_used_count), as deepseek2's.
// The fused attn_qkv matrix is split into its Q, K and V rows at load time:
// each output row is its own dot product, so the split computes what
// llama.cpp's one product and its views compute. Files with NextN (MTP)
// layers (nextn_predict_layers > 0) are refused with
// model.ErrUnsupportedArch.
//
// The package is the whole family (family.Family: family.go; its `pipe
// gen` presets, tensors and metadata in gen.go). It registers itself as
// "bailingmoe2" on import.
package bailingmoe2

import (
	"fmt"
	"math"

	"github.com/pipe-engine/pipe/model"
)

// llama.cpp's expert_gating_func values.
const (
	gatingSoftmax = 1
	gatingSigmoid = 2
)

// Model is a loaded BailingMoeV2: the shared decoder with fused-QKV
// attention, dense leading layers and routed plus shared experts.
type Model struct {
	*model.Decoder
	*model.Experts
	d      *model.Desc
	router []model.RouterSpec // per layer
}

// New builds a BailingMoeV2 from its description and dense weights.
func New(d *model.Desc, src model.DenseSource, opt model.Options) (model.Model, error) {
	hp := d.HParams
	k, err := model.ExpertsUsed(hp, opt)
	if err != nil {
		return nil, err
	}
	geom, err := attnGeom(hp)
	if err != nil {
		return nil, err
	}
	spec, err := routerSpec(hp, k)
	if err != nil {
		return nil, err
	}
	if hp.NFFExp <= 0 || hp.MoE.LeadingDense > hp.NLayer {
		return nil, fmt.Errorf("%w: bailingmoe2: expert_feed_forward_length %d, leading_dense_block_count %d of %d layers",
			model.ErrBadModel, hp.NFFExp, hp.MoE.LeadingDense, hp.NLayer)
	}
	eps := hp.RMSEps
	if eps == 0 {
		eps = 1e-6
	}
	m := &Model{d: d, Experts: &model.Experts{Arch: "bailingmoe2", Pool: opt.Pool, NEmbd: hp.NEmbd, NFF: hp.NFFExp, NExpert: hp.NExpert, Act: model.SwiGLU}}
	m.Decoder = &model.Decoder{Pool: opt.Pool, NEmbd: hp.NEmbd, Eps: eps, Timings: opt.Timings, Clock: opt.Clock}
	ld := model.NewLoader(d, src)
	ld.Embeddings(m.Decoder)
	for l := 0; l < hp.NLayer; l++ {
		a := loadAttention(ld, hp, l, geom)
		s := spec
		var ffn model.FFN
		if l < hp.MoE.LeadingDense {
			ffn = &model.DenseFFN{Norm: ld.Vector(blk(l, "ffn_norm.weight"), hp.NEmbd),
				GLU: model.LoadGLU(ld, blk(l, "ffn_"), ".weight", hp.NEmbd, hp.NFF, model.SwiGLU)}
			m.SkipLayer()
		} else {
			r := &model.RoutedFFN{
				Norm: ld.Vector(blk(l, "ffn_norm.weight"), hp.NEmbd),
				Gate: ld.Matrix(blk(l, "ffn_gate_inp.weight"), hp.NEmbd, hp.NExpert),
			}
			if hp.MoE.NShared > 0 {
				r.Shared = model.LoadSharedExpert(ld, l, hp.NEmbd, sharedWidth(hp), model.SwiGLU)
			}
			s.Bias, _ = ld.OptionalVector(blk(l, "exp_probs_b.bias"), hp.NExpert)
			ffn = r
			m.AddLayer(ld, l)
		}
		m.router = append(m.router, s)
		m.Layers = append(m.Layers, model.Layer{Attn: a, FFN: ffn})
	}
	if err := ld.CheckVocab(m.Decoder, hp.NVocab); err != nil {
		return nil, err
	}
	return m, nil
}

func blk(l int, name string) string { return fmt.Sprintf("blk.%d.%s", l, name) }

// sharedWidth is the shared experts' FFN width as llama.cpp sizes it:
// (expert_shared_feed_forward_length, else expert_feed_forward_length) ×
// expert_shared_count.
func sharedWidth(hp model.HParams) int {
	w := hp.NFFShExp
	if w == 0 {
		w = hp.NFFExp
	}
	return w * hp.MoE.NShared
}

// attnGeom is the attention geometry: GQA heads of head_dim with NeoX RoPE
// over the first rope.dimension_count dims of each head.
func attnGeom(hp model.HParams) (model.Geom, error) {
	hd := hp.HeadDim
	if hp.NHead <= 0 || hp.NHeadKV <= 0 || hp.NHead%hp.NHeadKV != 0 || hd <= 0 || hp.HeadDimV != hd {
		return model.Geom{}, fmt.Errorf("%w: bailingmoe2: %d heads, %d KV heads of %d (value %d)", model.ErrBadModel, hp.NHead, hp.NHeadKV, hd, hp.HeadDimV)
	}
	if hp.NRot <= 0 || hp.NRot > hd || hp.NRot%2 != 0 {
		return model.Geom{}, fmt.Errorf("%w: bailingmoe2.rope.dimension_count = %d (want even and ≤ head width %d)", model.ErrBadModel, hp.NRot, hd)
	}
	switch hp.RopeScalingType {
	case "", "none":
	default:
		return model.Geom{}, fmt.Errorf("%w: bailingmoe2: rope scaling %q is not supported", model.ErrUnsupportedArch, hp.RopeScalingType)
	}
	rope := model.Rope{NDims: hp.NRot, Base: hp.RopeFreqBase, FreqScale: 1, AttnScale: 1}
	return model.Geom{NHead: hp.NHead, NHeadKV: hp.NHeadKV, HeadDim: hd, Rope: rope,
		Scale: float32(1 / math.Sqrt(float64(hd)))}, nil
}

// loadAttention loads layer l's attention, splitting attn_qkv's rows into
// Wq (n_head × head_dim), Wk and Wv (n_head_kv × head_dim each).
func loadAttention(ld *model.Loader, hp model.HParams, l int, g model.Geom) model.Attention {
	E, q, kv := hp.NEmbd, g.QDim(), g.KVDim()
	qkv := ld.Matrix(blk(l, "attn_qkv.weight"), E, q+2*kv)
	a := model.Attention{Geom: g,
		Norm:  ld.Vector(blk(l, "attn_norm.weight"), E),
		Wo:    ld.Matrix(blk(l, "attn_output.weight"), q, E),
		QNorm: ld.Vector(blk(l, "attn_q_norm.weight"), g.HeadDim),
		KNorm: ld.Vector(blk(l, "attn_k_norm.weight"), g.HeadDim),
	}
	a.Wq, a.Wk, a.Wv = rows(qkv, "q", 0, q), rows(qkv, "k", q, kv), rows(qkv, "v", q+kv, kv)
	return a
}

// rows is rows [first, first+n) of w (a view of its bytes: every row is a
// whole number of blocks).
func rows(w model.Weight, part string, first, n int) model.Weight {
	if w.Data == nil || w.Rows == 0 {
		return model.Weight{}
	}
	rb := len(w.Data) / w.Rows
	return model.Weight{Name: w.Name + "[" + part + "]", Type: w.Type, Rows: n, Cols: w.Cols,
		Data: w.Data[first*rb : (first+n)*rb]}
}

// routerSpec is the gating rule of the MoE layers (without their bias).
func routerSpec(hp model.HParams, k int) (model.RouterSpec, error) {
	s := model.RouterSpec{NExpert: hp.NExpert, K: k, Normalize: hp.MoE.WeightsNorm, Scale: hp.MoE.WeightsScale,
		Groups: hp.MoE.Groups, GroupsUsed: hp.MoE.GroupsUsed}
	switch hp.MoE.GatingFunc {
	case gatingSoftmax:
		s.Gating = model.SoftmaxTopK
	case gatingSigmoid:
		s.Gating = model.SigmoidTopK
	default:
		return s, fmt.Errorf("%w: bailingmoe2.expert_gating_func = %d (want 1 softmax or 2 sigmoid)", model.ErrUnsupportedArch, hp.MoE.GatingFunc)
	}
	if s.Groups > 1 && (hp.NExpert%s.Groups != 0 || s.GroupsUsed <= 0 || s.GroupsUsed >= s.Groups) {
		return s, fmt.Errorf("%w: bailingmoe2: %d experts in %d groups, %d used", model.ErrBadModel, hp.NExpert, s.Groups, s.GroupsUsed)
	}
	return s, nil
}

// Desc implements model.Model.
func (m *Model) Desc() *model.Desc { return m.d }

// Router implements model.Model.
func (m *Model) Router(l int) model.RouterSpec {
	if l < 0 || l >= len(m.router) {
		return model.RouterSpec{NExpert: m.d.HParams.NExpert, K: 1}
	}
	return m.router[l]
}
