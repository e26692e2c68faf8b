// Package qwen35moe is the Qwen3.5/3.6 MoE architecture (Qwen3.6-35B-A3B,
// Qwen3.5-122B-A10B), following llama.cpp's src/models/qwen35moe.cpp graph,
// its delta-net helpers (delta-net-base.cpp, with the fused
// ggml_gated_delta_net its CPU backend runs) and build_moe_ffn:
//
//	x = embd(tokens)
//	per layer: h = RMSNorm(x)·attn_norm
//	  recurrent layers (all but every full_attention_interval-th):
//	    qkv = silu(conv1d(Wqkv h)) (a causal conv of ssm.conv_kernel taps
//	    over the previous inputs kept in the state); q, k L2-normalised per
//	    head; β = σ(Wβ h), g = softplus(Wα h + dt)·a per value head;
//	    the delta rule over the recurrent state S per value head:
//	    S = e^g·S; S += k·((v − Sᵀk)·β)ᵀ; o = Sᵀq/√d
//	    x = Wout (RMSNorm(o)·ssm_norm · silu(Wgate h)) + x
//	  attention layers: q|gate = Wq h per head, q,k per head RMSNorm·{q,k}_norm
//	    and interleaved multi-section RoPE on rope.dimension_count dims;
//	    x = Wo (attn · σ(gate)) + x
//	  h = RMSNorm(x)·post_attention_norm; logits = Wgate_inp h
//	  x = x + Σ_rank w_r · down_e(silu(gate_e h) · up_e h)        (the MoE seam)
//	        + σ(w_shexp·h) · down_s(silu(gate_s h) · up_s h)       (shared expert)
//	logits = Woutput RMSNorm(x)·output_norm  (tied to token_embd when output is absent)
//
// The recurrent layers are model.Mixer hooks whose convolution and delta-rule
// states live in the model.State beside the attention layers' KV rows. The
// routed experts are computed behind model.MoE (model.Experts, SwiGLU); the
// gating rule is softmax over all experts, top-k, renormalised. Multi-token
// prediction layers (nextn_predict_layers) are refused.
//
// The package is the whole family (family.Family, family.go; its `pipe
// gen` presets, tensors and metadata in gen.go). It registers itself as
// "qwen35moe" on import.
package qwen35moe

import (
	"fmt"
	"math"

	"github.com/pipe-engine/pipe/model"
)

// Model is a loaded Qwen3.5-MoE: the shared decoder skeleton with
// delta-net mixers on the recurrent layers, gated attention on the others,
// and a routed FFN with a shared expert per layer.
type Model struct {
	*model.Decoder
	*model.Experts
	d          *model.Desc
	nExpert, k int
}

