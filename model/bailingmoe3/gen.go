package bailingmoe3

// gen.go: the generator side of the bailingmoe3 family (gen.Family): its
// `pipe gen` presets and llama.cpp's LLM_ARCH_BAILINGMOE3 hyper-parameters
// and tensors (llama.cpp's conversion/bailingmoe3.py, BailingMoeV3Model,
// and llama_model_bailingmoe3::load_arch_{hparams,tensors}): KDA layers
// and gated MLA layers (every layer_group_size-th, and the trailing partial
// group), dense leading layers, then routed experts with a selection bias
// and a shared expert.

import (
	"fmt"

	"github.com/pipe-engine/pipe/model/gen"
)

// gateLowerBound is kda_lower_bound, -5.0 in every Ling 3.0 configuration
// (Ling-3.0-flash's and Ling-3.0-tiny's): the family writes it for every
// preset (gen.Preset has no field for it).
const gateLowerBound = float32(-5)

// Presets implements gen.Family.
//
// ling-3.0-flash is inclusionAI/Ling-3.0-flash's config.json (model_type
// bailing_hybrid, BailingMoeV3ForCausalLM) as two public copies quote it
// in full (a Rust config test "bailing_hybrid_maps_ling_kda_mla_moe_and_
// nextn_contract" and a Ling int4 loader test checked against the real
// safetensors index): hidden_size 2560, num_hidden_layers 42,
// intermediate_size 6144 (the dense FFN of first_k_dense_replace 2
// layers), vocab_size 157184, num_attention_heads 32, head_dim 128 (the
// KDA heads), layer_group_size 6 (MLA at layers 5, 11, …, 41: 35 KDA + 7
// MLA), short_conv_kernel_size 4, kda_lower_bound -5.0, kda_safe_gate,
// no_kda_lora, q_lora_rank null, kv_lora_rank 512, qk_nope_head_dim 128,
// qk_rope_head_dim 64, v_head_dim 128, head-wise attention gate,
// rope_theta 6e6 (no rope_scaling), max_position_embeddings 262144,
// rms_norm_eps 1e-6, 512 experts of moe_intermediate_size 768, 8 per
// token, one shared expert of 768, sigmoid scores with the expert bias,
// n_group 8 / topk_group 4, norm_topk_prob, routed_scaling_factor 2.5,
// expert_swiglu_limit_list 4 on layers 35-41 and
// share_expert_swiglu_limit_list 5 on 34-39 and 7 on 40-41 (swigluLimits);
// llama.cpp names the shape (42 layers, n_embd 2560, 512 experts)
// LLM_TYPE_124B_A5_1B. Its one NextN layer (num_nextn_predict_layers 1)
// is block 42: a gated MLA block with routed and shared experts plus
// nextn.eh_proj, nextn.enorm, nextn.hnorm and layer_output_norm, as
// llama.cpp's load_arch_tensors creates it (pipe loads it and does not run
// it, as llama.cpp without MTP; nextn.go).
func (Family) Presets() []gen.Preset {
	return []gen.Preset{
		{
			Name: "ling-3.0-flash", Arch: "bailingmoe3", ModelName: "Ling-3.0-flash (synthetic)",
			Tokenizer:   lingTokenizer(),
			Description: "inclusionAI/Ling-3.0-flash config.json; llama.cpp src/models/bailingmoe3.cpp",
			NLayer:      42 + 1, NEmbd: 2560, NHead: 32, NHeadKV: 1, HeadDim: 512 + 64,
			NExpert: 512, NExpertUsed: 8, NFFExp: 768, NFF: 6144, NFFShExp: 768, NCtxTrain: 262144,
			RopeBase: 6e6, RMSEps: 1e-6, Vocab: 157184, DefaultQuant: "Q4_K_M",
			KVLoraRank: 512, NoPE: 128, NRot: 64, ValueLen: 128,
			LeadingDense: 2, NShared: 1, GatingFunc: gatingSigmoid, WeightsNorm: true, WeightsScale: 2.5,
			ProbsBias: true, ExpertGroups: 8, ExpertGroupsUsed: 4,
			Hybrid: gen.HybridGeom{ConvKernel: 4, StateSize: 128, AttnInterval: 6},
		},
		{
			// Ling-3.0-flash's paths (KDA and gated MLA layers, a trailing
			// partial group of MLA layers, two dense layers, sigmoid gating
			// with bias in 2 of 4 groups, scale 2.5, a shared expert, SwiGLU
			// limits on a dense and the last layer) at tiny widths
			Name: "bailingmoe3-tiny", Arch: "bailingmoe3", ModelName: "tiny-random-bailingmoe3",
			Description: "ling-3.0-flash with tiny widths",
			NLayer:      7, NEmbd: 256, NHead: 4, NHeadKV: 1, HeadDim: 64 + 32,
			NExpert: 16, NExpertUsed: 4, NFFExp: 64, NFF: 256, NFFShExp: 64, NCtxTrain: 4096,
			RopeBase: 6e6, RMSEps: 1e-6, Vocab: 512, DefaultQuant: "Q4_K_M",
			KVLoraRank: 64, NoPE: 32, NRot: 32, ValueLen: 32,
			LeadingDense: 2, NShared: 1, GatingFunc: gatingSigmoid, WeightsNorm: true, WeightsScale: 2.5,
			ProbsBias: true, ExpertGroups: 4, ExpertGroupsUsed: 2,
			Hybrid: gen.HybridGeom{ConvKernel: 4, StateSize: 64, AttnInterval: 3},
		},
	}
}

