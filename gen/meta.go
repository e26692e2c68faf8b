package gen

import (
	"fmt"

	"github.com/pipe-engine/pipe/gguf"
)

type kvPair struct {
	k string
	v any
}

func makeKVs(ps []kvPair) ([]gguf.KV, error) {
	out := make([]gguf.KV, 0, len(ps))
	for _, p := range ps {
		val, err := gguf.NewValue(p.v)
		if err != nil {
			return nil, fmt.Errorf("gen: metadata key %s: %w", p.k, err)
		}
		out = append(out, gguf.KV{Key: p.k, Value: val})
	}
	return out, nil
}

// Metadata returns the model's KV pairs in the order llama.cpp's tools write
// them: general.*, the architecture's hyper-parameters, the tokenizer, pipe's
// generator parameters, then general.quantization_version and general.file_type
// (llama-quantize appends those two last).
func Metadata(pl *Plan, v *Vocab, o *Options) ([]gguf.KV, error) {
	p := &pl.Preset
	a := p.Arch + "."
	u32 := func(x int) uint32 { return uint32(x) }
	ps := []kvPair{
		{"general.architecture", p.Arch},
		{"general.name", p.ModelName},
		{"general.description", fmt.Sprintf("synthetic random weights written by pipe gen (preset %s, seed %d); shapes from %s; not a trained model", p.Name, o.Seed, p.Description)},
		{a + "block_count", u32(p.NLayer)},
		{a + "context_length", u32(p.NCtxTrain)},
		{a + "embedding_length", u32(p.NEmbd)},
		{a + "feed_forward_length", u32(p.NFF)},
		{a + "attention.head_count", u32(p.NHead)},
	}
	if f, ok := familyOf(p.Arch); ok {
		for _, kv := range f.Metadata(p) {
			ps = append(ps, kvPair{a + kv.Key, kv.Value})
		}
	} else {
		ps = append(ps, legacyMeta(p)...)
	}
	kvs, err := makeKVs(ps)
	if err != nil {
		return nil, err
	}
	kvs = append(kvs, v.KV...)
	tail, err := makeKVs([]kvPair{
		{"pipe.gen.preset", p.Name},
		{"pipe.gen.seed", o.Seed},
		{"pipe.gen.routing_skew", float32(o.RoutingSkew)},
		{"pipe.gen.anchor_dims", uint32(anchorDims(p))},
		{"general.quantization_version", uint32(2)},
		{"general.file_type", pl.FileType.ID},
	})
	if err != nil {
		return nil, err
	}
	return append(kvs, tail...), nil
}

// legacyMeta is the hyper-parameter keys of the architectures not yet
// moved onto Family.
func legacyMeta(p *Preset) []kvPair {
	a := p.Arch + "."
	u32 := func(x int) uint32 { return uint32(x) }
	var ps []kvPair
	switch p.Arch {
	case ArchGemma4:
		kv := make([]uint32, p.NLayer)
		swa := make([]bool, p.NLayer)
		for il := range kv {
			swa[il] = p.isSWA(il)
			kv[il] = u32(p.NHeadKV)
			if !swa[il] {
				kv[il] = u32(p.NHeadKVFull)
			}
		}
		ps = append(ps,
			kvPair{a + "attention.head_count_kv", kv},
			kvPair{a + "rope.freq_base", p.RopeBase},
			kvPair{a + "rope.freq_base_swa", p.RopeBaseSWA},
			kvPair{a + "attention.layer_norm_rms_epsilon", p.RMSEps},
			kvPair{a + "expert_count", u32(p.NExpert)},
			kvPair{a + "expert_used_count", u32(p.NExpertUsed)},
			kvPair{a + "attention.key_length", u32(p.HeadDimFull)},
			kvPair{a + "attention.value_length", u32(p.HeadDimFull)},
			kvPair{a + "attention.key_length_swa", u32(p.HeadDim)},
			kvPair{a + "attention.value_length_swa", u32(p.HeadDim)},
			kvPair{a + "expert_feed_forward_length", u32(p.NFFExp)},
			kvPair{a + "attention.sliding_window", u32(p.SlidingWindow)},
			kvPair{a + "attention.sliding_window_pattern", swa},
			kvPair{a + "attention.shared_kv_layers", uint32(0)},
			kvPair{a + "embedding_length_per_layer_input", uint32(0)},
			kvPair{a + "final_logit_softcapping", p.FinalSoftcap},
			// as llama.cpp's converter: the full layers rotate their whole
			// head (rope_freqs stops the unrotated pairs), the sliding ones
			// theirs; without these llama.cpp rotates 128 dims of a 64-dim
			// sliding head and aborts
			kvPair{a + "rope.dimension_count", u32(p.HeadDimFull)},
			kvPair{a + "rope.dimension_count_swa", u32(p.HeadDim)},
		)
	case ArchDeepSeek2:
		ps = append(ps, deepseek2Meta(p)...)
	default:
		ps = append(ps,
			kvPair{a + "attention.head_count_kv", u32(p.NHeadKV)},
			kvPair{a + "rope.freq_base", p.RopeBase},
			kvPair{a + "attention.layer_norm_rms_epsilon", p.RMSEps},
			kvPair{a + "expert_count", u32(p.NExpert)},
			kvPair{a + "expert_used_count", u32(p.NExpertUsed)},
			kvPair{a + "attention.key_length", u32(p.HeadDim)},
			kvPair{a + "attention.value_length", u32(p.HeadDim)},
		)
		ps = append(ps, kvPair{a + "expert_feed_forward_length", u32(p.NFFExp)})
	}
	return ps
}

