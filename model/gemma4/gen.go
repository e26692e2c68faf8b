package gemma4

// gen.go: the generator side of the gemma4 family (gen.Family): its `pipe
// gen` presets and llama.cpp's LLM_ARCH_GEMMA4 hyper-parameters and
// tensors for the MoE variant (shared dense FFN beside fused gate+up
// routed experts, tied output, one rope_freqs tensor shared by the
// full-attention layers).

import (
	"fmt"

	"github.com/pipe-engine/pipe/model/gen"
)

// Presets implements gen.Family.
func (Family) Presets() []gen.Preset {
	return []gen.Preset{
		{
			// Expert shapes checked against the real Q4_K_M file's per-expert bytes
			// in traces/gemma.route.csv (4,336,640 and 3,593,216 = gate_up Q4_K +
			// down Q8_0/Q5_0 at n_embd 2816, n_ff_exp 704).
			Name: "gemma4-26b-a4b", Arch: "gemma4", ModelName: "Gemma-4-26B-A4B (synthetic)",
			Description: "google/gemma-4-26B-A4B config.json; llama.cpp src/models/gemma4.cpp",
			NLayer:      30, NEmbd: 2816, NHead: 16, NHeadKV: 8, HeadDim: 256,
			NExpert: 128, NExpertUsed: 8, NFFExp: 704, NFF: 2112, NCtxTrain: 262144,
			RopeBase: 1e6, RMSEps: 1e-6, Vocab: 262144, DefaultQuant: "Q4_K_M",
			SlidingWindow: 1024, SWAPeriod: 6, NHeadKVFull: 2, HeadDimFull: 512,
			RopeBaseSWA: 10000, FinalSoftcap: 30, KEqV: true, ScaledEmbed: true, RopePartialFull: 0.25,
		},
		{
			Name: "gemma4-tiny", Arch: "gemma4", ModelName: "tiny-random-gemma4",
			Description: "gemma4-26b-a4b scaled down",
			NLayer:      6, NEmbd: 256, NHead: 4, NHeadKV: 2, HeadDim: 64,
			NExpert: 8, NExpertUsed: 2, NFFExp: 256, NFF: 512, NCtxTrain: 4096,
			RopeBase: 1e6, RMSEps: 1e-6, Vocab: 512, DefaultQuant: "Q4_K_M",
			SlidingWindow: 16, SWAPeriod: 3, NHeadKVFull: 1, HeadDimFull: 128,
			RopeBaseSWA: 10000, FinalSoftcap: 30, KEqV: true, ScaledEmbed: true,
		},
	}
}

// CheckPreset implements gen.Family.
func (Family) CheckPreset(p *gen.Preset) error {
	if p.SWAPeriod <= 0 || p.HeadDimFull <= 0 || p.NHeadKVFull <= 0 {
		return fmt.Errorf("%w: gemma4 preset %q needs SWAPeriod, HeadDimFull, NHeadKVFull", gen.ErrBadOptions, p.Name)
	}
	return nil
}

// isSWA reports whether layer il uses sliding-window attention: all but
// every SWAPeriod-th.
func isSWA(p *gen.Preset, il int) bool { return il%p.SWAPeriod != p.SWAPeriod-1 }

// Metadata implements gen.Family.
func (Family) Metadata(p *gen.Preset) []gen.MetaKV {
	u32 := func(x int) uint32 { return uint32(x) }
	kv := make([]uint32, p.NLayer)
	swa := make([]bool, p.NLayer)
	for il := range kv {
		swa[il] = isSWA(p, il)
		kv[il] = u32(p.NHeadKV)
		if !swa[il] {
			kv[il] = u32(p.NHeadKVFull)
		}
	}
	return []gen.MetaKV{
		{Key: "attention.head_count_kv", Value: kv},
		{Key: "rope.freq_base", Value: p.RopeBase},
		{Key: "rope.freq_base_swa", Value: p.RopeBaseSWA},
		{Key: "attention.layer_norm_rms_epsilon", Value: p.RMSEps},
		{Key: "expert_count", Value: u32(p.NExpert)},
		{Key: "expert_used_count", Value: u32(p.NExpertUsed)},
		{Key: "attention.key_length", Value: u32(p.HeadDimFull)},
		{Key: "attention.value_length", Value: u32(p.HeadDimFull)},
		{Key: "attention.key_length_swa", Value: u32(p.HeadDim)},
		{Key: "attention.value_length_swa", Value: u32(p.HeadDim)},
		{Key: "expert_feed_forward_length", Value: u32(p.NFFExp)},
		{Key: "attention.sliding_window", Value: u32(p.SlidingWindow)},
		{Key: "attention.sliding_window_pattern", Value: swa},
		{Key: "attention.shared_kv_layers", Value: uint32(0)},
		{Key: "embedding_length_per_layer_input", Value: uint32(0)},
		{Key: "final_logit_softcapping", Value: p.FinalSoftcap},
		// as llama.cpp's converter: the full layers rotate their whole
		// head (rope_freqs stops the unrotated pairs), the sliding ones
		// theirs; without these llama.cpp rotates 128 dims of a 64-dim
		// sliding head and aborts
		{Key: "rope.dimension_count", Value: u32(p.HeadDimFull)},
		{Key: "rope.dimension_count_swa", Value: u32(p.HeadDim)},
	}
}