// swigluLimits are a preset's swiglu_clamp_exp and swiglu_clamp_shexp
// (nil: none): Ling-3.0-flash's expert_swiglu_limit_list and
// share_expert_swiglu_limit_list, and the tiny preset's.
func swigluLimits(p *gen.Preset) (exp, shexp []float32) {
	span := func(n, from, to int, v float32, xs []float32) []float32 {
		if xs == nil {
			xs = make([]float32, n)
		}
		for l := from; l <= to && l < n; l++ {
			xs[l] = v
		}
		return xs
	}
	switch p.Name {
	case "ling-3.0-flash":
		exp = span(p.NLayer, 35, 41, 4, nil)
		shexp = span(p.NLayer, 40, 41, 7, span(p.NLayer, 34, 39, 5, nil))
	case "bailingmoe3-tiny":
		// about a quarter of the last layer's up values and a few of its
		// silu(gate) (the tiny model's are ~0.15 typical, 0.9 at most); the
		// second dense layer's too
		exp = span(p.NLayer, 6, 6, 0.25, nil)
		shexp = span(p.NLayer, 6, 6, 0.2, span(p.NLayer, 1, 1, 0.3, nil))
	}
	return exp, shexp
}

// isMLA is the converter's is_full_attention over the trunk: every
// layer_group_size-th layer, and every layer of a trailing partial group;
// the NextN layers are MLA blocks. A --layers cut whose trunk is shorter
// than a group is therefore all MLA, which pipe runs and llama.cpp
// 3f545becc does not (its recurrent memory of no layer is an empty buffer:
// GGML_ASSERT(buffer)); cut at layer_group_size or more.
func isMLA(p *gen.Preset, il int) bool {
	g, trunk := p.Hybrid.AttnInterval, p.NLayer-nextnOf(p)
	return il >= trunk || (il+1)%g == 0 || il >= trunk/g*g
}

// nextnOf is preset p's NextN layers (the last blocks): ling-3.0-flash's
// one, none when a --layers cut leaves a single block.
func nextnOf(p *gen.Preset) int {
	if p.Name != "ling-3.0-flash" {
		return 0
	}
	return max(min(1, p.NLayer-1), 0)
}

// CheckPreset implements gen.Family: the latent geometry (one KV head of
// the cached row), the KDA geometry, the shared expert and selection bias
// and the expert groups.
func (Family) CheckPreset(p *gen.Preset) error {
	h := &p.Hybrid
	if p.KVLoraRank <= 0 || p.NoPE <= 0 || p.NRot <= 0 || p.NRot%2 != 0 || p.ValueLen <= 0 || p.NHeadKV != 1 ||
		p.HeadDim != p.KVLoraRank+p.NRot || h.StateSize <= 0 || h.ConvKernel < 1 || h.AttnInterval < 1 ||
		p.NShared <= 0 || !p.ProbsBias ||
		(p.ExpertGroups > 1 && (p.NExpert%p.ExpertGroups != 0 || p.ExpertGroupsUsed <= 0 || p.ExpertGroupsUsed >= p.ExpertGroups)) {
		return fmt.Errorf("%w: bailingmoe3 preset %q needs the latent geometry (KVLoraRank, NoPE, even NRot, ValueLen, NHeadKV 1, HeadDim KVLoraRank+NRot), "+
			"Hybrid.StateSize, ConvKernel and AttnInterval, a shared expert, the selection bias and consistent expert groups", gen.ErrBadOptions, p.Name)
	}
	return nil
}

