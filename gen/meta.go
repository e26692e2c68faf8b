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