// Tensors implements gen.Family.
func (Family) Tensors(p *gen.Preset, vocab int) []gen.TensorSpec {
	E := p.NEmbd
	ts := []gen.TensorSpec{
		{Name: "token_embd.weight", Layer: -1, Dims: gen.Dims(E, vocab), Role: gen.RoleEmbed},
		{Name: "output_norm.weight", Layer: -1, Dims: gen.Dims(E), Role: gen.RoleNorm},
		{Name: "rope_freqs.weight", Layer: -1, Dims: gen.Dims(p.HeadDimFull / 2), Role: gen.RoleRopeFreqs},
	}
	for il := 0; il < p.NLayer; il++ {
		ts = append(ts, blockTensors(p, il)...)
	}
	return ts
}

// blockTensors is block il: the attention of its kind (no attn_v on a
// full layer with KEqV), the shared dense FFN and the routed experts with
// their norms and scales.
func blockTensors(p *gen.Preset, il int) []gen.TensorSpec {
	E := p.NEmbd
	hd, nkv := p.HeadDim, p.NHeadKV
	swa := isSWA(p, il)
	if !swa {
		hd, nkv = p.HeadDimFull, p.NHeadKVFull
	}
	t := func(name string, role gen.Role, dims ...int) gen.TensorSpec {
		return gen.TensorSpec{Name: gen.Blk(il, name), Layer: il, Dims: gen.Dims(dims...), Role: role}
	}
	ts := []gen.TensorSpec{
		t("attn_norm.weight", gen.RoleNorm, E),
		t("attn_q.weight", gen.RoleProj, E, hd*p.NHead),
		t("attn_k.weight", gen.RoleProj, E, hd*nkv),
		t("attn_output.weight", gen.RoleProjOut, hd*p.NHead, E),
		t("attn_q_norm.weight", gen.RoleNorm, hd),
		t("attn_k_norm.weight", gen.RoleNorm, hd),
		t("post_attention_norm.weight", gen.RoleNorm, E),
		t("layer_output_scale.weight", gen.RoleScale, 1),
		t("ffn_norm.weight", gen.RoleNorm, E),
		t("ffn_gate.weight", gen.RoleProj, E, p.NFF),
		t("ffn_up.weight", gen.RoleProj, E, p.NFF),
		t("ffn_down.weight", gen.RoleProjOut, p.NFF, E),
		t("post_ffw_norm.weight", gen.RoleNorm, E),
		t("ffn_gate_inp.weight", gen.RoleRouter, E, p.NExpert),
		t("ffn_gate_inp.scale", gen.RoleScale, E),
		t("pre_ffw_norm_2.weight", gen.RoleNorm, E),
		t("post_ffw_norm_1.weight", gen.RoleNorm, E),
		t("post_ffw_norm_2.weight", gen.RoleNorm, E),
		t("ffn_gate_up_exps.weight", gen.RoleExpert, E, 2*p.NFFExp, p.NExpert),
		t("ffn_down_exps.weight", gen.RoleExpertOut, p.NFFExp, E, p.NExpert),
		t("ffn_down_exps.scale", gen.RoleScale, p.NExpert),
	}
	if swa || !p.KEqV {
		ts = append(ts, t("attn_v.weight", gen.RoleProj, E, hd*nkv))
	}
	return ts
}

// Vocab implements gen.Family.
func (Family) Vocab() gen.VocabSpec { return gen.ChatMLVocab() }
