package grammar

import (
	"errors"
	"fmt"
	"math"
)

// ErrRejected is wrapped by Accept's error for a token the grammar does not
// allow.
var ErrRejected = errors.New("token not allowed by the grammar")

// state is a set of stacks and an incomplete UTF-8 character (rem bytes
// still to come, val the bits so far).
type state struct {
	set int32
	val uint32
	rem int32
	n   int32 // the incomplete character's length in bytes
}

// utf8Len is llama.cpp's decode_utf8 lookup by a byte's high nibble: the
// sequence length a lead byte starts, 0 for a continuation byte. Unlike
// llama.cpp, step takes valid UTF-8 only (no overlong forms, surrogates or
// code points past U+10FFFF), so a constrained answer is always valid text.
var utf8Len = [16]int32{1, 1, 1, 1, 1, 1, 1, 1, 0, 0, 0, 0, 2, 2, 3, 4}

// minCode is the least code point a UTF-8 sequence of n bytes may encode.
var minCode = [5]uint32{0, 0, 0x80, 0x800, 0x10000}

// maxCached bounds the allowed-token bitmaps a Matcher keeps.
const maxCached = 256

// Matcher constrains one generation to a grammar (sample.Mask). Not safe
// for concurrent use; make one per request.
type Matcher struct {
	m     *machine
	v     *Vocab
	cur   state
	walk  []state
	cache map[int32][]uint64 // set -> allowed tokens (rem == 0)
	viab  map[state]bool     // viable's memo
}

// NewMatcher starts matching g's root rule over v's tokens.
func NewMatcher(g *Grammar, v *Vocab) *Matcher {
	m := newMachine(g)
	return &Matcher{m: m, v: v, cur: state{set: m.start()}, walk: make([]state, v.maxLen+1), cache: map[int32][]uint64{}, viab: map[state]bool{}}
}

// step feeds one byte; ok is false when no stack can take it (or it breaks
// UTF-8).
func (mt *Matcher) step(s state, b byte) (state, bool) {
	var cp uint32
	if s.rem > 0 {
		if b>>6 != 2 {
			return s, false
		}
		s.val = s.val<<6 | uint32(b&0x3F)
		s.rem--
		if s.rem > 0 {
			return s, true
		}
		cp = s.val
		if cp < minCode[s.n] || cp > 0x10FFFF || 0xD800 <= cp && cp <= 0xDFFF {
			return s, false // overlong, beyond Unicode or a surrogate
		}
	} else {
		n := utf8Len[b>>4] - 1
		switch {
		case n < 0 || b == 0xC0 || b == 0xC1 || b >= 0xF5:
			return s, false
		case n > 0:
			return state{set: s.set, val: uint32(b) & (1<<(7-n) - 1), rem: n, n: n + 1}, true
		}
		cp = uint32(b)
	}
	set := mt.m.next(s.set, cp)
	return state{set: set}, set != dead
}

// endOK reports whether a token may end in state s: a complete character,
// or an incomplete one that some stack could take a completion of
// (llama_grammar_match_partial_char) and that some token of the vocabulary
// completes (viable).
func (mt *Matcher) endOK(s state) bool {
	return s.rem == 0 || mt.m.partialOK(s.set, s.val, int(s.rem)) && mt.viable(s)
}

// viable reports whether some token goes on from the incomplete character
// of s to a state a token may end in (memoized): without it a small
// vocabulary could lead the grammar into a state no token leaves.
func (mt *Matcher) viable(s state) bool {
	if ok, seen := mt.viab[s]; seen {
		return ok
	}
	mt.viab[s] = false // a cycle is not a way out
	ok := false
	v := mt.v
	for i := v.contLo; i < v.contHi && !ok; i++ {
		p := v.sorted[v.sOff[i]:v.sOff[i+1]]
		t, alive := s, true
		for _, b := range p {
			if t, alive = mt.step(t, b); !alive {
				break
			}
		}
		ok = alive && mt.endOK(t)
	}
	mt.viab[s] = ok
	return ok
}

