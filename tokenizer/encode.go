package tokenizer

import (
	"container/heap"
	"strings"
	"sync"
)

// fragment is a piece of the input: a special token (id >= 0) or raw text
// text[s:e] (id == None).
type fragment struct {
	id   int32
	s, e int
}

// partition splits text at the special tokens, longest token first, as
// llama.cpp's tokenizer_st_partition. CONTROL and UNKNOWN tokens are only
// matched when parseSpecial is set; USER_DEFINED tokens always are.
func (t *Tokenizer) partition(text string, parseSpecial bool) []fragment {
	frags := []fragment{{id: None, s: 0, e: len(text)}}
	var out []fragment
	for _, sid := range t.special {
		if !parseSpecial && t.attrs[sid]&(attrControl|attrUnknown) != 0 {
			continue
		}
		tok := t.text[sid]
		if !strings.Contains(text, tok) {
			continue
		}
		out = out[:0]
		for _, f := range frags {
			if f.id != None {
				out = append(out, f)
				continue
			}
			s := f.s
			for s < f.e {
				i := strings.Index(text[s:f.e], tok)
				if i < 0 {
					break
				}
				if i > 0 {
					out = append(out, fragment{id: None, s: s, e: s + i})
				}
				out = append(out, fragment{id: sid, s: s + i, e: s + i + len(tok)})
				s += i + len(tok)
			}
			if s < f.e {
				out = append(out, fragment{id: None, s: s, e: f.e})
			}
		}
		frags, out = out, frags
	}
	return frags
}

// Encode tokenizes text like llama_tokenize(text, addSpecial, parseSpecial).
// With addSpecial, BOS/EOS are added if the vocabulary asks for them
// (tokenizer.ggml.add_bos_token / add_eos_token).
func (t *Tokenizer) Encode(text string, addSpecial, parseSpecial bool) []int32 {
	return t.AppendEncode(nil, text, addSpecial, parseSpecial)
}

// AppendEncode is Encode appending to dst.
func (t *Tokenizer) AppendEncode(dst []int32, text string, addSpecial, parseSpecial bool) []int32 {
	if addSpecial && t.addBOS {
		dst = append(dst, t.bos)
	}
	if text != "" {
		st := statePool.Get().(*encodeState)
		for _, f := range t.partition(text, parseSpecial) {
			if f.id != None {
				dst = append(dst, f.id)
				continue
			}
			dst = t.encodeRaw(st, dst, text[f.s:f.e])
		}
		statePool.Put(st)
	}
	if addSpecial && t.addEOS {
		dst = append(dst, t.eos)
	}
	return dst
}

// encodeState holds scratch buffers reused across calls (via statePool).
type encodeState struct {
	cpts  []rune
	flags []uint8
	ends  []int
	word  []byte
	sym   []symbol
	queue bigramQueue
}

var statePool = sync.Pool{New: func() any { return new(encodeState) }}

type symbol struct {
	id         int32 // interned symbol id, -1 when unknown
	s, e       int   // byte span in the (not yet byte-encoded) word
	prev, next int
}

type bigram struct {
	rank        int32
	left, right int
	lid, rid    int32
	result      int32
}

type bigramQueue []bigram

func (q bigramQueue) Len() int { return len(q) }
func (q bigramQueue) Less(i, j int) bool {
	if q[i].rank != q[j].rank {
		return q[i].rank < q[j].rank
	}
	return q[i].left < q[j].left
}
func (q bigramQueue) Swap(i, j int) { q[i], q[j] = q[j], q[i] }
func (q *bigramQueue) Push(x any)   { *q = append(*q, x.(bigram)) }
func (q *bigramQueue) Pop() any {
	old := *q
	x := old[len(old)-1]
	*q = old[:len(old)-1]
	return x
}

// encodeRaw pre-tokenizes one raw fragment and BPE-encodes every word.
func (t *Tokenizer) encodeRaw(st *encodeState, dst []int32, text string) []int32 {
	st.cpts = decodeCodepoints(text, st.cpts[:0])
	st.flags = st.flags[:0]
	for _, r := range st.cpts {
		st.flags = append(st.flags, cptFlags(r))
	}
	switch t.pre {
	case preGPT4o:
		st.ends = splitGPT4o(st.cpts, st.flags, st.ends[:0])
	default:
		st.ends = splitQwen2(st.cpts, st.flags, st.ends[:0])
	}
	start := 0
	for _, end := range st.ends {
		st.word = st.word[:0]
		for _, r := range st.cpts[start:end] {
			st.word = appendCodepointUTF8(st.word, r)
		}
		dst = t.bpeWord(st, dst, st.word)
		start = end
	}
	return dst
}

func (t *Tokenizer) addBigram(st *encodeState, left, right int) {
	if left < 0 || right < 0 {
		return
	}
	lid, rid := st.sym[left].id, st.sym[right].id
	if lid < 0 || rid < 0 {
		return
	}
	m, ok := t.merges[uint64(uint32(lid))<<32|uint64(uint32(rid))]
	if !ok {
		return
	}
	heap.Push(&st.queue, bigram{rank: m.rank, left: left, right: right, lid: lid, rid: rid, result: m.result})
}

// bpeWord merges the byte-level symbols of one pre-token by rank (lowest
// rank first, leftmost on ties) like llm_tokenizer_bpe_session, then emits
// the token ids, falling back to single-byte tokens for symbols that are not
// in the vocabulary.
func (t *Tokenizer) bpeWord(st *encodeState, dst []int32, word []byte) []int32 {
	if len(word) == 0 {
		return dst
	}
	st.sym = st.sym[:0]
	for i, b := range word {
		st.sym = append(st.sym, symbol{id: t.byteSym[b], s: i, e: i + 1, prev: i - 1, next: i + 1})
	}
	st.sym[len(st.sym)-1].next = -1
	st.queue = st.queue[:0]
	for i := 1; i < len(st.sym); i++ {
		t.addBigram(st, i-1, i)
	}
	for st.queue.Len() > 0 {
		bg := heap.Pop(&st.queue).(bigram)
		l, r := &st.sym[bg.left], &st.sym[bg.right]
		if l.e == l.s || r.e == r.s || l.id != bg.lid || r.id != bg.rid {
			continue // outdated
		}
		l.e = r.e
		l.id = bg.result
		r.s, r.e = 0, 0
		l.next = r.next
		if r.next >= 0 {
			st.sym[r.next].prev = bg.left
		}
		t.addBigram(st, l.prev, bg.left)
		t.addBigram(st, bg.left, l.next)
	}
	nv := int32(len(t.text))
	for i := 0; i >= 0; i = st.sym[i].next {
		s := &st.sym[i]
		if s.id >= 0 && s.id < nv {
			dst = append(dst, s.id)
			continue
		}
		// llama.cpp: look up every byte of the byte-level text as a
		// one-byte token; bytes that are not tokens are dropped.
		for _, b := range word[s.s:s.e] {
			for _, eb := range []byte(byteToUnicode[b]) {
				if id := t.byteTok[eb]; id >= 0 {
					dst = append(dst, id)
				}
			}
		}
	}
	return dst
}
