package lfm2moe

// gen.go: the generator side of the lfm2moe family (gen.Family): its `pipe
// gen` presets and llama.cpp's LLM_ARCH_LFM2MOE hyper-parameters and
// tensors: short-convolution layers beside attention layers
// (attention.head_count_kv 0 marks a convolution layer), dense leading
// layers, sigmoid routing with a selection bias, tied output.

import (
	"fmt"
	"slices"

	"github.com/pipe-engine/pipe/model/gen"
)

// Presets implements gen.Family.
func (Family) Presets() []gen.Preset {
	return []gen.Preset{
		{
			Name: "lfm2-8b-a1b", Arch: "lfm2moe", ModelName: "LFM2-8B-A1B (synthetic)",
			Description: "LiquidAI/LFM2-8B-A1B config.json; llama.cpp src/models/lfm2moe.cpp",
			NLayer:      24, NEmbd: 2048, NHead: 32, NHeadKV: 8, HeadDim: 64,
			NExpert: 32, NExpertUsed: 4, NFFExp: 1792, NFF: 7168, NCtxTrain: 128000,
			RopeBase: 1e6, RMSEps: 1e-5, Vocab: 65536, DefaultQuant: "Q4_K_M",
			LeadingDense: 2, GatingFunc: 2,
			Hybrid: gen.HybridGeom{AttnLayers: []int{2, 6, 10, 14, 18, 21}, ConvKernel: 3},
		},
		{
			// a dense leading conv layer, then attention, conv, attention
			Name: "lfm2moe-tiny", Arch: "lfm2moe", ModelName: "tiny-random-lfm2moe",
			Description: "lfm2-8b-a1b scaled down",
			NLayer:      4, NEmbd: 256, NHead: 4, NHeadKV: 2, HeadDim: 64,
			NExpert: 8, NExpertUsed: 2, NFFExp: 128, NFF: 256, NCtxTrain: 4096,
			RopeBase: 1e6, RMSEps: 1e-5, Vocab: 512, DefaultQuant: "Q4_K_M",
			LeadingDense: 1, GatingFunc: 2,
			Hybrid: gen.HybridGeom{AttnLayers: []int{1, 3}, ConvKernel: 3, OwnOutput: true},
		},
	}
}

// CheckPreset implements gen.Family.
func (Family) CheckPreset(p *gen.Preset) error {
	if p.Hybrid.ConvKernel < 2 || p.GatingFunc != 2 || p.NFF <= 0 {
		return fmt.Errorf("%w: lfm2moe preset %q needs shortconv taps ≥ 2, sigmoid gating and a dense FFN width", gen.ErrBadOptions, p.Name)
	}
	return nil
}

// isConvLayer reports whether layer il of preset p is a short-convolution
// layer (not in Hybrid.AttnLayers).
func isConvLayer(p *gen.Preset, il int) bool { return !slices.Contains(p.Hybrid.AttnLayers, il) }

// Metadata implements gen.Family.
func (Family) Metadata(p *gen.Preset) []gen.MetaKV {
	u32 := func(x int) uint32 { return uint32(x) }
	kv := make([]uint32, p.NLayer)
	for il := range kv {
		if !isConvLayer(p, il) {
			kv[il] = u32(p.NHeadKV)
		}
	}
	return []gen.MetaKV{
		{Key: "attention.head_count_kv", Value: kv},
		{Key: "rope.freq_base", Value: p.RopeBase},
		{Key: "attention.layer_norm_rms_epsilon", Value: p.RMSEps},
		{Key: "shortconv.l_cache", Value: u32(p.Hybrid.ConvKernel)},
		{Key: "expert_count", Value: u32(p.NExpert)},
		{Key: "expert_used_count", Value: u32(p.NExpertUsed)},
		{Key: "expert_feed_forward_length", Value: u32(p.NFFExp)},
		{Key: "leading_dense_block_count", Value: u32(p.LeadingDense)},
		{Key: "expert_gating_func", Value: u32(p.GatingFunc)},
	}
}

// Tensors implements gen.Family: llama_model_lfm2moe::load_arch_tensors
// (tied output unless Hybrid.OwnOutput).
func (Family) Tensors(p *gen.Preset, vocab int) []gen.TensorSpec {
	E := p.NEmbd
	ts := []gen.TensorSpec{
		{Name: "token_embd.weight", Layer: -1, Dims: gen.Dims(E, vocab), Role: gen.RoleEmbed},
		{Name: "token_embd_norm.weight", Layer: -1, Dims: gen.Dims(E), Role: gen.RoleNorm},
	}
	if p.Hybrid.OwnOutput {
		ts = append(ts, gen.TensorSpec{Name: "output.weight", Layer: -1, Dims: gen.Dims(E, vocab), Role: gen.RoleOutput})
	}
	for il := 0; il < p.NLayer; il++ {
		ts = append(ts, blockTensors(p, il)...)
	}
	return ts
}

// blockTensors is block il: norms, the dense or routed FFN, then the
// short convolution or the attention.
func blockTensors(p *gen.Preset, il int) []gen.TensorSpec {
	E, hd := p.NEmbd, p.HeadDim
	t := func(name string, role gen.Role, dims ...int) gen.TensorSpec {
		return gen.TensorSpec{Name: gen.Blk(il, name), Layer: il, Dims: gen.Dims(dims...), Role: role}
	}
	ts := []gen.TensorSpec{t("ffn_norm.weight", gen.RoleNorm, E), t("attn_norm.weight", gen.RoleNorm, E)}
	if il < p.LeadingDense {
		ts = append(ts,
			t("ffn_gate.weight", gen.RoleProj, E, p.NFF),
			t("ffn_up.weight", gen.RoleProj, E, p.NFF),
			t("ffn_down.weight", gen.RoleProjOut, p.NFF, E))
	} else {
		ts = append(ts,
			t("ffn_gate_inp.weight", gen.RoleRouter, E, p.NExpert),
			t("ffn_gate_exps.weight", gen.RoleExpert, E, p.NFFExp, p.NExpert),
			t("ffn_up_exps.weight", gen.RoleExpert, E, p.NFFExp, p.NExpert),
			t("ffn_down_exps.weight", gen.RoleExpertOut, p.NFFExp, E, p.NExpert),
			t("exp_probs_b.bias", gen.RoleBias, p.NExpert))
	}
	if isConvLayer(p, il) {
		return append(ts,
			t("shortconv.conv.weight", gen.RoleConv, p.Hybrid.ConvKernel, E),
			t("shortconv.in_proj.weight", gen.RoleProj, E, 3*E),
			t("shortconv.out_proj.weight", gen.RoleProjOut, E, E))
	}
	return append(ts,
		t("attn_q_norm.weight", gen.RoleNorm, hd),
		t("attn_k_norm.weight", gen.RoleNorm, hd),
		t("attn_q.weight", gen.RoleProj, E, hd*p.NHead),
		t("attn_k.weight", gen.RoleProj, E, hd*p.NHeadKV),
		t("attn_v.weight", gen.RoleProj, E, hd*p.NHeadKV),
		t("attn_output.weight", gen.RoleProjOut, hd*p.NHead, E))
}

// Vocab implements gen.Family.
func (Family) Vocab() gen.VocabSpec { return gen.ChatMLVocab() }
