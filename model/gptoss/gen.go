package gptoss

// gen.go: the generator side of the gpt-oss family (gen.Family): its `pipe
// gen` presets, llama.cpp's LLM_ARCH_OPENAI_MOE tensors and metadata, and
// the o200k-style specials of its tokenizer.

import (
	"github.com/pipe-engine/pipe/model/gen"
)

// Presets implements gen.Family. The residual stream has no anchor
// dimensions: the router bias carries the experts' popularity.
func (Family) Presets() []gen.Preset {
	return []gen.Preset{
		{
			Name: "gpt-oss-20b", Arch: "gpt-oss", ModelName: "gpt-oss-20b (synthetic)",
			Description: "openai/gpt-oss-20b config.json",
			NLayer:      24, NEmbd: 2880, NHead: 64, NHeadKV: 8, HeadDim: 64,
			NExpert: 32, NExpertUsed: 4, NFFExp: 2880, NFF: 2880, NCtxTrain: 131072,
			RopeBase: 150000, RMSEps: 1e-5, Vocab: 201088, DefaultQuant: "MXFP4_MOE",
			SlidingWindow: 128, YarnFactor: 32, YarnOrigCtx: 4096, NoAnchors: true,
		},
		{
			Name: "gpt-oss-120b", Arch: "gpt-oss", ModelName: "gpt-oss-120b (synthetic)",
			Description: "openai/gpt-oss-120b config.json",
			NLayer:      36, NEmbd: 2880, NHead: 64, NHeadKV: 8, HeadDim: 64,
			NExpert: 128, NExpertUsed: 4, NFFExp: 2880, NFF: 2880, NCtxTrain: 131072,
			RopeBase: 150000, RMSEps: 1e-5, Vocab: 201088, DefaultQuant: "MXFP4_MOE",
			SlidingWindow: 128, YarnFactor: 32, YarnOrigCtx: 4096, NoAnchors: true,
		},
		{
			Name: "gptoss-tiny", Arch: "gpt-oss", ModelName: "tiny-random-gpt-oss",
			Description: "testdata/golden/models/tiny-gptoss (llama.cpp golden model)",
			NLayer:      4, NEmbd: 256, NHead: 4, NHeadKV: 2, HeadDim: 64,
			NExpert: 8, NExpertUsed: 4, NFFExp: 256, NFF: 256, NCtxTrain: 131072,
			RopeBase: 150000, RMSEps: 1e-5, Vocab: 487, DefaultQuant: "MXFP4_MOE",
			SlidingWindow: 16, YarnFactor: 32, YarnOrigCtx: 4096, NoAnchors: true,
		},
	}
}

// CheckPreset implements gen.Family: the common checks suffice.
func (Family) CheckPreset(*gen.Preset) error { return nil }

// Tensors implements gen.Family: biased attention with sinks, a biased
// router and biased experts.
func (Family) Tensors(p *gen.Preset, vocab int) []gen.TensorSpec {
	E, hd, nx, ff := p.NEmbd, p.HeadDim, p.NExpert, p.NFFExp
	ts := gen.HeadTensors(p, vocab)
	for il := 0; il < p.NLayer; il++ {
		t := func(name string, role gen.Role, dims ...int) gen.TensorSpec {
			return gen.TensorSpec{Name: gen.Blk(il, name), Layer: il, Dims: gen.Dims(dims...), Role: role}
		}
		ts = append(ts,
			t("attn_norm.weight", gen.RoleNorm, E),
			t("attn_q.weight", gen.RoleProj, E, hd*p.NHead),
			t("attn_k.weight", gen.RoleProj, E, hd*p.NHeadKV),
			t("attn_v.weight", gen.RoleProj, E, hd*p.NHeadKV),
			t("attn_output.weight", gen.RoleProjOut, hd*p.NHead, E),
			t("attn_q.bias", gen.RoleBias, hd*p.NHead),
			t("attn_k.bias", gen.RoleBias, hd*p.NHeadKV),
			t("attn_v.bias", gen.RoleBias, hd*p.NHeadKV),
			t("attn_output.bias", gen.RoleBias, E),
			t("attn_sinks.weight", gen.RoleSink, p.NHead),
			t("post_attention_norm.weight", gen.RoleNorm, E),
			t("ffn_gate_inp.weight", gen.RoleRouter, E, nx),
			t("ffn_gate_inp.bias", gen.RoleBias, nx),
			t("ffn_gate_exps.weight", gen.RoleExpert, E, ff, nx),
			t("ffn_up_exps.weight", gen.RoleExpert, E, ff, nx),
			t("ffn_down_exps.weight", gen.RoleExpertOut, ff, E, nx),
			t("ffn_gate_exps.bias", gen.RoleBias, ff, nx),
			t("ffn_up_exps.bias", gen.RoleBias, ff, nx),
			t("ffn_down_exps.bias", gen.RoleBias, E, nx),
		)
	}
	return ts
}

// Metadata implements gen.Family: the plain attention and expert keys, the
// sliding window and YaRN.
func (Family) Metadata(p *gen.Preset) []gen.MetaKV {
	u32 := func(x int) uint32 { return uint32(x) }
	return append(gen.AttentionMoEMeta(p),
		gen.MetaKV{Key: "expert_feed_forward_length", Value: u32(p.NFFExp)},
		gen.MetaKV{Key: "attention.sliding_window", Value: u32(p.SlidingWindow)},
		gen.MetaKV{Key: "rope.scaling.type", Value: "yarn"},
		gen.MetaKV{Key: "rope.scaling.factor", Value: p.YarnFactor},
		gen.MetaKV{Key: "rope.scaling.original_context_length", Value: u32(p.YarnOrigCtx)})
}

// Vocab implements gen.Family: the harmony specials (<|start|> bos,
// <|return|> eos) with the gpt-4o pre-tokenizer; the chat template stays
// ChatML (pipe renders harmony from the specials).
func (Family) Vocab() gen.VocabSpec {
	v := gen.ChatMLVocab()
	v.Specials = []string{"<|endoftext|>", "<|start|>", "<|end|>", "<|message|>", "<|channel|>", "<|return|>", "<|im_start|>", "<|im_end|>"}
	v.BOS, v.EOS, v.Pad = 1, 5, 0
	v.Pre = "gpt-4o"
	return v
}
