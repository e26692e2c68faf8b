// Package glm4moe is the GLM-4.5 MoE architecture (GLM-4.5, GLM-4.5-Air,
// GLM-4.6, GLM-4.7), following llama.cpp's src/models/glm4-moe.cpp graph
// and build_moe_ffn:
//
//	x = embd(tokens)
//	per layer: h = RMSNorm(x)·attn_norm; q,k,v = Wq h + bq, Wk h + bk, Wv h + bv
//	           q,k per head: RMSNorm·attn_{q,k}_norm when the file has them
//	           (GLM-4.5 355B), then NeoX RoPE over the first n_rot dims
//	           (partial_rotary_factor: half the head); causal GQA attention
//	           x += Wo attn
//	           h = RMSNorm(x)·post_attention_norm
//	           layers < leading_dense_block_count: x += down(silu(gate h)·up h)
//	           the others: logits = Wgate_inp h
//	                       x += Σ_rank w_r · down_e(silu(gate_e h)·up_e h)   (the MoE seam)
//	                            + down_s(silu(gate_s h)·up_s h)              (shared experts)
//	logits = Woutput RMSNorm(x)·output_norm
//
// The gating is expert_gating_func (sigmoid when absent, as llama.cpp) with
// the exp_probs_b selection bias, renormalisation (expert_weights_norm) and
// scale (expert_weights_scale). The last nextn_predict_layers blocks are
// the NextN / multi-token-prediction layers: llama.cpp loads their tensors
// (to satisfy the tensor count; their shapes are checked here the same
// way) and never runs them, and neither does pipe: the decoder has
// block_count - nextn_predict_layers layers, and the KV cache only those.
// Multi-section RoPE (GLM-4.5V's rope.dimension_sections) is refused with
// model.ErrUnsupportedArch.
//
// The package is the whole family (family.Family, family.go; its `pipe
// gen` presets, tensors and metadata in gen.go). It registers itself as
// "glm4moe" on import.
package glm4moe

import (
	"fmt"
	"math"

	"github.com/pipe-engine/pipe/model"
)

// llama.cpp's expert_gating_func values.
const (
	gatingNone    = 0
	gatingSoftmax = 1
	gatingSigmoid = 2
)

// Model is a loaded GLM-4.5 MoE: the shared decoder with partial-RoPE
// attention, dense leading layers and routed plus shared experts.
type Model struct {
	*model.Decoder
	*model.Experts
	d      *model.Desc
	router []model.RouterSpec // per run layer
}

// New builds a GLM-4.5 MoE from its description and dense weights.
func New(d *model.Desc, src model.DenseSource, opt model.Options) (model.Model, error) {
	hp := d.HParams
	k, err := model.ExpertsUsed(hp, opt)
	if err != nil {
		return nil, err
	}
	nextn := nextnLayers(d)
	if err := checkHParams(hp, k, nextn); err != nil {
		return nil, err
	}
	geom, err := attentionGeom(hp)
	if err != nil {
		return nil, err
	}
	spec, err := routerSpec(hp, k)
	if err != nil {
		return nil, err
	}
	m := &Model{d: d, Experts: &model.Experts{Arch: "glm4moe", Pool: opt.Pool, NEmbd: hp.NEmbd, NFF: hp.NFFExp, NExpert: hp.NExpert, Act: model.SwiGLU}}
	m.Decoder = &model.Decoder{Pool: opt.Pool, NEmbd: hp.NEmbd, Eps: hp.RMSEps, Timings: opt.Timings, Clock: opt.Clock}
	ld := model.NewLoader(d, src)
	ld.Embeddings(m.Decoder)
	run := hp.NLayer - nextn
	for l := 0; l < run; l++ {
		a := loadAttention(ld, hp, l, geom)
		ffn, s := loadFFN(ld, hp, l, spec)
		if l < hp.MoE.LeadingDense {
			m.SkipLayer()
		} else {
			m.AddLayer(ld, l)
		}
		m.router = append(m.router, s)
		m.Layers = append(m.Layers, model.Layer{Attn: a, FFN: ffn})
	}
	if err := ld.CheckVocab(m.Decoder, hp.NVocab); err != nil {
		return nil, err
	}
	for l := run; l < hp.NLayer; l++ {
		if err := checkNextN(d, l); err != nil {
			return nil, err
		}
	}
	return m, nil
}

// checkHParams refuses hyper-parameters the graph cannot run, naming the
// first bad key and its value (k is the experts used, nextn the NextN
// layers).
func checkHParams(hp model.HParams, k, nextn int) error {
	for _, c := range []struct {
		bad  bool
		key  string
		val  int
		want string
	}{
		{hp.NEmbd <= 0, "embedding_length", hp.NEmbd, "> 0"},
		{hp.NExpert <= 0, "expert_count", hp.NExpert, "> 0"},
		{k <= 0, "expert_used_count", k, "> 0"},
		{hp.NFFExp <= 0, "expert_feed_forward_length", hp.NFFExp, "> 0"},
		{nextn < 0 || nextn >= hp.NLayer, "nextn_predict_layers", nextn, fmt.Sprintf("< block_count %d", hp.NLayer)},
		{hp.MoE.LeadingDense > hp.NLayer-max(nextn, 0), "leading_dense_block_count", hp.MoE.LeadingDense, fmt.Sprintf("<= block_count - nextn_predict_layers %d", hp.NLayer-max(nextn, 0))},
		{hp.MoE.LeadingDense > 0 && hp.NFF <= 0, "feed_forward_length", hp.NFF, "> 0 (the dense leading layers)"},
		{hp.RMSEps <= 0, "attention.layer_norm_rms_epsilon", 0, "> 0"},
	} {
		if c.bad {
			return fmt.Errorf("%w: glm4moe.%s = %d (want %s)", model.ErrBadModel, c.key, c.val, c.want)
		}
	}
	return nil
}

