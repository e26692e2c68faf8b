// Package qwen3next is the Qwen3-Next architecture (Qwen3-Next-80B-A3B,
// Qwen3-Coder-Next), following llama.cpp's src/models/qwen3next.cpp graph,
// its delta-net helpers (delta-net-base.cpp, with the fused
// ggml_gated_delta_net its CPU backend runs) and build_moe_ffn. It is
// qwen35moe's hybrid with three differences, and reuses qwen35moe's
// delta-net (qwen35moe.LoadDeltaNet) for the rest:
//
//	x = embd(tokens)
//	per layer: h = RMSNorm(x)·attn_norm
//	  recurrent layers (all but every full_attention_interval-th):
//	    q|k|v = Wqkv h, z = Wgate h (or one legacy ssm_in holding, per
//	    key head, its q, k, v and z rows); β|α = Wba h, per key head its
//	    value heads' β then their α (inputs.go);
//	    the gated delta rule as qwen35moe's, except that value head h
//	    reads key head h/(nv/nk) (llama.cpp repeats each key head for its
//	    value heads, where Qwen3.5 tiles them)
//	    x = Wout (RMSNorm(o)·ssm_norm · silu(z)) + x
//	  attention layers: q|gate = Wq h per head, q,k per head RMSNorm·{q,k}_norm
//	    and NeoX RoPE on the first rope.dimension_count dims of each head
//	    (partial_rotary_factor; Qwen3.5's interleaved sections are absent);
//	    x = Wo (attn · σ(gate)) + x
//	  h = RMSNorm(x)·post_attention_norm; logits = Wgate_inp h
//	  x = x + Σ_rank w_r · down_e(silu(gate_e h) · up_e h)        (the MoE seam)
//	        + σ(w_shexp·h) · down_s(silu(gate_s h) · up_s h)       (shared expert)
//	logits = Woutput RMSNorm(x)·output_norm  (tied to token_embd when output is absent)
//
// The routed experts are computed behind model.MoE (model.Experts,
// SwiGLU); the gating rule is softmax over all experts, top-k,
// renormalised. The last nextn_predict_layers blocks are the
// multi-token-prediction layers: checked, as llama.cpp loads them, and not
// run (nextn.go).
//
// The package is the whole family (family.Family, family.go; its `pipe
// gen` presets, tensors and metadata in gen.go). It registers itself as
// "qwen3next" on import.
package qwen3next

import (
	"fmt"
	"math"

	"github.com/pipe-engine/pipe/model"
	"github.com/pipe-engine/pipe/model/qwen35moe"
)

// Model is a loaded Qwen3-Next: the shared decoder skeleton with delta-net
// mixers on the recurrent layers, gated attention on the others, and a
// routed FFN with a gated shared expert per layer.
type Model struct {
	*model.Decoder
	*model.Experts
	d          *model.Desc
	nExpert, k int
}

