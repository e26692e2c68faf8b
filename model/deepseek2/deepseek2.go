// Package deepseek2 is the DeepSeek-V2 architecture (DeepSeek-V2-Lite,
// DeepSeek-V2, GLM-4.7-Flash), following llama.cpp's src/models/deepseek2.cpp
// graph and build_moe_ffn:
//
//	x = embd(tokens)
//	per layer: h = RMSNorm(x)·attn_norm
//	           x += latent attention of h (model.Latent: llama.cpp's absorbed
//	                MLA over a cache of kv_lora_rank + n_rot floats per position)
//	           h = RMSNorm(x)·ffn_norm
//	           layers < leading_dense_block_count: x += down(silu(gate h)·up h)
//	           the others: logits = Wgate_inp h
//	                       x += Σ_rank w_r · down_e(silu(gate_e h)·up_e h)   (the MoE seam)
//	                            + down_s(silu(gate_s h)·up_s h)              (shared experts)
//	logits = Woutput RMSNorm(x)·output_norm
//
// The gating is softmax or sigmoid (expert_gating_func; files without it are
// softmax, except GLM-4.7-Flash's shape, which llama.cpp makes sigmoid),
// with the optional selection bias exp_probs_b, renormalisation
// (expert_weights_norm), scale (expert_weights_scale) and group-limited
// choice (expert_group_count, expert_group_used_count). The rotation is
// ggml's "normal" rope (adjacent pairs) over the last n_rot dims of each
// query head and of the cached key, with YaRN when the file asks for it.
// Files from before the attn_k_b/attn_v_b split (attn_kv_b) and the
// attention temperature of mistral-large are refused with
// model.ErrUnsupportedArch.
//
// The package is the whole family (family.Family, family.go; its `pipe
// gen` presets, tensors and metadata in gen.go). It registers itself as
// "deepseek2" on import.
package deepseek2

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

// Model is a loaded DeepSeek-V2: the shared decoder with latent attention,
// dense leading layers and routed plus shared experts.
type Model struct {
	*model.Decoder
	*model.Experts
	d      *model.Desc
	router []model.RouterSpec // per layer
}

// checkHParams refuses hyper-parameters the graph cannot run, naming the
// first bad key and its value (k is the experts used, nope the key length
// without RoPE).
func checkHParams(hp model.HParams, k, nope int) error {
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
		{k <= 0, "expert_used_count", k, "> 0"},
		{hp.NFFExp <= 0, "expert_feed_forward_length", hp.NFFExp, "> 0"},
		{mla.KVLoraRank <= 0, "attention.kv_lora_rank", mla.KVLoraRank, "> 0"},
		{hp.NRot <= 0 || hp.NRot%2 != 0, "rope.dimension_count", hp.NRot, "even and > 0"},
		{nope <= 0, "attention.key_length_mla", mla.KeyLength, fmt.Sprintf("> rope.dimension_count %d", hp.NRot)},
		{hp.MoE.LeadingDense > hp.NLayer, "leading_dense_block_count", hp.MoE.LeadingDense, fmt.Sprintf("<= block_count %d", hp.NLayer)},
	} {
		if c.bad {
			return fmt.Errorf("%w: deepseek2.%s = %d (want %s)", model.ErrBadModel, c.key, c.val, c.want)
		}
	}
	return nil
}

