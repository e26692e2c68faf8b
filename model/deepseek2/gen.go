package deepseek2

// gen.go: the generator side of the deepseek2 family (gen.Family): its
// `pipe gen` presets and llama.cpp's LLM_ARCH_DEEPSEEK2 hyper-parameters
// and tensors for a file with the split attn_k_b/attn_v_b (the absorbed
// latent attention): dense leading layers, then routed experts with
// shared ones.

import (
	"fmt"

	"github.com/pipe-engine/pipe/model/gen"
)

// Presets implements gen.Family.
func (Family) Presets() []gen.Preset {
	return []gen.Preset{
		{
			Name: "deepseek-v2-lite", Arch: "deepseek2", ModelName: "DeepSeek-V2-Lite (synthetic)",
			Description: "deepseek-ai/DeepSeek-V2-Lite config.json; llama.cpp src/models/deepseek2.cpp",
			NLayer:      27, NEmbd: 2048, NHead: 16, NHeadKV: 1, HeadDim: 512 + 64,
			NExpert: 64, NExpertUsed: 6, NFFExp: 1408, NFF: 10944, NCtxTrain: 163840,
			RopeBase: 10000, RMSEps: 1e-6, Vocab: 102400, DefaultQuant: "Q4_K_M",
			YarnFactor: 40, YarnOrigCtx: 4096, YarnLogMul: 0.0707,
			KVLoraRank: 512, NoPE: 128, NRot: 64, ValueLen: 128,
			LeadingDense: 1, NShared: 2, GatingFunc: 1, WeightsScale: 1,
		},
		{
			// GLM-4.7-Flash's gating (a query bottleneck, sigmoid, selection
			// bias, renormalised and scaled weights) with DeepSeek-V3's expert
			// groups and V2-Lite's YaRN, scaled down
			Name: "deepseek2-tiny", Arch: "deepseek2", ModelName: "tiny-random-deepseek2",
			Description: "deepseek-v2-lite and GLM-4.7-Flash scaled down",
			NLayer:      4, NEmbd: 256, NHead: 4, NHeadKV: 1, HeadDim: 64 + 32,
			NExpert: 16, NExpertUsed: 3, NFFExp: 128, NFF: 512, NCtxTrain: 1024,
			RopeBase: 10000, RMSEps: 1e-6, Vocab: 512, DefaultQuant: "Q4_K_M",
			YarnFactor: 4, YarnOrigCtx: 256, YarnLogMul: 0.0707,
			KVLoraRank: 64, QLoraRank: 128, NoPE: 32, NRot: 32, ValueLen: 32,
			LeadingDense: 1, NShared: 1, GatingFunc: 2, WeightsNorm: true, WeightsScale: 2.5,
			ProbsBias: true, ExpertGroups: 4, ExpertGroupsUsed: 2,
		},
		{
			// DeepSeek-V2-Lite's paths (27 layers: llama.cpp's "lite" test, so a
			// plain query projection; softmax gating without renormalisation,
			// two shared experts, YaRN ×40 with its log multiplier), tiny widths
			Name: "deepseek2-lite-tiny", Arch: "deepseek2", ModelName: "tiny-random-deepseek2-lite",
			Description: "deepseek-v2-lite with tiny widths",
			NLayer:      27, NEmbd: 128, NHead: 4, NHeadKV: 1, HeadDim: 64 + 32,
			NExpert: 8, NExpertUsed: 2, NFFExp: 64, NFF: 256, NCtxTrain: 163840,
			RopeBase: 10000, RMSEps: 1e-6, Vocab: 512, DefaultQuant: "Q4_K_M",
			YarnFactor: 40, YarnOrigCtx: 4096, YarnLogMul: 0.0707,
			KVLoraRank: 64, NoPE: 32, NRot: 32, ValueLen: 32,
			LeadingDense: 1, NShared: 2, GatingFunc: 1, WeightsScale: 1,
		},
	}
}

// CheckPreset implements gen.Family: the latent geometry, one KV head of
// the cached row.
func (Family) CheckPreset(p *gen.Preset) error {
	if p.KVLoraRank <= 0 || p.NoPE <= 0 || p.NRot <= 0 || p.ValueLen <= 0 || p.NHeadKV != 1 ||
		p.HeadDim != p.KVLoraRank+p.NRot || p.LeadingDense > p.NLayer {
		return fmt.Errorf("%w: deepseek2 preset %q needs KVLoraRank, NoPE, NRot, ValueLen, NHeadKV 1 and HeadDim KVLoraRank+NRot", gen.ErrBadOptions, p.Name)
	}
	return nil
}

// llamaLite is whether llama.cpp takes a deepseek2 file of nLayer blocks
// for a "lite" variant, whose q_lora_rank it does not read (26 or 27
// layers; 48 only with one vocabulary, not assumed here). A file without a
// low-rank query at any other depth (a `pipe gen --layers` cut of
// deepseek-v2-lite) says q_lora_rank 0, which llama.cpp reads as a plain
// query projection, as pipe does; real files of the lite shapes and the
// presets' own depths are written without the key, as the converter does.
func llamaLite(nLayer int) bool { return nLayer == 26 || nLayer == 27 }

