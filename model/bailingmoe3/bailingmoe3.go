// Package bailingmoe3 is the BailingMoeV3 architecture (Ling 3.0:
// Ling-3.0-tiny, Ling-3.0-flash), following llama.cpp's
// src/models/bailingmoe3.cpp graph, the fused ggml_gated_delta_net its CPU
// backend runs (delta-net-base.cpp) and build_moe_ffn / build_ffn:
//
//	x = embd(tokens)
//	per layer: h = RMSNorm(x)·attn_norm
//	  KDA layers (attention.head_count_kv[il] = 0): per head of kda.head_dim,
//	    q, k, v = silu(conv1d_{q,k,v}(W{q,k,v} h))  (causal convs of
//	    ssm.conv_kernel taps over the previous inputs kept in the state)
//	    q, k L2-normalised per head (eps: the RMS epsilon)
//	    g = lower_bound·σ((Wf h + dt_bias)·a_head)   (one decay per channel)
//	    β = σ(Wβ h) per head
//	    the KDA delta rule over the head's state S (row j = column j):
//	      S_j ·= e^g (per key channel); δ_j = (v_j − S_j·k)·β;
//	      S_j += δ_j·k; o_j = (S_j·q)/√d
//	    x += Wo (RMSNorm(o)·ssm_norm · σ(Wg h))
//	  MLA layers (head_count_kv[il] = 1): model.Latent (llama.cpp's absorbed
//	    MLA over a cache of kv_lora_rank + n_rot floats per position, the
//	    "normal" RoPE on n_rot dims, scale 1/√key_length_mla) with its
//	    head-wise output gate σ(Wattn_gate h) before Wo
//	  h = RMSNorm(x)·ffn_norm
//	  layers < leading_dense_block_count: x += down(silu(gate h)·up h)
//	  the others: x += Σ_rank w_r · down_e(silu(gate_e h)·up_e h)  (the MoE seam)
//	                 + down_s(silu(gate_s h)·up_s h)             (shared expert)
//	logits = Woutput RMSNorm(x)·output_norm
//
// The gating is expert_gating_func's (sigmoid in Ling 3.0) with the
// selection bias exp_probs_b, renormalisation, scale and group-limited
// choice, as bailingmoe2's. Where swiglu_clamp_exp / swiglu_clamp_shexp
// give a layer a limit L > 0, its routed experts (resp. its dense FFN or
// shared expert) compute min(silu(gate), L)·clamp(up, −L, L) instead.
// The NextN (MTP) layers at the end of a file (nextn_predict_layers) are
// loaded as llama.cpp loads them without MTP — their tensors checked by
// name and shape (nextn.go) — and not run.
//
// The KDA layers are model.Mixer hooks whose three convolution states and
// per-head S×S states live in the model.State beside the MLA layers'
// latent rows. The KDA rule is the delta rule of kernels.DeltaRule after a
// per-channel decay of the state: with the decay factor 1 DeltaRule's own
// scaling is exact, so the two steps compute ggml's per-row order.
//
// The package is the whole family (family.Family: family.go; its `pipe
// gen` presets, tensors and metadata in gen.go). It registers itself as
// "bailingmoe3" on import.
package bailingmoe3

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

// Model is a loaded BailingMoeV3: the shared decoder with KDA mixers and
// gated latent attention, dense leading layers and routed plus shared
// experts.
type Model struct {
	*model.Decoder
	*model.Experts
	d       *model.Desc
	router  []model.RouterSpec // per layer
	clamped []*model.Experts   // per layer: the experts with the layer's SwiGLU limit (nil: Experts)
}

// New builds a BailingMoeV3 from its description and dense weights.
func New(d *model.Desc, src model.DenseSource, opt model.Options) (model.Model, error) {
	hp := d.HParams
	own, ok := d.FamilyHP.(HParams)
	if !ok {
		return nil, fmt.Errorf("%w: bailingmoe3: no family hyper-parameters", model.ErrBadModel)
	}
	k, err := model.ExpertsUsed(hp, opt)
	if err != nil {
		return nil, err
	}
	if err := checkHParams(hp, own); err != nil {
		return nil, err
	}
	spec, err := routerSpec(hp, k)
	if err != nil {
		return nil, err
	}
	eps := hp.RMSEps
	if eps == 0 {
		eps = 1e-6
	}
	m := &Model{d: d, Experts: &model.Experts{Arch: "bailingmoe3", Pool: opt.Pool, NEmbd: hp.NEmbd, NFF: hp.NFFExp, NExpert: hp.NExpert, Act: model.SwiGLU}}
	m.Decoder = &model.Decoder{Pool: opt.Pool, NEmbd: hp.NEmbd, Eps: eps, Timings: opt.Timings, Clock: opt.Clock}
	rope := model.Rope{NDims: hp.NRot, Base: hp.RopeFreqBase, FreqScale: 1, AttnScale: 1}
	geom := model.LatentGeom(hp.NHead, hp.MLA.KVLoraRank, hp.NRot, float32(1/math.Sqrt(float64(hp.MLA.KeyLength))))
	ld := model.NewLoader(d, src)
	ld.Embeddings(m.Decoder)
	for l := 0; l < runLayers(d); l++ {
		var layer model.Layer
		if own.IsKDA(l) {
			layer.Mixer = loadKDA(ld, hp, own, l, eps, opt)
		} else {
			layer.Attn = loadLatent(ld, hp, l, geom, rope)
		}
		s := spec
		layer.FFN, s.Bias = m.loadFFN(ld, hp, own, l)
		m.router = append(m.router, s)
		m.Layers = append(m.Layers, layer)
	}
	m.clampExperts(own)
	if err := ld.Err(); err != nil {
		return nil, err
	}
	if err := ld.CheckVocab(m.Decoder, hp.NVocab); err != nil {
		return nil, err
	}
	if err := checkNextN(d); err != nil {
		return nil, err
	}
	return m, nil
}

