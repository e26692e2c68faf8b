package tokenizer

import (
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
func (t *encoder) partition(text string, parseSpecial bool) []fragment {
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
func (t *encoder) Encode(text string, addSpecial, parseSpecial bool) []int32 {
	return t.AppendEncode(nil, text, addSpecial, parseSpecial)
}

// AppendEncode is Encode appending to dst.
func (t *encoder) AppendEncode(dst []int32, text string, addSpecial, parseSpecial bool) []int32 {
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
			if t.pre == preGemma4 {
				dst = t.encodeGemma4(st, dst, text[f.s:f.e])
			} else {
				dst = t.encodeRaw(st, dst, text[f.s:f.e])
			}
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
	enc   []byte
	key   []byte
	sym   []symbol
	queue bigramQueue
}

var statePool = sync.Pool{New: func() any { return new(encodeState) }}

type symbol struct {
	s, e       int // byte span in the byte-level encoded word
	prev, next int
}

type bigram struct {
	rank        int32
	left, right int
	ln, rn      int // byte lengths of both symbols when queued
}

// bigramQueue is a binary min-heap ordered by (rank, left), written out
// instead of container/heap to avoid boxing every bigram.
type bigramQueue []bigram

func (q bigramQueue) less(i, j int) bool {
	if q[i].rank != q[j].rank {
		return q[i].rank < q[j].rank
	}
	return q[i].left < q[j].left
}

func (q *bigramQueue) push(b bigram) {
	*q = append(*q, b)
	h := *q
	for i := len(h) - 1; i > 0; {
		p := (i - 1) / 2
		if !h.less(i, p) {
			break
		}
		h[i], h[p] = h[p], h[i]
		i = p
	}
}

func (q *bigramQueue) pop() bigram {
	h := *q
	top := h[0]
	n := len(h) - 1
	h[0] = h[n]
	h = h[:n]
	for i := 0; ; {
		l := 2*i + 1
		if l >= n {
			break
		}
		m := l
		if r := l + 1; r < n && h.less(r, l) {
			m = r
		}
		if !h.less(m, i) {
			break
		}
		h[i], h[m] = h[m], h[i]
		i = m
	}
	*q = h
	return top
}

// encodeRaw pre-tokenizes one raw fragment and BPE-encodes every word.
func (t *encoder) encodeRaw(st *encodeState, dst []int32, text string) []int32 {
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
		// byte-level encoding: every byte becomes one code point
		st.enc = st.enc[:0]
		st.sym = st.sym[:0]
		for i, b := range st.word {
			s := len(st.enc)
			st.enc = append(st.enc, byteToUnicode[b]...)
			st.sym = append(st.sym, symbol{s: s, e: len(st.enc), prev: i - 1, next: i + 1})
		}
		dst = t.bpeWord(st, dst)
		start = end
	}
	return dst
}

// spaceEscape is U+2581, which SPM-style vocabularies use for a space.
const spaceEscape = "\u2581"

// utf8Len is llama.cpp's unicode_len_utf8: the sequence length announced by
// a lead byte's high nibble.
func utf8Len(b byte) int {
	switch b >> 4 {
	case 12, 13:
		return 2
	case 14:
		return 3
	case 15:
		return 4
	}
	return 1
}

// encodeGemma4 is llama.cpp's BPE session for LLAMA_VOCAB_PRE_TYPE_GEMMA4:
// spaces become U+2581, the text splits into words that are runs of '\n' and
// runs of anything else ("[^\n]+|[\n]+" over code points, re-encoded to
// UTF-8), a word of newlines that is itself a token is emitted whole, and
// every other word is BPE-merged from its UTF-8 characters on the raw text.
func (t *encoder) encodeGemma4(st *encodeState, dst []int32, text string) []int32 {
	text = strings.ReplaceAll(text, " ", spaceEscape)
	st.cpts = decodeCodepoints(text, st.cpts[:0])
	for start := 0; start < len(st.cpts); {
		nl := st.cpts[start] == '\n'
		end := start + 1
		for end < len(st.cpts) && (st.cpts[end] == '\n') == nl {
			end++
		}
		st.enc = st.enc[:0]
		for _, r := range st.cpts[start:end] {
			st.enc = appendCodepointUTF8(st.enc, r)
		}
		start = end
		if id, ok := t.toID[string(st.enc)]; ok && nl {
			dst = append(dst, id)
			continue
		}
		st.sym = st.sym[:0]
		for off := 0; off < len(st.enc); {
			n := min(len(st.enc)-off, utf8Len(st.enc[off]))
			st.sym = append(st.sym, symbol{s: off, e: off + n, prev: len(st.sym) - 1, next: len(st.sym) + 1})
			off += n
		}
		dst = t.bpeWord(st, dst)
	}
	return dst
}

func (t *encoder) addBigram(st *encodeState, left, right int) {
	if left < 0 || right < 0 {
		return
	}
	l, r := st.sym[left], st.sym[right]
	st.key = append(append(append(st.key[:0], st.enc[l.s:l.e]...), ' '), st.enc[r.s:r.e]...)
	rank, ok := t.merges[string(st.key)]
	if !ok {
		return
	}
	st.queue.push(bigram{rank: rank, left: left, right: right, ln: l.e - l.s, rn: r.e - r.s})
}

// bpeWord merges the byte-level symbols of one pre-token by rank (lowest
// rank first, leftmost on ties) like llm_tokenizer_bpe_session, then emits
// the token ids, falling back to single-byte tokens for symbols that are not
// in the vocabulary.
func (t *encoder) bpeWord(st *encodeState, dst []int32) []int32 {
	if len(st.sym) == 0 {
		return dst
	}
	st.sym[len(st.sym)-1].next = -1
	st.queue = st.queue[:0]
	for i := 1; i < len(st.sym); i++ {
		t.addBigram(st, i-1, i)
	}
	for len(st.queue) > 0 {
		bg := st.queue.pop()
		l, r := &st.sym[bg.left], &st.sym[bg.right]
		// outdated when either symbol changed since it was queued (the
		// start of a live symbol never moves, so equal lengths mean equal text)
		if l.e == l.s || r.e == r.s || l.e-l.s != bg.ln || r.e-r.s != bg.rn {
			continue
		}
		l.e = r.e
		r.s, r.e = 0, 0
		l.next = r.next
		if r.next >= 0 {
			st.sym[r.next].prev = bg.left
		}
		t.addBigram(st, l.prev, bg.left)
		t.addBigram(st, bg.left, l.next)
	}
	for i := 0; i >= 0; i = st.sym[i].next {
		s := st.sym[i]
		if id, ok := t.toID[string(st.enc[s.s:s.e])]; ok {
			dst = append(dst, id)
			continue
		}
		// llama.cpp: look up every byte of the byte-level text as a
		// one-byte token; bytes that are not tokens are dropped.
		for _, eb := range st.enc[s.s:s.e] {
			if id := t.byteTok[eb]; id >= 0 {
				dst = append(dst, id)
			}
		}
	}
	return dst
}