// New builds a Qwen3-Next from its description and dense weights.
func New(d *model.Desc, src model.DenseSource, opt model.Options) (model.Model, error) {
	hp := d.HParams
	k, err := model.ExpertsUsed(hp, opt)
	if err != nil {
		return nil, err
	}
	geom, err := attnGeom(d)
	if err != nil {
		return nil, err
	}
	eps := hp.RMSEps
	if eps == 0 {
		eps = 1e-6
	}
	E := hp.NEmbd
	m := &Model{d: d, nExpert: hp.NExpert, k: k}
	m.Decoder = &model.Decoder{Pool: opt.Pool, NEmbd: E, Eps: eps, Timings: opt.Timings, Clock: opt.Clock}
	m.Experts = &model.Experts{Arch: "qwen3next", Pool: opt.Pool, NEmbd: E, NFF: hp.NFFExp, NExpert: hp.NExpert, Act: model.SwiGLU}
	ld := model.NewLoader(d, src)
	ld.Embeddings(m.Decoder)
	run := runLayers(d)
	for l := 0; l < run; l++ {
		var layer model.Layer
		if hp.SSM.IsRecurrent(l) {
			layer.Mixer = qwen35moe.LoadDeltaNet(ld, l, E, hp.SSM, opt.Pool, loadInputs(ld, l, E, hp.SSM), true)
		} else {
			layer.Attn = loadAttention(ld, l, E, geom)
		}
		layer.FFN = loadFFN(ld, l, &hp)
		m.Layers = append(m.Layers, layer)
		m.Experts.AddLayer(ld, l)
	}
	if err := ld.Err(); err != nil {
		return nil, err
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

// loadAttention reads attention layer l: Q with per-head gates, K, V, the
// output and the per-head Q and K norms.
func loadAttention(ld *model.Loader, l, E int, geom model.Geom) model.Attention {
	p, hd := fmt.Sprintf("blk.%d.", l), geom.HeadDim
	return model.Attention{Geom: geom, Gated: true,
		Norm:  ld.Vector(p+"attn_norm.weight", E),
		Wq:    ld.Matrix(p+"attn_q.weight", E, 2*geom.QDim()),
		Wk:    ld.Matrix(p+"attn_k.weight", E, geom.KVDim()),
		Wv:    ld.Matrix(p+"attn_v.weight", E, geom.KVDim()),
		Wo:    ld.Matrix(p+"attn_output.weight", geom.QDim(), E),
		QNorm: ld.Vector(p+"attn_q_norm.weight", hd),
		KNorm: ld.Vector(p+"attn_k_norm.weight", hd),
	}
}

// loadFFN reads layer l's routed FFN: post_attention_norm, the router and
// the shared expert with its sigmoid gate (expert_shared_feed_forward_length
// wide, feed_forward_length when absent, as llama.cpp).
func loadFFN(ld *model.Loader, l int, hp *model.HParams) *model.RoutedFFN {
	p, E := fmt.Sprintf("blk.%d.", l), hp.NEmbd
	nsh := hp.NFFShExp
	if nsh == 0 {
		nsh = hp.NFF
	}
	sh := model.LoadSharedExpert(ld, l, E, nsh, model.SwiGLU)
	sh.Sigma = model.Sigmoid
	if sh.Scale.Data == nil {
		ld.Matrix(p+"ffn_gate_inp_shexp.weight", E, 1) // required: the error names it
	}
	return &model.RoutedFFN{
		Norm:   ld.Vector(p+"post_attention_norm.weight", E),
		Gate:   ld.Matrix(p+"ffn_gate_inp.weight", E, hp.NExpert),
		Shared: sh,
	}
}

// attnGeom checks the hyper-parameters and returns the attention layers'
// geometry: NeoX RoPE over rope.dimension_count dims of each head (linear
// scaling only, as the released configs have none), KQ scale 1/√head_dim.
func attnGeom(d *model.Desc) (model.Geom, error) {
	if err := check(d); err != nil {
		return model.Geom{}, err
	}
	hp := d.HParams
	hd := hp.HeadDim
	switch hp.RopeScalingType {
	case "", "none", "linear":
	default:
		return model.Geom{}, fmt.Errorf("%w: qwen3next: rope scaling %q is not supported", model.ErrUnsupportedArch, hp.RopeScalingType)
	}
	fs := float32(1)
	if hp.RopeScaleLinear > 0 {
		fs = 1 / hp.RopeScaleLinear
	}
	rope := model.Rope{NDims: hp.NRot, Base: hp.RopeFreqBase, FreqScale: fs, AttnScale: 1}
	return model.Geom{NHead: hp.NHead, NHeadKV: hp.NHeadKV, HeadDim: hd, Rope: rope, Scale: float32(1 / math.Sqrt(float64(hd)))}, nil
}

// check refuses hyper-parameters the graph cannot run.
func check(d *model.Desc) error {
	hp, g := d.HParams, d.HParams.SSM
	switch {
	case hp.NLayer <= 0 || hp.NEmbd <= 0 || hp.NHead <= 0 || hp.NHeadKV <= 0 || hp.NHead%hp.NHeadKV != 0 ||
		hp.HeadDim <= 0 || hp.HeadDim%2 != 0 || hp.NExpert <= 0 || hp.NFFExp <= 0:
		return fmt.Errorf("%w: qwen3next hyper-parameters %+v", model.ErrBadModel, hp)
	case hp.HeadDimV != hp.HeadDim:
		return fmt.Errorf("%w: qwen3next: attention.value_length %d != key_length %d", model.ErrBadModel, hp.HeadDimV, hp.HeadDim)
	case hp.NRot <= 0 || hp.NRot > hp.HeadDim || hp.NRot%2 != 0:
		return fmt.Errorf("%w: qwen3next: rope.dimension_count %d for heads of %d", model.ErrBadModel, hp.NRot, hp.HeadDim)
	case g.ConvKernel < 1 || g.StateSize <= 0 || g.GroupCount <= 0 || g.TimeStepRank <= 0 || g.TimeStepRank%g.GroupCount != 0 ||
		g.InnerSize != g.StateSize*g.TimeStepRank:
		return fmt.Errorf("%w: qwen3next ssm.* keys %+v (want conv_kernel ≥ 1, inner_size = state_size·time_step_rank, time_step_rank a multiple of group_count)", model.ErrBadModel, g)
	case nextnLayers(d) < 0 || runLayers(d) < 1:
		return fmt.Errorf("%w: qwen3next: nextn_predict_layers %d of block_count %d", model.ErrBadModel, nextnLayers(d), hp.NLayer)
	}
	return nil
}

// Desc implements model.Model.
func (m *Model) Desc() *model.Desc { return m.d }

// Router implements model.Model.
func (m *Model) Router(int) model.RouterSpec {
	return model.RouterSpec{Gating: model.SoftmaxTopK, NExpert: m.nExpert, K: m.k, Normalize: true}
}
