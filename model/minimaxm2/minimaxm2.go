// Package minimaxm2 is the MiniMax M2 architecture (MiniMax-M2, 230B
// total / 10B active, and the M2.x checkpoints of the same shape),
// following llama.cpp's src/models/minimax-m2.cpp graph and
// build_moe_ffn:
//
//	x = embd(tokens)
//	per layer: h = RMSNorm(x)·attn_norm; q,k,v = Wq h, Wk h, Wv h
//	           q = RMSNorm(q)·attn_q_norm, k = RMSNorm(k)·attn_k_norm over
//	           the whole projection (all heads at once: n_head·head_dim and
//	           n_head_kv·head_dim wide), then NeoX RoPE over the first
//	           rope.dimension_count dims of each head (64 of 128 in M2);
//	           causal GQA attention, KQ scale 1/√head_dim; x += Wo attn
//	           h = RMSNorm(x)·ffn_norm; logits = Wgate_inp h
//	           x += Σ_rank w_r · down_e(silu(gate_e h)·up_e h)   (the MoE seam)
//	logits = Woutput RMSNorm(x)·output_norm
//
// The gating is expert_gating_func (the converter writes sigmoid from
// scoring_func; llama.cpp aborts without the key, pipe refuses the file)
// with the exp_probs_b selection bias, and the selected weights always
// renormalised (build_moe_ffn's norm_w is true for this graph) and never
// scaled (llama.cpp does not read expert_weights_scale for minimax-m2).
// Every layer is MoE; there are no shared experts. As in llama.cpp, the
// experts are feed_forward_length wide (the width its loader gives the
// expert tensors) and q/k/v biases, which its loader accepts and its graph
// never adds, are not read. M2's multi-token-prediction modules are not
// in the GGUF.
//
// The package is the whole family (family.Family, family.go; its `pipe
// gen` presets, tensors and metadata in gen.go). It registers itself as
// "minimax-m2" on import.
package minimaxm2

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

// Model is a loaded MiniMax M2: the shared decoder with whole-projection
// Q/K norms and partial RoPE, and a routed FFN in every layer.
type Model struct {
	*model.Decoder
	*model.Experts
	d      *model.Desc
	router []model.RouterSpec // per layer: the gating rule and its bias
}