// deepseek2Meta is llama.cpp's converter's deepseek2 hyper-parameters: the
// latent attention written as one KV head of the cached row
// (key_length = kv_lora_rank + n_rot, value_length = kv_lora_rank) with the
// per-head widths in the _mla keys.
func deepseek2Meta(p *Preset) []kvPair {
	a := p.Arch + "."
	u32 := func(x int) uint32 { return uint32(x) }
	ps := []kvPair{
		{a + "attention.head_count_kv", uint32(1)},
		{a + "rope.freq_base", p.RopeBase},
		{a + "attention.layer_norm_rms_epsilon", p.RMSEps},
		{a + "expert_used_count", u32(p.NExpertUsed)},
		{a + "leading_dense_block_count", u32(p.LeadingDense)},
	}
	if p.QLoraRank > 0 {
		ps = append(ps, kvPair{a + "attention.q_lora_rank", u32(p.QLoraRank)})
	}
	ps = append(ps,
		kvPair{a + "attention.kv_lora_rank", u32(p.KVLoraRank)},
		kvPair{a + "attention.key_length", u32(p.KVLoraRank + p.NRot)},
		kvPair{a + "attention.value_length", u32(p.KVLoraRank)},
		kvPair{a + "attention.key_length_mla", u32(p.NoPE + p.NRot)},
		kvPair{a + "attention.value_length_mla", u32(p.ValueLen)},
		kvPair{a + "expert_feed_forward_length", u32(p.NFFExp)},
		kvPair{a + "expert_count", u32(p.NExpert)},
		kvPair{a + "expert_shared_count", u32(p.NShared)},
		kvPair{a + "expert_weights_scale", p.WeightsScale},
		kvPair{a + "expert_weights_norm", p.WeightsNorm},
		kvPair{a + "expert_gating_func", u32(p.GatingFunc)},
	)
	if p.ExpertGroups > 1 {
		ps = append(ps,
			kvPair{a + "expert_group_count", u32(p.ExpertGroups)},
			kvPair{a + "expert_group_used_count", u32(p.ExpertGroupsUsed)})
	}
	ps = append(ps, kvPair{a + "rope.dimension_count", u32(p.NRot)})
	if p.YarnFactor > 0 {
		ps = append(ps,
			kvPair{a + "rope.scaling.type", "yarn"},
			kvPair{a + "rope.scaling.factor", p.YarnFactor},
			kvPair{a + "rope.scaling.original_context_length", u32(p.YarnOrigCtx)},
			kvPair{a + "rope.scaling.yarn_log_multiplier", p.YarnLogMul})
	}
	return ps
}
