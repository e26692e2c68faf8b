package qwen2moe

// gen.go: the generator side of the qwen2moe family (gen.Family): its
// `pipe gen` presets, tensor list and metadata, as llama.cpp's
// LLM_ARCH_QWEN2MOE loader and converter have them.

import (
	"fmt"

	"github.com/pipe-engine/pipe/model/gen"
)

// Presets implements gen.Family.
func (Family) Presets() []gen.Preset {
	return []gen.Preset{
		{
			Name: "qwen1.5-moe-a2.7b", Arch: "qwen2moe", ModelName: "Qwen1.5-MoE-A2.7B (synthetic)",
			Description: "Qwen/Qwen1.5-MoE-A2.7B config.json",
			NLayer:      24, NEmbd: 2048, NHead: 16, NHeadKV: 16, HeadDim: 128,
			NExpert: 60, NExpertUsed: 4, NFFExp: 1408, NFFShExp: 5632, NFF: 5632, NCtxTrain: 8192,
			RopeBase: 1e6, RMSEps: 1e-6, Vocab: 151936, DefaultQuant: "Q4_K_M",
		},
		{
			Name: "qwen2moe-tiny", Arch: "qwen2moe", ModelName: "tiny-random-qwen2moe",
			Description: "qwen1.5-moe-a2.7b scaled down (with GQA, as Qwen2-57B-A14B)",
			NLayer:      3, NEmbd: 256, NHead: 4, NHeadKV: 2, HeadDim: 64,
			NExpert: 8, NExpertUsed: 2, NFFExp: 128, NFFShExp: 256, NFF: 512, NCtxTrain: 512,
			RopeBase: 1e6, RMSEps: 1e-6, Vocab: 482, DefaultQuant: "Q4_K_M",
		},
	}
}

// CheckPreset implements gen.Family: llama.cpp's attn_output is n_embd ×
// n_embd, and every layer has a shared expert.
func (Family) CheckPreset(p *gen.Preset) error {
	if p.NHead*p.HeadDim != p.NEmbd {
		return fmt.Errorf("%w: qwen2moe preset %q: heads × head_dim must be n_embd (llama.cpp's attn_output is n_embd × n_embd)", gen.ErrBadOptions, p.Name)
	}
	if p.NFFShExp <= 0 {
		return fmt.Errorf("%w: qwen2moe preset %q needs NFFShExp", gen.ErrBadOptions, p.Name)
	}
	return nil
}

// Tensors implements gen.Family: the routed blocks with q/k/v biases and
// a shared expert with its sigmoid gate row.
func (Family) Tensors(p *gen.Preset, vocab int) []gen.TensorSpec {
	E, hd, sh := p.NEmbd, p.HeadDim, p.NFFShExp
	ts := gen.HeadTensors(p, vocab)
	for il := 0; il < p.NLayer; il++ {
		t := func(name string, role gen.Role, dims ...int) gen.TensorSpec {
			return gen.TensorSpec{Name: gen.Blk(il, name), Layer: il, Dims: gen.Dims(dims...), Role: role}
		}
		ts = append(ts, gen.RoutedBlock(p, il)...)
		ts = append(ts,
			t("attn_q.bias", gen.RoleBias, hd*p.NHead),
			t("attn_k.bias", gen.RoleBias, hd*p.NHeadKV),
			t("attn_v.bias", gen.RoleBias, hd*p.NHeadKV),
			t("ffn_gate_inp_shexp.weight", gen.RoleProj, E),
			t("ffn_gate_shexp.weight", gen.RoleProj, E, sh),
			t("ffn_up_shexp.weight", gen.RoleProj, E, sh),
			t("ffn_down_shexp.weight", gen.RoleProjOut, sh, E),
		)
	}
	return ts
}

// Metadata implements gen.Family: the plain attention and expert keys and
// the routed and shared experts' widths.
func (Family) Metadata(p *gen.Preset) []gen.MetaKV {
	return append(gen.AttentionMoEMeta(p),
		gen.MetaKV{Key: "expert_feed_forward_length", Value: uint32(p.NFFExp)},
		gen.MetaKV{Key: "expert_shared_feed_forward_length", Value: uint32(p.NFFShExp)})
}

// Vocab implements gen.Family.
func (Family) Vocab() gen.VocabSpec { return gen.ChatMLVocab() }
