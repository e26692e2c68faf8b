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
	f, ok := familyOf(p.Arch)
	if !ok {
		return nil, fmt.Errorf("%w: architecture %q (no family registered)", ErrBadOptions, p.Arch)
	}
	ps = mergeFamilyMeta(ps, a, f.Metadata(p))
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

// mergeFamilyMeta appends the family's keys (prefixed with a) to ps; a
// family key that is one of the common keys replaces that key's value in
// place (nemotron_h_moe's feed_forward_length is a per-layer array), as
// GGUF allows a key once.
func mergeFamilyMeta(ps []kvPair, a string, own []MetaKV) []kvPair {
	for _, kv := range own {
		k, replaced := a+kv.Key, false
		for i := range ps {
			if ps[i].k == k {
				ps[i].v, replaced = kv.Value, true
			}
		}
		if !replaced {
			ps = append(ps, kvPair{k, kv.Value})
		}
	}
	return ps
}
