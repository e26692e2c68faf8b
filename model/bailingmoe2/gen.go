package bailingmoe2

// gen.go: the generator side of the bailingmoe2 family (gen.Family): its
// `pipe gen` presets and llama.cpp's LLM_ARCH_BAILINGMOE2 hyper-parameters
// and tensors (llama.cpp's conversion/bailingmoe.py, BailingMoeV2Model, and
// src/models/bailingmoe2.cpp's loader): fused attn_qkv with q/k norms,
// dense leading layers, then routed experts with a selection bias and
// shared experts.

import (
	"fmt"

	"github.com/pipe-engine/pipe/model/gen"
)

// Presets implements gen.Family.
//
// ling-flash-2.0 is inclusionAI/Ling-flash-2.0's shape. Its Hugging Face
// model record (revision 649f8b9) counts 102,889,697,280 BF16 and 7,936
// F32 parameters: exactly hidden_size 4096, 32 layers (the first dense,
// intermediate_size 9216), 32 heads and 4 KV heads of head_dim 128 over a
// fused QKV, 256 experts of moe_intermediate_size 1024 plus one shared
// expert of 1024, a 157,184-token vocabulary with an untied head, and one
// F32 expert bias of 256 per MoE layer (31 × 256) — no NextN layer. From
// the Ling 2.0 model card and the BailingMoeV2 config: 8 experts per
// token, sigmoid scores with the expert bias, top-4 of 8 groups,
// normalised top-k weights scaled by 2.5, half RoPE (partial_rotary_factor
// 0.5: 64 of 128 dims), RMS eps 1e-6, 32,768 context. rope_theta 600000 is
// the BailingMoeV2 configuration's default; it is not in the counts above.
func (Family) Presets() []gen.Preset {
	return []gen.Preset{
		{
			Name: "ling-flash-2.0", Arch: "bailingmoe2", ModelName: "Ling-flash-2.0 (synthetic)",
			Tokenizer:   lingTokenizer(),
			Description: "inclusionAI/Ling-flash-2.0 (HF parameter counts, BailingMoeV2 config); llama.cpp src/models/bailingmoe2.cpp",
			NLayer:      32, NEmbd: 4096, NHead: 32, NHeadKV: 4, HeadDim: 128, NRot: 64,
			NExpert: 256, NExpertUsed: 8, NFFExp: 1024, NFF: 9216, NFFShExp: 1024, NCtxTrain: 32768,
			RopeBase: 600000, RMSEps: 1e-6, Vocab: 157184, DefaultQuant: "Q4_K_M",
			LeadingDense: 1, NShared: 1, GatingFunc: gatingSigmoid, WeightsNorm: true, WeightsScale: 2.5,
			ProbsBias: true, ExpertGroups: 8, ExpertGroupsUsed: 4,
		},
		{
			// Ling-flash-2.0's paths (dense first layer, half RoPE, sigmoid
			// gating with bias, 2 of 4 groups, scale 2.5, a shared expert)
			// at tiny widths
			Name: "bailingmoe2-tiny", Arch: "bailingmoe2", ModelName: "tiny-random-bailingmoe2",
			Description: "ling-flash-2.0 with tiny widths",
			NLayer:      4, NEmbd: 256, NHead: 4, NHeadKV: 2, HeadDim: 64, NRot: 32,
			NExpert: 16, NExpertUsed: 4, NFFExp: 128, NFF: 512, NFFShExp: 128, NCtxTrain: 1024,
			RopeBase: 600000, RMSEps: 1e-6, Vocab: 512, DefaultQuant: "Q4_K_M",
			LeadingDense: 1, NShared: 1, GatingFunc: gatingSigmoid, WeightsNorm: true, WeightsScale: 2.5,
			ProbsBias: true, ExpertGroups: 4, ExpertGroupsUsed: 2,
		},
	}
}

// CheckPreset implements gen.Family: the rotated dims, the leading dense
// layers and the expert groups.
func (Family) CheckPreset(p *gen.Preset) error {
	if p.NRot <= 0 || p.NRot%2 != 0 || p.NRot > p.HeadDim || p.LeadingDense > p.NLayer || p.NShared <= 0 ||
		(p.ExpertGroups > 1 && (p.NExpert%p.ExpertGroups != 0 || p.ExpertGroupsUsed <= 0 || p.ExpertGroupsUsed >= p.ExpertGroups)) {
		return fmt.Errorf("%w: bailingmoe2 preset %q needs an even NRot ≤ HeadDim, LeadingDense ≤ NLayer, NShared > 0 and consistent expert groups", gen.ErrBadOptions, p.Name)
	}
	return nil
}

