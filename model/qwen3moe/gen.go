package qwen3moe

// gen.go: the generator side of the qwen3moe family (gen.Family): its `pipe
// gen` presets, tensor list and metadata, as llama.cpp's LLM_ARCH_QWEN3MOE
// loader and converter have them. Its presets carry the copy head
// (gen.Preset.CopyHead) that gives generated models the real Qwen3
// traces' token-to-token expert reuse.

import (
	"github.com/pipe-engine/pipe/model/gen"
)

// Presets implements gen.Family.
func (Family) Presets() []gen.Preset {
	return []gen.Preset{
		{
			Name: "qwen3-30b-a3b", Arch: "qwen3moe", ModelName: "Qwen3-30B-A3B (synthetic)",
			Description: "Qwen/Qwen3-30B-A3B config.json",
			NLayer:      48, NEmbd: 2048, NHead: 32, NHeadKV: 4, HeadDim: 128,
			NExpert: 128, NExpertUsed: 8, NFFExp: 768, NFF: 6144, NCtxTrain: 40960,
			RopeBase: 1e6, RMSEps: 1e-6, Vocab: 151936, DefaultQuant: "Q4_K_M", CopyHead: true,
		},
		{
			Name: "qwen3-235b-a22b", Arch: "qwen3moe", ModelName: "Qwen3-235B-A22B (synthetic)",
			Description: "Qwen/Qwen3-235B-A22B config.json",
			NLayer:      94, NEmbd: 4096, NHead: 64, NHeadKV: 4, HeadDim: 128,
			NExpert: 128, NExpertUsed: 8, NFFExp: 1536, NFF: 12288, NCtxTrain: 40960,
			RopeBase: 1e6, RMSEps: 1e-6, Vocab: 151936, DefaultQuant: "Q4_K_M", CopyHead: true,
		},
		{
			Name: "qwen3-tiny", Arch: "qwen3moe", ModelName: "tiny-random-qwen3moe",
			Description: "testdata/golden/models/tiny-qwen3moe (llama.cpp golden model)",
			NLayer:      4, NEmbd: 256, NHead: 4, NHeadKV: 2, HeadDim: 64,
			NExpert: 8, NExpertUsed: 2, NFFExp: 256, NFF: 512, NCtxTrain: 512,
			RopeBase: 1e6, RMSEps: 1e-6, Vocab: 482, DefaultQuant: "Q4_K_M", CopyHead: true,
		},
	}
}

// CheckPreset implements gen.Family: the common checks suffice.
func (Family) CheckPreset(*gen.Preset) error { return nil }

// Tensors implements gen.Family: the routed blocks with per-head q/k norms.
func (Family) Tensors(p *gen.Preset, vocab int) []gen.TensorSpec {
	ts := gen.HeadTensors(p, vocab)
	for il := 0; il < p.NLayer; il++ {
		ts = append(ts, gen.RoutedBlock(p, il)...)
		ts = append(ts,
			gen.TensorSpec{Name: gen.Blk(il, "attn_q_norm.weight"), Layer: il, Dims: gen.Dims(p.HeadDim), Role: gen.RoleNorm},
			gen.TensorSpec{Name: gen.Blk(il, "attn_k_norm.weight"), Layer: il, Dims: gen.Dims(p.HeadDim), Role: gen.RoleNorm},
		)
	}
	return ts
}

// Metadata implements gen.Family: the plain attention and expert keys and
// the experts' width.
func (Family) Metadata(p *gen.Preset) []gen.MetaKV {
	return append(gen.AttentionMoEMeta(p), gen.MetaKV{Key: "expert_feed_forward_length", Value: uint32(p.NFFExp)})
}

// Vocab implements gen.Family.
func (Family) Vocab() gen.VocabSpec { return gen.ChatMLVocab() }
