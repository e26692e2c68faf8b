package gen

import (
	"errors"
	"fmt"
	"sort"
	"strings"

	"github.com/pipe-engine/pipe/gguf"
)

// ErrVocab reports a --vocab file that has no usable tokenizer.
var ErrVocab = errors.New("vocab file")

// Token types as llama.cpp numbers them (tokenizer.ggml.token_type).
const (
	tokNormal  int32 = 1
	tokControl int32 = 3
)

// Vocab is the tokenizer metadata written into the model: the tokenizer.* KV
// pairs in order, and the vocabulary size (which sets token_embd/output rows).
type Vocab struct {
	KV   []gguf.KV
	Size int
}

// LoadVocab copies every tokenizer.* key of the GGUF file at path, in order.
func LoadVocab(path string) (*Vocab, error) {
	f, err := gguf.Open(path)
	if err != nil {
		return nil, fmt.Errorf("--vocab %s: %w", path, err)
	}
	v := &Vocab{}
	for _, kv := range f.KV {
		if strings.HasPrefix(kv.Key, "tokenizer.") {
			v.KV = append(v.KV, kv)
		}
	}
	toks, err := f.GetStrings("tokenizer.ggml.tokens")
	if err != nil {
		return nil, fmt.Errorf("--vocab %s: %w: %w", path, ErrVocab, err)
	}
	if len(toks) == 0 {
		return nil, fmt.Errorf("--vocab %s: %w: tokenizer.ggml.tokens is empty", path, ErrVocab)
	}
	v.Size = len(toks)
	return v, nil
}

// bpeCorpus is the text the built-in tokenizer learns its merges from.
const bpeCorpus = `The quick brown fox jumps over the lazy dog. Once upon a time there was a small
village at the edge of a great forest, and in that village there lived an old clockmaker who
repaired the clocks of everyone in the valley. Every morning he opened the shutters of his shop,
wound the tall clock by the door, and listened to the ticking of a hundred machines that were
all telling the same time in slightly different voices. Children came after school to watch
him work; he showed them how the gears turned, how the spring stored the energy of a wound key,
and how a pendulum kept the rhythm of the whole thing. "A clock is a promise," he told them,
"that tomorrow will come at the right moment." In the winter the river froze and the people
skated on it under the stars, and in the summer they swam where the water ran deep and cold.
The weather was often rainy in the spring, but the farmers were happy, because the rain made
the fields green and the harvest rich. Questions about the world, about numbers and machines,
about the sky and the sea, were what the clockmaker loved most. He answered them with patience,
and when he did not know the answer he said so, and they found it out together.
Hello world! What is the capital of France? Paris is the capital and largest city of France.
Write a short story about a robot who learns to paint. Explain why the sky is blue.
`

// bytesToUnicode is GPT-2's reversible byte → printable rune table.
func bytesToUnicode() [256]rune {
	var t [256]rune
	n := 0
	for b := 0; b < 256; b++ {
		if (b >= '!' && b <= '~') || (b >= 0xA1 && b <= 0xAC) || (b >= 0xAE && b <= 0xFF) {
			t[b] = rune(b)
		} else {
			t[b] = rune(256 + n)
			n++
		}
	}
	return t
}

// learnMerges learns up to n byte-level BPE merges greedily from text (GPT-2
// style words: a leading space belongs to the word), most frequent pair first,
// ties broken by the pair's text. Deterministic.
func learnMerges(text string, n int) [][2]string {
	b2u := bytesToUnicode()
	counts := map[string]int{}
	for _, w := range splitWords(text) {
		counts[w]++
	}
	type word struct {
		syms []string
		n    int
	}
	var words []word
	keys := make([]string, 0, len(counts))
	for w := range counts {
		keys = append(keys, w)
	}
	sort.Strings(keys)
	for _, w := range keys {
		var syms []string
		for i := 0; i < len(w); i++ {
			syms = append(syms, string(b2u[w[i]]))
		}
		words = append(words, word{syms, counts[w]})
	}
	var merges [][2]string
	for len(merges) < n {
		pairs := map[[2]string]int{}
		for _, w := range words {
			for i := 0; i+1 < len(w.syms); i++ {
				pairs[[2]string{w.syms[i], w.syms[i+1]}] += w.n
			}
		}
		var best [2]string
		bestN := 1 // a merge must occur at least twice
		for p, c := range pairs {
			if c > bestN || (c == bestN && bestN > 1 && p[0]+" "+p[1] < best[0]+" "+best[1]) {
				best, bestN = p, c
			}
		}
		if bestN < 2 {
			break
		}
		merges = append(merges, best)
		for wi := range words {
			s := words[wi].syms
			out := s[:0:0]
			for i := 0; i < len(s); i++ {
				if i+1 < len(s) && s[i] == best[0] && s[i+1] == best[1] {
					out = append(out, best[0]+best[1])
					i++
				} else {
					out = append(out, s[i])
				}
			}
			words[wi].syms = out
		}
	}
	return merges
}