// Metadata implements gen.Family: the converter's keys (BailingMoeV3Model
// after TextModel's), the KDA layers marked by head_count_kv 0.
func (Family) Metadata(p *gen.Preset) []gen.MetaKV {
	u32 := func(x int) uint32 { return uint32(x) }
	kv := make([]uint32, p.NLayer)
	for il := range kv {
		if isMLA(p, il) {
			kv[il] = 1
		}
	}
	ps := []gen.MetaKV{
		{Key: "attention.head_count_kv", Value: kv},
		{Key: "rope.freq_base", Value: p.RopeBase},
		{Key: "attention.layer_norm_rms_epsilon", Value: p.RMSEps},
		{Key: "expert_count", Value: u32(p.NExpert)},
		{Key: "expert_used_count", Value: u32(p.NExpertUsed)},
	}
	if p.ExpertGroups > 1 {
		ps = append(ps,
			gen.MetaKV{Key: "expert_group_count", Value: u32(p.ExpertGroups)},
			gen.MetaKV{Key: "expert_group_used_count", Value: u32(p.ExpertGroupsUsed)})
	}
	ps = append(ps, []gen.MetaKV{
		{Key: "expert_gating_func", Value: u32(p.GatingFunc)},
		{Key: "vocab_size", Value: u32(p.Vocab)},
		{Key: "ssm.conv_kernel", Value: u32(p.Hybrid.ConvKernel)},
		{Key: "kda.head_dim", Value: u32(p.Hybrid.StateSize)},
		{Key: "kda.safe_gate", Value: true},
		{Key: "kda.gate_lower_bound", Value: gateLowerBound},
		{Key: "attention.kv_lora_rank", Value: u32(p.KVLoraRank)},
		{Key: "rope.dimension_count", Value: u32(p.NRot)},
		{Key: "attention.key_length", Value: u32(p.KVLoraRank + p.NRot)},
		{Key: "attention.key_length_mla", Value: u32(p.NoPE + p.NRot)},
		{Key: "attention.value_length_mla", Value: u32(p.ValueLen)},
		{Key: "expert_feed_forward_length", Value: u32(p.NFFExp)},
		{Key: "expert_shared_feed_forward_length", Value: u32(p.NFFShExp)},
		{Key: "expert_shared_count", Value: u32(p.NShared)},
		{Key: "leading_dense_block_count", Value: u32(leadingDense(p))},
		{Key: "expert_weights_scale", Value: p.WeightsScale},
		{Key: "expert_weights_norm", Value: p.WeightsNorm},
	}...)
	if exp, shexp := swigluLimits(p); exp != nil {
		ps = append(ps, gen.MetaKV{Key: "swiglu_clamp_exp", Value: exp}, gen.MetaKV{Key: "swiglu_clamp_shexp", Value: shexp})
	}
	if n := nextnOf(p); n > 0 {
		ps = append(ps, gen.MetaKV{Key: "nextn_predict_layers", Value: u32(n)})
	}
	return ps
}

// Tensors implements gen.Family.
func (Family) Tensors(p *gen.Preset, vocab int) []gen.TensorSpec {
	ts := gen.HeadTensors(p, vocab)
	for il := 0; il < p.NLayer; il++ {
		ts = append(ts, blockTensors(p, il)...)
		if il >= p.NLayer-nextnOf(p) {
			E := p.NEmbd
			t := func(name string, role gen.Role, dims ...int) gen.TensorSpec {
				return gen.TensorSpec{Name: gen.Blk(il, name), Layer: il, Dims: gen.Dims(dims...), Role: role}
			}
			ts = append(ts, t("nextn.eh_proj.weight", gen.RoleProj, 2*E, E), t("nextn.enorm.weight", gen.RoleNorm, E),
				t("nextn.hnorm.weight", gen.RoleNorm, E), t("layer_output_norm.weight", gen.RoleNorm, E))
		}
	}
	return ts
}

