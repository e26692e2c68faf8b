package olmoe

// gen.go: the generator side of the olmoe family (gen.Family): its `pipe
// gen` presets, tensor list and metadata, as llama.cpp's LLM_ARCH_OLMOE
// loader and converter have them.

import (
	"fmt"

	"github.com/pipe-engine/pipe/model/gen"
)

// Presets implements gen.Family.
func (Family) Presets() []gen.Preset {
	return []gen.Preset{
		{
			Name: "olmoe-1b-7b", Arch: "olmoe", ModelName: "OLMoE-1B-7B (synthetic)",
			Description: "allenai/OLMoE-1B-7B-0924 config.json",
			NLayer:      16, NEmbd: 2048, NHead: 16, NHeadKV: 16, HeadDim: 128,
			NExpert: 64, NExpertUsed: 8, NFFExp: 1024, NFF: 1024, NCtxTrain: 4096,
			RopeBase: 10000, RMSEps: 1e-5, Vocab: 50304, DefaultQuant: "Q4_K_M",
		},
		{
			Name: "olmoe-tiny", Arch: "olmoe", ModelName: "tiny-random-olmoe",
			Description: "olmoe-1b-7b scaled down",
			NLayer:      3, NEmbd: 256, NHead: 4, NHeadKV: 4, HeadDim: 64,
			NExpert: 8, NExpertUsed: 2, NFFExp: 128, NFF: 128, NCtxTrain: 512,
			RopeBase: 10000, RMSEps: 1e-5, Vocab: 482, DefaultQuant: "Q4_K_M",
		},
	}
}

// CheckPreset implements gen.Family: llama.cpp's attn_output and q/k
// norms are n_embd wide, and the experts feed_forward_length wide.
func (Family) CheckPreset(p *gen.Preset) error {
	if p.NHead*p.HeadDim != p.NEmbd {
		return fmt.Errorf("%w: olmoe preset %q: heads × head_dim must be n_embd (llama.cpp's attn_output is n_embd × n_embd)", gen.ErrBadOptions, p.Name)
	}
	if p.NHeadKV != p.NHead || p.NFF != p.NFFExp {
		return fmt.Errorf("%w: olmoe preset %q needs NHeadKV = NHead (n_embd-wide k norm) and NFF = NFFExp (the experts' width)", gen.ErrBadOptions, p.Name)
	}
	return nil
}

// Tensors implements gen.Family: the routed blocks with n_embd-wide q/k
// norms over the whole projection.
func (Family) Tensors(p *gen.Preset, vocab int) []gen.TensorSpec {
	hd := p.HeadDim
	ts := gen.HeadTensors(p, vocab)
	for il := 0; il < p.NLayer; il++ {
		ts = append(ts, gen.RoutedBlock(p, il)...)
		ts = append(ts,
			gen.TensorSpec{Name: gen.Blk(il, "attn_q_norm.weight"), Layer: il, Dims: gen.Dims(hd * p.NHead), Role: gen.RoleNorm},
			gen.TensorSpec{Name: gen.Blk(il, "attn_k_norm.weight"), Layer: il, Dims: gen.Dims(hd * p.NHeadKV), Role: gen.RoleNorm},
		)
	}
	return ts
}

// Metadata implements gen.Family: the plain attention and expert keys;
// no expert_feed_forward_length (olmoe's experts are feed_forward_length
// wide).
func (Family) Metadata(p *gen.Preset) []gen.MetaKV { return gen.AttentionMoEMeta(p) }

// Vocab implements gen.Family.
func (Family) Vocab() gen.VocabSpec { return gen.ChatMLVocab() }