// splitWords splits text into GPT-2-like pre-tokens: runs of letters or digits
// with their leading space, and single other characters.
func splitWords(text string) []string {
	var out []string
	isAlnum := func(c byte) bool {
		return c >= 'a' && c <= 'z' || c >= 'A' && c <= 'Z' || c >= '0' && c <= '9'
	}
	i := 0
	for i < len(text) {
		start := i
		if text[i] == ' ' && i+1 < len(text) && isAlnum(text[i+1]) {
			i++
		}
		if isAlnum(text[i]) {
			for i < len(text) && isAlnum(text[i]) {
				i++
			}
		} else {
			i++
		}
		out = append(out, text[start:i])
	}
	return out
}

// pseudoWord is the text of filler token k: a unique, pronounceable
// space-prefixed word in GPT-2's byte-to-unicode spelling (Ġ is the space).
func pseudoWord(k int) string {
	cons := "bdfgklmnprstvz"
	vow := "aeiou"
	var b strings.Builder
	b.WriteString("Ġ")
	k++
	for k > 0 {
		d := k % (len(cons) * len(vow))
		b.WriteByte(cons[d/len(vow)])
		b.WriteByte(vow[d%len(vow)])
		k /= len(cons) * len(vow)
	}
	return b.String()
}

// vocabSpec is the built-in tokenizer's specials, pre-tokenizer and chat
// template for arch: its family's (Family.Vocab), else ChatML.
func vocabSpec(arch string) VocabSpec {
	if f, ok := familyOf(arch); ok {
		return f.Vocab()
	}
	return ChatMLVocab()
}

const chatML = "{% for message in messages %}{{ '<|im_start|>' + message['role'] + '\\n' + message['content'] + '<|im_end|>' + '\\n' }}{% endfor %}\n" +
	"{% if add_generation_prompt %}{{ '<|im_start|>assistant\\n' }}{% endif %}"

// presetVocabSpec is preset p's tokenizer: its own (Preset.Tokenizer) or
// its family's.
func presetVocabSpec(p *Preset) VocabSpec {
	if p.Tokenizer != nil {
		return *p.Tokenizer
	}
	return vocabSpec(p.Arch)
}

// BuiltinVocabSpec builds a byte-level BPE tokenizer (GPT-2/Qwen2 style)
// with size tokens and spec's specials, pre-tokenizer and chat template: the
// 256 byte tokens, merges learned from a fixed English text, filler words up
// to the size, and the special tokens last. The tokenizer therefore encodes
// any text (every byte has a token), and generated ids decode to words.
func BuiltinVocabSpec(spec VocabSpec, size int) (*Vocab, error) {
	sp := spec.Specials
	if size < 256+len(sp) {
		return nil, fmt.Errorf("%w: built-in vocabulary needs at least %d tokens, preset asks %d", ErrBadOptions, 256+len(sp), size)
	}
	b2u := bytesToUnicode()
	tokens := make([]string, 0, size)
	types := make([]int32, 0, size)
	seen := map[string]bool{}
	add := func(s string, t int32) {
		tokens = append(tokens, s)
		types = append(types, t)
		seen[s] = true
	}
	for b := 0; b < 256; b++ {
		add(string(b2u[b]), tokNormal)
	}
	room := size - 256 - len(sp)
	var merges []string
	for _, m := range learnMerges(bpeCorpus, room) {
		s := m[0] + m[1]
		if seen[s] {
			continue
		}
		add(s, tokNormal)
		merges = append(merges, m[0]+" "+m[1])
	}
	for k := 0; len(tokens) < size-len(sp); k++ {
		if w := pseudoWord(k); !seen[w] {
			add(w, tokNormal)
		}
	}
	first := len(tokens)
	for _, s := range sp {
		add(s, tokControl)
	}
	if merges == nil {
		merges = []string{}
	}
	kvs, err := makeKVs([]kvPair{
		{"tokenizer.ggml.model", "gpt2"},
		{"tokenizer.ggml.pre", spec.Pre},
		{"tokenizer.ggml.tokens", tokens},
		{"tokenizer.ggml.token_type", types},
		{"tokenizer.ggml.merges", merges},
		{"tokenizer.ggml.bos_token_id", uint32(first + spec.BOS)},
		{"tokenizer.ggml.eos_token_id", uint32(first + spec.EOS)},
		{"tokenizer.ggml.padding_token_id", uint32(first + spec.Pad)},
		{"tokenizer.ggml.add_bos_token", false},
		{"tokenizer.chat_template", spec.ChatTemplate},
	})
	if err != nil {
		return nil, err
	}
	return &Vocab{Size: size, KV: kvs}, nil
}