// Metadata implements gen.Family: llama.cpp's converter's deepseek2
// hyper-parameters, the latent attention written as one KV head of the
// cached row (key_length = kv_lora_rank + n_rot, value_length =
// kv_lora_rank) with the per-head widths in the _mla keys.
func (Family) Metadata(p *gen.Preset) []gen.MetaKV {
	u32 := func(x int) uint32 { return uint32(x) }
	ps := []gen.MetaKV{
		{Key: "attention.head_count_kv", Value: uint32(1)},
		{Key: "rope.freq_base", Value: p.RopeBase},
		{Key: "attention.layer_norm_rms_epsilon", Value: p.RMSEps},
		{Key: "expert_used_count", Value: u32(p.NExpertUsed)},
		{Key: "leading_dense_block_count", Value: u32(p.LeadingDense)},
	}
	if p.QLoraRank > 0 || !llamaLite(p.NLayer) {
		ps = append(ps, gen.MetaKV{Key: "attention.q_lora_rank", Value: u32(p.QLoraRank)})
	}
	ps = append(ps, []gen.MetaKV{
		{Key: "attention.kv_lora_rank", Value: u32(p.KVLoraRank)},
		{Key: "attention.key_length", Value: u32(p.KVLoraRank + p.NRot)},
		{Key: "attention.value_length", Value: u32(p.KVLoraRank)},
		{Key: "attention.key_length_mla", Value: u32(p.NoPE + p.NRot)},
		{Key: "attention.value_length_mla", Value: u32(p.ValueLen)},
		{Key: "expert_feed_forward_length", Value: u32(p.NFFExp)},
		{Key: "expert_count", Value: u32(p.NExpert)},
		{Key: "expert_shared_count", Value: u32(p.NShared)},
		{Key: "expert_weights_scale", Value: p.WeightsScale},
		{Key: "expert_weights_norm", Value: p.WeightsNorm},
		{Key: "expert_gating_func", Value: u32(p.GatingFunc)},
	}...)
	if p.ExpertGroups > 1 {
		ps = append(ps,
			gen.MetaKV{Key: "expert_group_count", Value: u32(p.ExpertGroups)},
			gen.MetaKV{Key: "expert_group_used_count", Value: u32(p.ExpertGroupsUsed)})
	}
	ps = append(ps, gen.MetaKV{Key: "rope.dimension_count", Value: u32(p.NRot)})
	if p.YarnFactor > 0 {
		ps = append(ps,
			gen.MetaKV{Key: "rope.scaling.type", Value: "yarn"},
			gen.MetaKV{Key: "rope.scaling.factor", Value: p.YarnFactor},
			gen.MetaKV{Key: "rope.scaling.original_context_length", Value: u32(p.YarnOrigCtx)},
			gen.MetaKV{Key: "rope.scaling.yarn_log_multiplier", Value: p.YarnLogMul})
	}
	return ps
}

// Tensors implements gen.Family.
func (Family) Tensors(p *gen.Preset, vocab int) []gen.TensorSpec {
	ts := gen.HeadTensors(p, vocab)
	for il := 0; il < p.NLayer; il++ {
		ts = append(ts, blockTensors(p, il)...)
	}
	return ts
}

// blockTensors is block il: the latent attention (a query bottleneck when
// QLoraRank > 0), then a dense FFN (the leading layers) or routed experts
// with their selection bias and shared experts.
func blockTensors(p *gen.Preset, il int) []gen.TensorSpec {
	E, nh := p.NEmbd, p.NHead
	kq := p.NoPE + p.NRot
	t := func(name string, role gen.Role, dims ...int) gen.TensorSpec {
		return gen.TensorSpec{Name: gen.Blk(il, name), Layer: il, Dims: gen.Dims(dims...), Role: role}
	}
	ts := []gen.TensorSpec{
		t("attn_norm.weight", gen.RoleNorm, E),
		t("attn_kv_a_norm.weight", gen.RoleNorm, p.KVLoraRank),
		t("attn_kv_a_mqa.weight", gen.RoleProj, E, p.KVLoraRank+p.NRot),
		t("attn_k_b.weight", gen.RoleProj, p.NoPE, p.KVLoraRank, nh),
		t("attn_v_b.weight", gen.RoleProj, p.KVLoraRank, p.ValueLen, nh),
		t("attn_output.weight", gen.RoleProjOut, nh*p.ValueLen, E),
		t("ffn_norm.weight", gen.RoleNorm, E),
	}
	if p.QLoraRank > 0 {
		ts = append(ts,
			t("attn_q_a_norm.weight", gen.RoleNorm, p.QLoraRank),
			t("attn_q_a.weight", gen.RoleProj, E, p.QLoraRank),
			t("attn_q_b.weight", gen.RoleProj, p.QLoraRank, nh*kq))
	} else {
		ts = append(ts, t("attn_q.weight", gen.RoleProj, E, nh*kq))
	}
	if il < p.LeadingDense {
		return append(ts,
			t("ffn_gate.weight", gen.RoleProj, E, p.NFF),
			t("ffn_up.weight", gen.RoleProj, E, p.NFF),
			t("ffn_down.weight", gen.RoleProjOut, p.NFF, E))
	}
	ts = append(ts,
		t("ffn_gate_inp.weight", gen.RoleRouter, E, p.NExpert),
		t("ffn_gate_exps.weight", gen.RoleExpert, E, p.NFFExp, p.NExpert),
		t("ffn_up_exps.weight", gen.RoleExpert, E, p.NFFExp, p.NExpert),
		t("ffn_down_exps.weight", gen.RoleExpertOut, p.NFFExp, E, p.NExpert))
	if p.ProbsBias {
		ts = append(ts, t("exp_probs_b.bias", gen.RoleBias, p.NExpert))
	}
	if sh := p.NFFExp * p.NShared; sh > 0 {
		ts = append(ts,
			t("ffn_gate_shexp.weight", gen.RoleProj, E, sh),
			t("ffn_up_shexp.weight", gen.RoleProj, E, sh),
			t("ffn_down_shexp.weight", gen.RoleProjOut, sh, E))
	}
	return ts
}

// Vocab implements gen.Family.
func (Family) Vocab() gen.VocabSpec { return gen.ChatMLVocab() }