// New builds a DeepSeek-V2 from its description and dense weights.
func New(d *model.Desc, src model.DenseSource, opt model.Options) (model.Model, error) {
	hp := d.HParams
	k, err := model.ExpertsUsed(hp, opt)
	if err != nil {
		return nil, err
	}
	mla := hp.MLA
	nope := mla.KeyLength - hp.NRot
	if mla.KeyLength == 0 || mla.ValLength == 0 {
		return nil, fmt.Errorf("%w: deepseek2 without attention.key_length_mla/value_length_mla (a file with attn_kv_b, from before llama.cpp split it)", model.ErrUnsupportedArch)
	}
	if err := checkHParams(hp, k, nope); err != nil {
		return nil, err
	}
	if _, ok := d.File.Get("deepseek2.attention.temperature_scale"); ok {
		return nil, fmt.Errorf("%w: deepseek2 with attention temperature scaling", model.ErrUnsupportedArch)
	}
	eps := hp.RMSEps
	if eps == 0 {
		eps = 1e-6
	}
	// llama.cpp reads the multiplier divided by 0.1 (cancelling its converter's factor)
	logMul := float32(hp.RopeYarnLogMul / 0.1)
	rope, err := model.NewYaRN(d, hp.NRot, logMul, true)
	if err != nil {
		return nil, fmt.Errorf("deepseek2: %w", err)
	}
	m := &Model{d: d, Experts: &model.Experts{Arch: "deepseek2", Pool: opt.Pool, NEmbd: hp.NEmbd, NFF: hp.NFFExp, NExpert: hp.NExpert, Act: model.SwiGLU}}
	m.Decoder = &model.Decoder{Pool: opt.Pool, NEmbd: hp.NEmbd, Eps: eps, Timings: opt.Timings, Clock: opt.Clock}
	spec, err := routerSpec(hp, k)
	if err != nil {
		return nil, err
	}
	geom := model.LatentGeom(hp.NHead, mla.KVLoraRank, hp.NRot, kqScale(hp, &rope, logMul))
	ld := model.NewLoader(d, src)
	ld.Embeddings(m.Decoder)
	for l := 0; l < hp.NLayer; l++ {
		a := model.LoadLatent(ld, hp, l, geom, &rope)
		var ffn model.FFN
		s := spec
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
				r.Shared = model.LoadSharedExpert(ld, l, hp.NEmbd, hp.NFFExp*hp.MoE.NShared, model.SwiGLU)
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

// routerSpec is the gating rule of the MoE layers (without their bias).
func routerSpec(hp model.HParams, k int) (model.RouterSpec, error) {
	s := model.RouterSpec{NExpert: hp.NExpert, K: k, Normalize: hp.MoE.WeightsNorm, Scale: hp.MoE.WeightsScale,
		Groups: hp.MoE.Groups, GroupsUsed: hp.MoE.GroupsUsed}
	g := hp.MoE.GatingFunc
	if g == gatingNone {
		// llama.cpp: files without the key are softmax, except GLM-4.7-Flash's shape
		g = gatingSoftmax
		if (hp.NLayer == 47 || hp.NLayer == 48) && hp.NVocab == 154880 {
			g = gatingSigmoid
		}
	}
	switch g {
	case gatingSoftmax:
		s.Gating = model.SoftmaxTopK
	case gatingSigmoid:
		s.Gating = model.SigmoidTopK
	default:
		return s, fmt.Errorf("%w: deepseek2 expert_gating_func %d", model.ErrUnsupportedArch, g)
	}
	if s.Groups > 1 && (hp.NExpert%s.Groups != 0 || s.GroupsUsed <= 0 || s.GroupsUsed >= s.Groups) {
		return s, fmt.Errorf("%w: deepseek2: %d experts in %d groups, %d used", model.ErrBadModel, hp.NExpert, s.Groups, s.GroupsUsed)
	}
	return s, nil
}

// kqScale is llama.cpp's kq_scale for deepseek2: mscale²/√key_length_mla,
// with mscale the YaRN attention factor before the rope's own correction.
func kqScale(hp model.HParams, r *model.YaRN, logMul float32) float32 {
	logf := func(x float32) float32 { return float32(math.Log(float64(x))) }
	l := logf(1 / r.FreqScale)
	attnOrg := float32(r.AttnFactor * (1 + float32(float32(0.1)*l)))
	ms := float32(attnOrg * (1 + float32(float32(float32(0.1)*logMul)*l)))
	return float32(float32(ms*ms) / float32(math.Sqrt(float64(hp.MLA.KeyLength))))
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