// attentionGeom is the attention geometry: one head width for every layer,
// NeoX RoPE over the first rope.dimension_count dims of each head at
// rope.freq_base (linear scaling by rope.scaling.factor when the file has
// one), KQ scale 1/√head_dim.
func attentionGeom(hp model.HParams) (model.Geom, error) {
	hd := hp.HeadDim
	if hp.NHead <= 0 || hp.NHeadKV <= 0 || hp.NHead%hp.NHeadKV != 0 || hd <= 0 || hp.HeadDimV != hd {
		return model.Geom{}, fmt.Errorf("%w: glm4moe: %d heads, %d KV heads of %d (value %d)", model.ErrBadModel, hp.NHead, hp.NHeadKV, hd, hp.HeadDimV)
	}
	if hp.NRot <= 0 || hp.NRot > hd || hp.NRot%2 != 0 {
		return model.Geom{}, fmt.Errorf("%w: glm4moe.rope.dimension_count = %d (want even and <= head width %d)", model.ErrBadModel, hp.NRot, hd)
	}
	if len(hp.RopeSections) > 0 && anyNonZero(hp.RopeSections) {
		return model.Geom{}, fmt.Errorf("%w: glm4moe with multi-section RoPE (rope.dimension_sections %v)", model.ErrUnsupportedArch, hp.RopeSections)
	}
	switch hp.RopeScalingType {
	case "", "none", "linear":
	default:
		return model.Geom{}, fmt.Errorf("%w: glm4moe: rope scaling %q", model.ErrUnsupportedArch, hp.RopeScalingType)
	}
	fs := float32(1)
	if hp.RopeScaleLinear > 0 {
		fs = 1 / hp.RopeScaleLinear
	}
	return model.Geom{NHead: hp.NHead, NHeadKV: hp.NHeadKV, HeadDim: hd,
		Rope:  model.Rope{NDims: hp.NRot, Base: hp.RopeFreqBase, FreqScale: fs, AttnScale: 1},
		Scale: float32(1 / math.Sqrt(float64(hd)))}, nil
}

func anyNonZero(xs []int) bool {
	for _, x := range xs {
		if x != 0 {
			return true
		}
	}
	return false
}

func blk(l int, name string) string { return fmt.Sprintf("blk.%d.%s", l, name) }

// loadAttention loads layer l's attention: the projections with their
// optional biases and the optional per-head Q/K norms.
func loadAttention(ld *model.Loader, hp model.HParams, l int, g model.Geom) model.Attention {
	a := ld.Attention(l, hp.NEmbd, g)
	a.Bq, _ = ld.OptionalVector(blk(l, "attn_q.bias"), g.QDim())
	a.Bk, _ = ld.OptionalVector(blk(l, "attn_k.bias"), g.KVDim())
	a.Bv, _ = ld.OptionalVector(blk(l, "attn_v.bias"), g.KVDim())
	a.QNorm, _ = ld.OptionalVector(blk(l, "attn_q_norm.weight"), g.HeadDim)
	a.KNorm, _ = ld.OptionalVector(blk(l, "attn_k_norm.weight"), g.HeadDim)
	return a
}

// loadFFN loads layer l's feed-forward half, normed by post_attention_norm:
// a dense SwiGLU on the leading layers, else the router with its selection
// bias, the routed experts (behind the MoE seam) and the shared experts;
// with the layer's gating rule (spec plus its bias).
func loadFFN(ld *model.Loader, hp model.HParams, l int, spec model.RouterSpec) (model.FFN, model.RouterSpec) {
	E := hp.NEmbd
	norm := ld.Vector(blk(l, "post_attention_norm.weight"), E)
	if l < hp.MoE.LeadingDense {
		return &model.DenseFFN{Norm: norm, GLU: model.LoadGLU(ld, blk(l, "ffn_"), ".weight", E, hp.NFF, model.SwiGLU)}, spec
	}
	r := &model.RoutedFFN{Norm: norm, Gate: ld.Matrix(blk(l, "ffn_gate_inp.weight"), E, hp.NExpert)}
	if hp.MoE.NShared > 0 {
		r.Shared = model.LoadSharedExpert(ld, l, E, hp.NFFExp*hp.MoE.NShared, model.SwiGLU)
	}
	spec.Bias = ld.Vector(blk(l, "exp_probs_b.bias"), hp.NExpert)
	return r, spec
}

// routerSpec is the gating rule of the MoE layers (without their bias):
// expert_gating_func, sigmoid when the file has none (llama.cpp's
// glm4moe default).
func routerSpec(hp model.HParams, k int) (model.RouterSpec, error) {
	s := model.RouterSpec{NExpert: hp.NExpert, K: k, Normalize: hp.MoE.WeightsNorm, Scale: hp.MoE.WeightsScale}
	switch hp.MoE.GatingFunc {
	case gatingNone, gatingSigmoid:
		s.Gating = model.SigmoidTopK
	case gatingSoftmax:
		s.Gating = model.SoftmaxTopK
	default:
		return s, fmt.Errorf("%w: glm4moe.expert_gating_func = %d", model.ErrUnsupportedArch, hp.MoE.GatingFunc)
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