// New builds a MiniMax M2 from its description and dense weights.
func New(d *model.Desc, src model.DenseSource, opt model.Options) (model.Model, error) {
	hp := d.HParams
	k, err := model.ExpertsUsed(hp, opt)
	if err != nil {
		return nil, err
	}
	if err := checkHParams(hp, k); err != nil {
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
	m := &Model{d: d, Experts: &model.Experts{Arch: d.Arch, Pool: opt.Pool, NEmbd: hp.NEmbd, NFF: hp.NFF, NExpert: hp.NExpert, Act: model.SwiGLU}}
	m.Decoder = &model.Decoder{Pool: opt.Pool, NEmbd: hp.NEmbd, Eps: hp.RMSEps, Timings: opt.Timings, Clock: opt.Clock}
	ld := model.NewLoader(d, src)
	ld.Embeddings(m.Decoder)
	for l := 0; l < hp.NLayer; l++ {
		a := ld.Attention(l, hp.NEmbd, geom)
		a.QNorm = ld.Vector(blk(l, "attn_q_norm.weight"), geom.QDim())
		a.KNorm = ld.Vector(blk(l, "attn_k_norm.weight"), geom.KVDim())
		a.QKNormWhole = true
		s := spec
		s.Bias = ld.Vector(blk(l, "exp_probs_b.bias"), hp.NExpert)
		m.router = append(m.router, s)
		m.Layers = append(m.Layers, model.Layer{Attn: a, FFN: ld.RoutedFFN(l, hp.NEmbd, hp.NExpert)})
		m.AddLayer(ld, l)
	}
	if err := ld.CheckVocab(m.Decoder, hp.NVocab); err != nil {
		return nil, err
	}
	return m, nil
}

// checkHParams refuses hyper-parameters the graph cannot run, naming the
// first bad key and its value (k is the experts used).
func checkHParams(hp model.HParams, k int) error {
	for _, c := range []struct {
		bad  bool
		key  string
		val  int
		want string
	}{
		{hp.NLayer <= 0, "block_count", hp.NLayer, "> 0"},
		{hp.NEmbd <= 0, "embedding_length", hp.NEmbd, "> 0"},
		{hp.NExpert <= 0, "expert_count", hp.NExpert, "> 0"},
		{k <= 0 || k > hp.NExpert, "expert_used_count", k, fmt.Sprintf("in 1..expert_count %d", hp.NExpert)},
		{hp.NFF <= 0, "feed_forward_length", hp.NFF, "> 0 (the experts' width)"},
		{hp.RMSEps <= 0, "attention.layer_norm_rms_epsilon", 0, "> 0"},
	} {
		if c.bad {
			return fmt.Errorf("%w: minimax-m2.%s = %d (want %s)", model.ErrBadModel, c.key, c.val, c.want)
		}
	}
	return nil
}

// attentionGeom is the attention geometry: one head width for keys and
// values, NeoX RoPE over the first rope.dimension_count dims of each head
// at rope.freq_base (linear scaling by rope.scaling.factor when the file
// has one), KQ scale 1/√head_dim.
func attentionGeom(hp model.HParams) (model.Geom, error) {
	hd := hp.HeadDim
	if hp.NHead <= 0 || hp.NHeadKV <= 0 || hp.NHead%hp.NHeadKV != 0 || hd <= 0 || hp.HeadDimV != hd {
		return model.Geom{}, fmt.Errorf("%w: minimax-m2: %d heads, %d KV heads of %d (value %d)", model.ErrBadModel, hp.NHead, hp.NHeadKV, hd, hp.HeadDimV)
	}
	if hp.NRot <= 0 || hp.NRot > hd || hp.NRot%2 != 0 {
		return model.Geom{}, fmt.Errorf("%w: minimax-m2.rope.dimension_count = %d (want even and <= head width %d)", model.ErrBadModel, hp.NRot, hd)
	}
	switch hp.RopeScalingType {
	case "", "none", "linear":
	default:
		return model.Geom{}, fmt.Errorf("%w: minimax-m2: rope scaling %q", model.ErrUnsupportedArch, hp.RopeScalingType)
	}
	fs := float32(1)
	if hp.RopeScaleLinear > 0 {
		fs = 1 / hp.RopeScaleLinear
	}
	return model.Geom{NHead: hp.NHead, NHeadKV: hp.NHeadKV, HeadDim: hd,
		Rope:  model.Rope{NDims: hp.NRot, Base: hp.RopeFreqBase, FreqScale: fs, AttnScale: 1},
		Scale: float32(1 / math.Sqrt(float64(hd)))}, nil
}

// routerSpec is the gating rule of every layer (without its bias):
// expert_gating_func, the weights renormalised and not scaled.
func routerSpec(hp model.HParams, k int) (model.RouterSpec, error) {
	s := model.RouterSpec{NExpert: hp.NExpert, K: k, Normalize: true}
	switch hp.MoE.GatingFunc {
	case gatingSigmoid:
		s.Gating = model.SigmoidTopK
	case gatingSoftmax:
		s.Gating = model.SoftmaxTopK
	case gatingNone:
		return s, fmt.Errorf("%w: minimax-m2.expert_gating_func is missing (llama.cpp has no default for this architecture; the converter writes 2, sigmoid)", model.ErrBadModel)
	default:
		return s, fmt.Errorf("%w: minimax-m2.expert_gating_func = %d", model.ErrUnsupportedArch, hp.MoE.GatingFunc)
	}
	return s, nil
}

func blk(l int, name string) string { return fmt.Sprintf("blk.%d.%s", l, name) }

// Desc implements model.Model.
func (m *Model) Desc() *model.Desc { return m.d }

// Router implements model.Model.
func (m *Model) Router(l int) model.RouterSpec {
	if l < 0 || l >= len(m.router) {
		return model.RouterSpec{NExpert: m.d.HParams.NExpert, K: 1}
	}
	return m.router[l]
}