// blockTensors is block il: the KDA or gated MLA mixer, then a dense FFN
// (the leading layers) or routed experts with their selection bias and
// the shared expert.
func blockTensors(p *gen.Preset, il int) []gen.TensorSpec {
	E := p.NEmbd
	t := func(name string, role gen.Role, dims ...int) gen.TensorSpec {
		return gen.TensorSpec{Name: gen.Blk(il, name), Layer: il, Dims: gen.Dims(dims...), Role: role}
	}
	ts := []gen.TensorSpec{t("attn_norm.weight", gen.RoleNorm, E), t("ffn_norm.weight", gen.RoleNorm, E)}
	if isMLA(p, il) {
		ts = append(ts, mlaTensors(p, t)...)
	} else {
		ts = append(ts, kdaTensors(p, t)...)
	}
	if il < leadingDense(p) {
		return append(ts,
			t("ffn_gate.weight", gen.RoleProj, E, p.NFF),
			t("ffn_up.weight", gen.RoleProj, E, p.NFF),
			t("ffn_down.weight", gen.RoleProjOut, p.NFF, E))
	}
	return append(ts,
		t("ffn_gate_inp.weight", gen.RoleRouter, E, p.NExpert),
		t("exp_probs_b.bias", gen.RoleBias, p.NExpert),
		t("ffn_gate_exps.weight", gen.RoleExpert, E, p.NFFExp, p.NExpert),
		t("ffn_up_exps.weight", gen.RoleExpert, E, p.NFFExp, p.NExpert),
		t("ffn_down_exps.weight", gen.RoleExpertOut, p.NFFExp, E, p.NExpert),
		t("ffn_gate_shexp.weight", gen.RoleProj, E, p.NFFShExp),
		t("ffn_up_shexp.weight", gen.RoleProj, E, p.NFFShExp),
		t("ffn_down_shexp.weight", gen.RoleProjOut, p.NFFShExp, E))
}

// leadingDense is the preset's dense leading layers, leaving at least one
// MoE layer to a --layers cut (a file without experts runs in neither
// engine: llama.cpp aborts, pipe has no expert to stream).
func leadingDense(p *gen.Preset) int { return max(min(p.LeadingDense, p.NLayer-nextnOf(p)-1), 0) }

type tensorFn func(name string, role gen.Role, dims ...int) gen.TensorSpec

// mlaTensors are a gated MLA layer's (no query bottleneck: Ling 3.0 has
// q_lora_rank null).
func mlaTensors(p *gen.Preset, t tensorFn) []gen.TensorSpec {
	E, nh := p.NEmbd, p.NHead
	return []gen.TensorSpec{
		t("attn_q.weight", gen.RoleProj, E, nh*(p.NoPE+p.NRot)),
		t("attn_kv_a_mqa.weight", gen.RoleProj, E, p.KVLoraRank+p.NRot),
		t("attn_kv_a_norm.weight", gen.RoleNorm, p.KVLoraRank),
		t("attn_k_b.weight", gen.RoleProj, p.NoPE, p.KVLoraRank, nh),
		t("attn_v_b.weight", gen.RoleProj, p.KVLoraRank, p.ValueLen, nh),
		t("attn_gate.weight", gen.RoleProj, E, nh),
		t("attn_output.weight", gen.RoleProjOut, nh*p.ValueLen, E),
	}
}

// kdaTensors are a KDA layer's: q, k, v projections and their convolutions
// ({d_conv, 1, d_inner} as the converter reshapes them), the full-rank
// forget (ssm_f_a) and output (ssm_g_a) gates, β, a = exp(A_log) per head
// (positive: written with the norms' 1 + 0.1·N(0,1)), the gate bias, the
// head norm and the output projection.
func kdaTensors(p *gen.Preset, t tensorFn) []gen.TensorSpec {
	E, nh, S, K := p.NEmbd, p.NHead, p.Hybrid.StateSize, p.Hybrid.ConvKernel
	D := nh * S
	return []gen.TensorSpec{
		t("attn_q.weight", gen.RoleProj, E, D),
		t("attn_k.weight", gen.RoleProj, E, D),
		t("attn_v.weight", gen.RoleProj, E, D),
		t("ssm_conv1d_q.weight", gen.RoleConv, K, 1, D),
		t("ssm_conv1d_k.weight", gen.RoleConv, K, 1, D),
		t("ssm_conv1d_v.weight", gen.RoleConv, K, 1, D),
		t("ssm_f_a.weight", gen.RoleProj, E, D),
		t("ssm_beta.weight", gen.RoleProj, E, nh),
		t("ssm_a", gen.RoleNorm, 1, nh),
		t("ssm_dt.bias", gen.RoleBias, D),
		t("ssm_g_a.weight", gen.RoleProj, E, D),
		t("ssm_norm.weight", gen.RoleNorm, S),
		t("attn_output.weight", gen.RoleProjOut, D, E),
	}
}

// Vocab implements gen.Family: the ChatML tokenizer of the other families,
// which the tiny preset writes (ling-3.0-flash writes Ling 3.0's own
// specials and Bailing V3 template: chat.go).
func (Family) Vocab() gen.VocabSpec { return gen.ChatMLVocab() }