func blk(l int, name string) string { return fmt.Sprintf("blk.%d.%s", l, name) }

// loadFFN loads layer l's feed-forward half: a dense FFN on the leading
// layers, else the router, the shared expert and the routed experts'
// description; it returns the router's selection bias (nil when dense).
func (m *Model) loadFFN(ld *model.Loader, hp model.HParams, own HParams, l int) (model.FFN, []float32) {
	E := hp.NEmbd
	act := swiGLU(own.limit(own.ClampShExp, l))
	if l < hp.MoE.LeadingDense {
		m.SkipLayer()
		return &model.DenseFFN{Norm: ld.Vector(blk(l, "ffn_norm.weight"), E),
			GLU: model.LoadGLU(ld, blk(l, "ffn_"), ".weight", E, hp.NFF, act)}, nil
	}
	r := &model.RoutedFFN{
		Norm:   ld.Vector(blk(l, "ffn_norm.weight"), E),
		Gate:   ld.Matrix(blk(l, "ffn_gate_inp.weight"), E, hp.NExpert),
		Shared: model.LoadSharedExpert(ld, l, E, sharedWidth(hp), act),
	}
	bias := ld.Vector(blk(l, "exp_probs_b.bias"), hp.NExpert)
	m.AddLayer(ld, l)
	return r, bias
}

// sharedWidth is the shared expert's width as llama.cpp sizes it:
// expert_shared_feed_forward_length, else expert_feed_forward_length ×
// max(1, expert_shared_count).
func sharedWidth(hp model.HParams) int {
	if hp.NFFShExp > 0 {
		return hp.NFFShExp
	}
	return hp.NFFExp * max(1, hp.MoE.NShared)
}

// loadLatent loads MLA layer l: model.Latent with the head-wise output
// gate attn_gate.
func loadLatent(ld *model.Loader, hp model.HParams, l int, g model.Geom, rope model.NormRotation) model.Attention {
	a := model.LoadLatent(ld, hp, l, g, rope)
	a.Latent.Gate = ld.Matrix(blk(l, "attn_gate.weight"), hp.NEmbd, hp.NHead)
	return a
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
		return s, fmt.Errorf("%w: bailingmoe3.expert_gating_func = %d (want 1 softmax or 2 sigmoid)", model.ErrUnsupportedArch, hp.MoE.GatingFunc)
	}
	if s.Groups > 1 && (hp.NExpert%s.Groups != 0 || s.GroupsUsed <= 0 || s.GroupsUsed >= s.Groups) {
		return s, fmt.Errorf("%w: bailingmoe3: %d experts in %d groups, %d used", model.ErrBadModel, hp.NExpert, s.Groups, s.GroupsUsed)
	}
	return s, nil
}

// checkHParams refuses hyper-parameters the graph cannot run, naming the
// first bad key and its value.
func checkHParams(hp model.HParams, own HParams) error {
	mla := hp.MLA
	for _, c := range []struct {
		bad  bool
		key  string
		val  int
		want string
	}{
		{hp.NLayer <= 0, "block_count", hp.NLayer, "> 0"},
		{hp.NEmbd <= 0, "embedding_length", hp.NEmbd, "> 0"},
		{hp.NHead <= 0, "attention.head_count", hp.NHead, "> 0"},
		{hp.NExpert <= 0, "expert_count", hp.NExpert, "> 0"},
		{hp.NFFExp <= 0, "expert_feed_forward_length", hp.NFFExp, "> 0"},
		{own.HeadDim <= 0, "kda.head_dim", own.HeadDim, "> 0"},
		{own.ConvKernel < 1, "ssm.conv_kernel", own.ConvKernel, ">= 1"},
		{mla.KVLoraRank <= 0, "attention.kv_lora_rank", mla.KVLoraRank, "> 0"},
		{mla.ValLength <= 0, "attention.value_length_mla", mla.ValLength, "> 0"},
		{hp.NRot <= 0 || hp.NRot%2 != 0, "rope.dimension_count", hp.NRot, "even and > 0"},
		{mla.KeyLength <= hp.NRot, "attention.key_length_mla", mla.KeyLength, fmt.Sprintf("> rope.dimension_count %d", hp.NRot)},
		{own.NextN < 0 || own.NextN >= hp.NLayer, "nextn_predict_layers", own.NextN, fmt.Sprintf("< block_count %d", hp.NLayer)},
		{hp.MoE.LeadingDense > hp.NLayer-max(own.NextN, 0), "leading_dense_block_count", hp.MoE.LeadingDense, fmt.Sprintf("<= block_count - nextn_predict_layers %d", hp.NLayer-max(own.NextN, 0))},
	} {
		if c.bad {
			return fmt.Errorf("%w: bailingmoe3.%s = %d (want %s)", model.ErrBadModel, c.key, c.val, c.want)
		}
	}
	switch hp.RopeScalingType {
	case "", "none":
	default:
		return fmt.Errorf("%w: bailingmoe3: rope scaling %q is not supported", model.ErrUnsupportedArch, hp.RopeScalingType)
	}
	return nil
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
