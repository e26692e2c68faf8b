package qwen35moe

// gen.go: the generator side of the qwen35moe family (gen.Family): its
// `pipe gen` presets and llama.cpp's LLM_ARCH_QWEN35MOE hyper-parameters
// and tensors: gated delta-net (recurrent) layers, gated full-attention
// layers every full_attention_interval-th layer, routed experts with a
// gated shared expert beside them.

import (
	"fmt"

	"github.com/pipe-engine/pipe/model/gen"
)

// Presets implements gen.Family.
func (Family) Presets() []gen.Preset {
	return []gen.Preset{
		{
			Name: "qwen3.6-35b-a3b", Arch: "qwen35moe", ModelName: "Qwen3.6-35B-A3B (synthetic)",
			Description: "Qwen/Qwen3.6-35B-A3B config.json (text model); llama.cpp src/models/qwen35moe.cpp",
			NLayer:      40, NEmbd: 2048, NHead: 16, NHeadKV: 2, HeadDim: 256,
			NExpert: 256, NExpertUsed: 8, NFFExp: 512, NFF: 512, NCtxTrain: 262144,
			RopeBase: 1e7, RMSEps: 1e-6, Vocab: 248320, DefaultQuant: "Q4_K_M",
			Hybrid: gen.HybridGeom{ConvKernel: 4, StateSize: 128, KeyHeads: 16, ValueHeads: 32, AttnInterval: 4,
				NRot: 64, Sections: [4]int{11, 11, 10, 0}, NFFShExp: 512},
		},
		{
			// two delta-net and two attention layers; key heads shared by
			// two value heads; rope sections that leave one pair unrotated
			Name: "qwen35moe-tiny", Arch: "qwen35moe", ModelName: "tiny-random-qwen35moe",
			Description: "qwen3.6-35b-a3b scaled down",
			NLayer:      4, NEmbd: 256, NHead: 4, NHeadKV: 2, HeadDim: 64,
			NExpert: 8, NExpertUsed: 2, NFFExp: 128, NFF: 128, NCtxTrain: 4096,
			RopeBase: 1e7, RMSEps: 1e-6, Vocab: 512, DefaultQuant: "Q4_K_M",
			Hybrid: gen.HybridGeom{ConvKernel: 4, StateSize: 32, KeyHeads: 2, ValueHeads: 4, AttnInterval: 2,
				NRot: 16, Sections: [4]int{2, 2, 1, 1}, NFFShExp: 128},
		},
	}
}

// CheckPreset implements gen.Family.
func (Family) CheckPreset(p *gen.Preset) error {
	if h := &p.Hybrid; h.ConvKernel <= 0 || h.StateSize <= 0 || h.KeyHeads <= 0 ||
		h.ValueHeads%h.KeyHeads != 0 || h.AttnInterval <= 0 || h.NRot <= 0 || h.NRot > p.HeadDim || h.NFFShExp <= 0 {
		return fmt.Errorf("%w: qwen35moe preset %q has a zero or inconsistent hybrid geometry", gen.ErrBadOptions, p.Name)
	}
	return nil
}

// isRecurrent reports whether layer il of preset p is a delta-net layer
// (llama.cpp's default is_recr).
func isRecurrent(p *gen.Preset, il int) bool { return (il+1)%p.Hybrid.AttnInterval != 0 }

// Metadata implements gen.Family.
func (Family) Metadata(p *gen.Preset) []gen.MetaKV {
	h := &p.Hybrid
	u32 := func(x int) uint32 { return uint32(x) }
	sec := make([]int32, 4)
	for i, s := range h.Sections {
		sec[i] = int32(s)
	}
	return append(gen.AttentionMoEMeta(p), []gen.MetaKV{
		{Key: "expert_feed_forward_length", Value: u32(p.NFFExp)},
		{Key: "expert_shared_feed_forward_length", Value: u32(h.NFFShExp)},
		{Key: "rope.dimension_count", Value: u32(h.NRot)},
		{Key: "rope.dimension_sections", Value: sec},
		{Key: "ssm.conv_kernel", Value: u32(h.ConvKernel)},
		{Key: "ssm.state_size", Value: u32(h.StateSize)},
		{Key: "ssm.group_count", Value: u32(h.KeyHeads)},
		{Key: "ssm.time_step_rank", Value: u32(h.ValueHeads)},
		{Key: "ssm.inner_size", Value: u32(h.StateSize * h.ValueHeads)},
		{Key: "full_attention_interval", Value: u32(h.AttnInterval)},
	}...)
}