// New builds a Qwen3.5-MoE from its description and dense weights.
func New(d *model.Desc, src model.DenseSource, opt model.Options) (model.Model, error) {
	hp := d.HParams
	k, err := model.ExpertsUsed(hp, opt)
	if err != nil {
		return nil, err
	}
	if err := check(d); err != nil {
		return nil, err
	}
	E, hd := hp.NEmbd, hp.HeadDim
	eps := hp.RMSEps
	if eps == 0 {
		eps = 1e-6
	}
	rot, err := newIMRope(hp)
	if err != nil {
		return nil, err
	}
	geom := model.Geom{NHead: hp.NHead, NHeadKV: hp.NHeadKV, HeadDim: hd, Rope: rot, Scale: float32(1 / math.Sqrt(float64(hd)))}
	m := &Model{d: d, nExpert: hp.NExpert, k: k}
	m.Decoder = &model.Decoder{Pool: opt.Pool, NEmbd: E, Eps: eps, Timings: opt.Timings, Clock: opt.Clock}
	m.Experts = &model.Experts{Arch: "qwen35moe", Pool: opt.Pool, NEmbd: E, NFF: hp.NFFExp, NExpert: hp.NExpert, Act: model.SwiGLU}
	ld := model.NewLoader(d, src)
	ld.Embeddings(m.Decoder)
	for l := 0; l < hp.NLayer; l++ {
		p := fmt.Sprintf("blk.%d.", l)
		var layer model.Layer
		if hp.SSM.IsRecurrent(l) {
			layer.Mixer = loadDeltaNet(ld, l, E, hp.SSM, opt.Pool)
		} else {
			layer.Attn = model.Attention{Geom: geom, Gated: true,
				Norm:  ld.Vector(p+"attn_norm.weight", E),
				Wq:    ld.Matrix(p+"attn_q.weight", E, 2*geom.QDim()),
				Wk:    ld.Matrix(p+"attn_k.weight", E, geom.KVDim()),
				Wv:    ld.Matrix(p+"attn_v.weight", E, geom.KVDim()),
				Wo:    ld.Matrix(p+"attn_output.weight", geom.QDim(), E),
				QNorm: ld.Vector(p+"attn_q_norm.weight", hd),
				KNorm: ld.Vector(p+"attn_k_norm.weight", hd),
			}
		}
		nsh := hp.NFFShExp
		if nsh == 0 {
			nsh = hp.NFF
		}
		sh := model.LoadSharedExpert(ld, l, E, nsh, model.SwiGLU)
		sh.Sigma = model.Sigmoid
		if sh.Scale.Data == nil {
			ld.Matrix(p+"ffn_gate_inp_shexp.weight", E, 1) // required: the error names it
		}
		layer.FFN = &model.RoutedFFN{
			Norm:   ld.Vector(p+"post_attention_norm.weight", E),
			Gate:   ld.Matrix(p+"ffn_gate_inp.weight", E, hp.NExpert),
			Shared: sh,
		}
		m.Layers = append(m.Layers, layer)
		m.Experts.AddLayer(ld, l)
	}
	if err := ld.Err(); err != nil {
		return nil, err
	}
	if err := ld.CheckVocab(m.Decoder, hp.NVocab); err != nil {
		return nil, err
	}
	return m, nil
}

// check refuses hyper-parameters the graph cannot run.
func check(d *model.Desc) error {
	hp, g := d.HParams, d.HParams.SSM
	switch {
	case hp.NLayer <= 0 || hp.NEmbd <= 0 || hp.NHead <= 0 || hp.NHeadKV <= 0 || hp.NHead%hp.NHeadKV != 0 ||
		hp.HeadDim <= 0 || hp.HeadDim%2 != 0 || hp.NExpert <= 0 || hp.NFFExp <= 0:
		return fmt.Errorf("%w: qwen35moe hyper-parameters %+v", model.ErrBadModel, hp)
	case hp.HeadDimV != hp.HeadDim:
		return fmt.Errorf("%w: qwen35moe: attention.value_length %d != key_length %d", model.ErrBadModel, hp.HeadDimV, hp.HeadDim)
	case g.ConvKernel < 1 || g.StateSize <= 0 || g.GroupCount <= 0 || g.TimeStepRank <= 0 || g.TimeStepRank%g.GroupCount != 0 ||
		g.InnerSize != g.StateSize*g.TimeStepRank:
		return fmt.Errorf("%w: qwen35moe ssm.* keys %+v (want conv_kernel ≥ 1, inner_size = state_size·time_step_rank, time_step_rank a multiple of group_count)", model.ErrBadModel, g)
	}
	if v, ok := d.File.Get(d.Arch + ".nextn_predict_layers"); ok {
		if n, _ := v.Uint(); n > 0 {
			return fmt.Errorf("%w: qwen35moe with %d multi-token-prediction layers", model.ErrUnsupportedArch, n)
		}
	}
	return nil
}

// Desc implements model.Model.
func (m *Model) Desc() *model.Desc { return m.d }

// Router implements model.Model.
func (m *Model) Router(int) model.RouterSpec {
	return model.RouterSpec{Gating: model.SoftmaxTopK, NExpert: m.nExpert, K: m.k, Normalize: true}
}
