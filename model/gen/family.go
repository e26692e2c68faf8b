package gen

// family.go: the generator side of a model family (Family) and its
// registry. A family's package implements Family next to its model code
// and registers it (package family's Register); gen then finds the
// family's presets, tensor list, metadata and tokenizer defaults by the
// preset's architecture instead of a switch on its name: gen itself names
// no architecture.

import (
	"fmt"
	"sort"
	"sync"
)

// Family is what gen needs from one architecture family to write its
// models.
type Family interface {
	// Arch is the GGUF general.architecture the family writes.
	Arch() string
	// Presets are the family's --preset shapes (Arch set to Arch()).
	Presets() []Preset
	// CheckPreset refuses a preset the family's tensors or metadata
	// cannot describe, beyond the common checks every preset passes.
	CheckPreset(p *Preset) error
	// Tensors is every tensor of preset p with vocab tokens, in any
	// order (gen sorts them as llama-quantize writes them).
	Tensors(p *Preset, vocab int) []TensorSpec
	// Metadata is the family's hyper-parameter keys, without the
	// "arch." prefix, after the common block_count, context_length,
	// embedding_length, feed_forward_length and attention.head_count, in
	// the order llama.cpp's converter writes them; a key among the common
	// ones replaces its value (a per-layer feed_forward_length).
	Metadata(p *Preset) []MetaKV
	// Vocab is the built-in tokenizer's special tokens, pre-tokenizer
	// and chat template (ChatMLVocab for most families).
	Vocab() VocabSpec
}

// MetaKV is one metadata key and its value (a type gguf.NewValue takes).
type MetaKV struct {
	Key   string
	Value any
}

// VocabSpec is what a family sets in the built-in tokenizer: its special
// tokens (appended after the ordinary ones), the bos, eos and padding
// token among them (indices into Specials), the pre-tokenizer name and
// the chat template.
type VocabSpec struct {
	Specials     []string
	BOS, EOS     int
	Pad          int
	Pre          string
	ChatTemplate string
}

// ChatMLVocab is the Qwen-style tokenizer most families are written with:
// <|endoftext|> (bos and padding), <|im_start|>, <|im_end|> (eos), the
// qwen2 pre-tokenizer and a ChatML template.
func ChatMLVocab() VocabSpec {
	return VocabSpec{Specials: []string{"<|endoftext|>", "<|im_start|>", "<|im_end|>"}, BOS: 0, EOS: 2, Pad: 0, Pre: "qwen2", ChatTemplate: chatML}
}

var (
	famMu    sync.Mutex
	families = map[string]Family{}
)

// RegisterFamily makes family f's presets available to gen. It panics on
// a second family of the same architecture or a preset name already
// taken (a programming error, met at init).
func RegisterFamily(f Family) {
	famMu.Lock()
	defer famMu.Unlock()
	arch := f.Arch()
	if _, dup := families[arch]; dup {
		panic("gen: family registered twice: " + arch)
	}
	for _, p := range f.Presets() {
		if p.Arch != arch {
			panic(fmt.Sprintf("gen: family %s: preset %s has architecture %q", arch, p.Name, p.Arch))
		}
		if _, taken := lookupPresetLocked(p.Name); taken {
			panic("gen: preset defined twice: " + p.Name)
		}
	}
	families[arch] = f
}

// familyOf returns the family registered for arch.
func familyOf(arch string) (Family, bool) {
	famMu.Lock()
	defer famMu.Unlock()
	f, ok := families[arch]
	return f, ok
}

// allPresetsLocked is every registered family's presets, sorted by name.
// famMu must be held.
func allPresetsLocked() []Preset {
	var out []Preset
	for _, f := range families {
		out = append(out, f.Presets()...)
	}
	sort.Slice(out, func(i, j int) bool { return out[i].Name < out[j].Name })
	return out
}

func lookupPresetLocked(name string) (Preset, bool) {
	for _, p := range allPresetsLocked() {
		if p.Name == name {
			return p, true
		}
	}
	return Preset{}, false
}

// Shared pieces for the families' tensor lists and metadata.

// Dims is a tensor shape in ggml order (ne0 first).
func Dims(xs ...int) []uint64 { return u(xs...) }

// Blk is the name of block il's tensor name: "blk.<il>.<name>".
func Blk(il int, name string) string { return blk(il, name) }

// HeadTensors are the embeddings, the output norm and an untied output
// matrix.
func HeadTensors(p *Preset, vocab int) []TensorSpec { return headTensors(p, vocab) }

// RoutedBlock is block il's attention (norm, Q/K/V/output projections)
// and routed FFN (norm, router, gate/up/down experts) without extras.
func RoutedBlock(p *Preset, il int) []TensorSpec { return routedBlock(p, il) }

// AttentionMoEMeta is the metadata of a plain GQA attention with routed
// experts: head_count_kv, rope.freq_base, the RMS epsilon, the expert
// counts and the key and value lengths.
func AttentionMoEMeta(p *Preset) []MetaKV {
	u32 := func(x int) uint32 { return uint32(x) }
	return []MetaKV{
		{"attention.head_count_kv", u32(p.NHeadKV)},
		{"rope.freq_base", p.RopeBase},
		{"attention.layer_norm_rms_epsilon", p.RMSEps},
		{"expert_count", u32(p.NExpert)},
		{"expert_used_count", u32(p.NExpertUsed)},
		{"attention.key_length", u32(p.HeadDim)},
		{"attention.value_length", u32(p.HeadDim)},
	}
}