// Tensors implements gen.Family: llama_model_qwen35moe::load_arch_tensors
// (separate Q/K/V on attention layers, separate expert gate and up).
func (Family) Tensors(p *gen.Preset, vocab int) []gen.TensorSpec {
	ts := gen.HeadTensors(p, vocab)
	for il := 0; il < p.NLayer; il++ {
		ts = append(ts, blockTensors(p, il)...)
	}
	return ts
}

// blockTensors is block il: norms, the routed and shared experts, then
// the gated attention or the delta-net.
func blockTensors(p *gen.Preset, il int) []gen.TensorSpec {
	E, hd, h := p.NEmbd, p.HeadDim, &p.Hybrid
	keyDim, valDim := h.StateSize*h.KeyHeads, h.StateSize*h.ValueHeads
	t := func(name string, role gen.Role, dims ...int) gen.TensorSpec {
		return gen.TensorSpec{Name: gen.Blk(il, name), Layer: il, Dims: gen.Dims(dims...), Role: role}
	}
	ts := []gen.TensorSpec{
		t("attn_norm.weight", gen.RoleNorm, E),
		t("post_attention_norm.weight", gen.RoleNorm, E),
		t("ffn_gate_inp.weight", gen.RoleRouter, E, p.NExpert),
		t("ffn_gate_exps.weight", gen.RoleExpert, E, p.NFFExp, p.NExpert),
		t("ffn_up_exps.weight", gen.RoleExpert, E, p.NFFExp, p.NExpert),
		t("ffn_down_exps.weight", gen.RoleExpertOut, p.NFFExp, E, p.NExpert),
		t("ffn_gate_inp_shexp.weight", gen.RoleProj, E),
		t("ffn_gate_shexp.weight", gen.RoleExpert, E, h.NFFShExp),
		t("ffn_up_shexp.weight", gen.RoleExpert, E, h.NFFShExp),
		t("ffn_down_shexp.weight", gen.RoleExpertOut, h.NFFShExp, E),
	}
	if !isRecurrent(p, il) {
		return append(ts,
			t("attn_q.weight", gen.RoleProj, E, 2*hd*p.NHead),
			t("attn_k.weight", gen.RoleProj, E, hd*p.NHeadKV),
			t("attn_v.weight", gen.RoleProj, E, hd*p.NHeadKV),
			t("attn_output.weight", gen.RoleProjOut, hd*p.NHead, E),
			t("attn_q_norm.weight", gen.RoleNorm, hd),
			t("attn_k_norm.weight", gen.RoleNorm, hd))
	}
	return append(ts,
		t("attn_qkv.weight", gen.RoleProj, E, 2*keyDim+valDim),
		t("attn_gate.weight", gen.RoleProj, E, valDim),
		t("ssm_conv1d.weight", gen.RoleConv, h.ConvKernel, 2*keyDim+valDim),
		t("ssm_dt.bias", gen.RoleBias, h.ValueHeads),
		t("ssm_a", gen.RoleSSMA, h.ValueHeads),
		t("ssm_beta.weight", gen.RoleProj, E, h.ValueHeads),
		t("ssm_alpha.weight", gen.RoleProj, E, h.ValueHeads),
		t("ssm_norm.weight", gen.RoleNorm, h.StateSize),
		t("ssm_out.weight", gen.RoleProjOut, valDim, E))
}

// Vocab implements gen.Family.
func (Family) Vocab() gen.VocabSpec { return gen.ChatMLVocab() }