// allowed returns the bitmap of the tokens (EOG aside) the grammar allows
// now.
func (mt *Matcher) allowed() []uint64 {
	if mt.cur.rem == 0 {
		if b, ok := mt.cache[mt.cur.set]; ok {
			return b
		}
	}
	v := mt.v
	bits := make([]uint64, (v.n+63)/64)
	st := mt.walk
	st[0] = mt.cur
	deadAt := -1 // the prefix of deadAt+1 bytes is rejected
	for i := 0; i < len(v.order); {
		l := int(v.lcp[i])
		if deadAt >= 0 && l > deadAt {
			i = int(v.jump[i]) // every token up to there shares the dead prefix
			continue
		}
		deadAt = -1
		p := v.sorted[v.sOff[i]:v.sOff[i+1]]
		for d := l; d < len(p); d++ {
			s, ok := mt.step(st[d], p[d])
			if !ok {
				deadAt = d
				break
			}
			st[d+1] = s
		}
		if deadAt < 0 && mt.endOK(st[len(p)]) {
			id := v.order[i]
			bits[id>>6] |= 1 << (id & 63)
		}
		i++
	}
	if mt.cur.rem == 0 {
		if len(mt.cache) >= maxCached {
			clear(mt.cache)
		}
		mt.cache[mt.cur.set] = bits
	}
	return bits
}

// Apply sets the logit of every token the grammar forbids now to -Inf:
// tokens whose bytes no stack can consume, end-of-generation tokens unless
// a stack is complete, and ids beyond the vocabulary.
func (mt *Matcher) Apply(logits []float32) error {
	bits := mt.allowed()
	eogOK := mt.cur.rem == 0 && mt.m.done[mt.cur.set]
	ninf := float32(math.Inf(-1))
	for id := range logits {
		switch {
		case id >= mt.v.n:
			logits[id] = ninf
		case mt.v.eog[id]:
			if !eogOK {
				logits[id] = ninf
			}
		case bits[id>>6]&(1<<(id&63)) == 0:
			logits[id] = ninf
		}
	}
	return nil
}

// Accept advances past token id; it fails (ErrRejected) on a token the
// grammar does not allow now.
func (mt *Matcher) Accept(id int32) error {
	if id < 0 || int(id) >= mt.v.n {
		return fmt.Errorf("token %d of %d: %w", id, mt.v.n, ErrRejected)
	}
	if mt.v.eog[id] {
		if mt.cur.rem == 0 && mt.m.done[mt.cur.set] {
			return nil
		}
		return fmt.Errorf("end of generation before the grammar is complete: %w", ErrRejected)
	}
	p := mt.v.piece(id)
	if len(p) == 0 {
		return fmt.Errorf("token %d has no text: %w", id, ErrRejected)
	}
	s := mt.cur
	for _, b := range p {
		var ok bool
		if b == 0 {
			ok = false
		} else {
			s, ok = mt.step(s, b)
		}
		if !ok {
			return fmt.Errorf("token %d (%q): %w", id, p, ErrRejected)
		}
	}
	if !mt.endOK(s) {
		return fmt.Errorf("token %d (%q): %w", id, p, ErrRejected)
	}
	mt.cur = s
	return nil
}

// Done reports whether the grammar may end here (an end-of-generation
// token is allowed).
func (mt *Matcher) Done() bool { return mt.cur.rem == 0 && mt.m.done[mt.cur.set] }

// AcceptString advances past text (llama_grammar_accept_str): for tests and
// for forcing a prefix.
func (mt *Matcher) AcceptString(text string) error {
	s := mt.cur
	for i := 0; i < len(text); i++ {
		var ok bool
		if s, ok = mt.step(s, text[i]); !ok || text[i] == 0 {
			return fmt.Errorf("at byte %d of %q: %w", i, text, ErrRejected)
		}
	}
	mt.cur = s
	return nil
}