// Metadata implements gen.Family: the converter's keys (BailingMoeV2Model
// after TextModel's).
func (Family) Metadata(p *gen.Preset) []gen.MetaKV {
	u32 := func(x int) uint32 { return uint32(x) }
	ps := gen.AttentionMoEMeta(p)
	if p.ExpertGroups > 1 {
		ps = append(ps,
			gen.MetaKV{Key: "expert_group_count", Value: u32(p.ExpertGroups)},
			gen.MetaKV{Key: "expert_group_used_count", Value: u32(p.ExpertGroupsUsed)})
	}
	return append(ps,
		gen.MetaKV{Key: "expert_gating_func", Value: u32(p.GatingFunc)},
		gen.MetaKV{Key: "rope.dimension_count", Value: u32(p.NRot)},
		gen.MetaKV{Key: "leading_dense_block_count", Value: u32(p.LeadingDense)},
		gen.MetaKV{Key: "expert_feed_forward_length", Value: u32(p.NFFExp)},
		gen.MetaKV{Key: "expert_shared_feed_forward_length", Value: u32(p.NFFShExp)},
		gen.MetaKV{Key: "expert_weights_scale", Value: p.WeightsScale},
		gen.MetaKV{Key: "expert_shared_count", Value: u32(p.NShared)},
		gen.MetaKV{Key: "expert_weights_norm", Value: p.WeightsNorm},
		gen.MetaKV{Key: "nextn_predict_layers", Value: uint32(0)},
	)
}

// Tensors implements gen.Family.
func (Family) Tensors(p *gen.Preset, vocab int) []gen.TensorSpec {
	ts := gen.HeadTensors(p, vocab)
	for il := 0; il < p.NLayer; il++ {
		ts = append(ts, blockTensors(p, il)...)
	}
	return ts
}

// blockTensors is block il: the fused-QKV attention with its q/k norms,
// then a dense FFN (the leading layers) or routed experts with their
// selection bias and the shared experts.
func blockTensors(p *gen.Preset, il int) []gen.TensorSpec {
	E, q, kv := p.NEmbd, p.NHead*p.HeadDim, p.NHeadKV*p.HeadDim
	t := func(name string, role gen.Role, dims ...int) gen.TensorSpec {
		return gen.TensorSpec{Name: gen.Blk(il, name), Layer: il, Dims: gen.Dims(dims...), Role: role}
	}
	ts := []gen.TensorSpec{
		t("attn_norm.weight", gen.RoleNorm, E),
		t("attn_qkv.weight", gen.RoleProj, E, q+2*kv),
		t("attn_q_norm.weight", gen.RoleNorm, p.HeadDim),
		t("attn_k_norm.weight", gen.RoleNorm, p.HeadDim),
		t("attn_output.weight", gen.RoleProjOut, q, E),
		t("ffn_norm.weight", gen.RoleNorm, E),
	}
	if il < p.LeadingDense {
		return append(ts,
			t("ffn_gate.weight", gen.RoleProj, E, p.NFF),
			t("ffn_up.weight", gen.RoleProj, E, p.NFF),
			t("ffn_down.weight", gen.RoleProjOut, p.NFF, E))
	}
	sh := p.NFFShExp * p.NShared
	ts = append(ts,
		t("ffn_gate_inp.weight", gen.RoleRouter, E, p.NExpert),
		t("ffn_gate_exps.weight", gen.RoleExpert, E, p.NFFExp, p.NExpert),
		t("ffn_up_exps.weight", gen.RoleExpert, E, p.NFFExp, p.NExpert),
		t("ffn_down_exps.weight", gen.RoleExpertOut, p.NFFExp, E, p.NExpert),
		t("ffn_gate_shexp.weight", gen.RoleProj, E, sh),
		t("ffn_up_shexp.weight", gen.RoleProj, E, sh),
		t("ffn_down_shexp.weight", gen.RoleProjOut, sh, E))
	if p.ProbsBias {
		ts = append(ts, t("exp_probs_b.bias", gen.RoleBias, p.NExpert))
	}
	return ts
}

// Vocab implements gen.Family: the ChatML tokenizer of the other families,
// which the tiny preset writes (ling-flash-2.0 writes Ling 2.0's own
// specials and template: chat.go).
func (Family) Vocab() gen.VocabSpec { return gen.ChatMLVocab() }
