package grammar

import (
	"bytes"
	"slices"
)

// Vocab is a vocabulary prepared for masking: the tokens' bytes in sorted
// order with each one's common-prefix length to its predecessor, so a walk
// over them is a walk over the trie of their bytes. Build it once per
// vocabulary; it is read-only and shared by every Matcher.
type Vocab struct {
	n      int
	arena  []byte
	off    []int32 // id -> piece bytes arena[off[id]:off[id+1]]
	order  []int32 // ids of the tokens a grammar can match, by their bytes
	lcp    []int32 // lcp[i]: bytes order[i] shares with order[i-1]
	jump   []int32 // jump[i]: the first k > i with lcp[k] < lcp[i]
	sorted []byte  // the pieces of order, in order (sOff[i]:sOff[i+1])
	sOff   []int32
	// contLo, contHi: the tokens of order that start with a UTF-8
	// continuation byte (0x80-0xBF) are order[contLo:contHi].
	contLo, contHi int
	eog            []bool
	maxLen         int
}

// NewVocab prepares pieces (each token's bytes, indexed by id) with the
// end-of-generation ids eog. Tokens with an empty piece or a zero byte
// never match a grammar (llama.cpp treats their text as empty); EOG
// tokens match where the grammar may end.
func NewVocab(pieces [][]byte, eog []int32) *Vocab {
	v := &Vocab{n: len(pieces), off: make([]int32, len(pieces)+1), eog: make([]bool, len(pieces))}
	for _, id := range eog {
		if id >= 0 && int(id) < len(pieces) {
			v.eog[id] = true
		}
	}
	for id, p := range pieces {
		v.arena = append(v.arena, p...)
		v.off[id+1] = int32(len(v.arena))
		if len(p) == 0 || bytes.IndexByte(p, 0) >= 0 || v.eog[id] {
			continue
		}
		v.order = append(v.order, int32(id))
		v.maxLen = max(v.maxLen, len(p))
	}
	slices.SortFunc(v.order, func(a, b int32) int { return bytes.Compare(v.piece(a), v.piece(b)) })
	v.lcp = make([]int32, len(v.order))
	for i := 1; i < len(v.order); i++ {
		a, b := v.piece(v.order[i-1]), v.piece(v.order[i])
		k := 0
		for k < len(a) && k < len(b) && a[k] == b[k] {
			k++
		}
		v.lcp[i] = int32(k)
	}
	v.sOff = make([]int32, len(v.order)+1)
	for i, id := range v.order {
		v.sorted = append(v.sorted, v.piece(id)...)
		v.sOff[i+1] = int32(len(v.sorted))
	}
	v.contLo, _ = slices.BinarySearchFunc(v.order, byte(0x80), func(id int32, b byte) int { return cmpFirst(v.piece(id), b) })
	v.contHi, _ = slices.BinarySearchFunc(v.order, byte(0xC0), func(id int32, b byte) int { return cmpFirst(v.piece(id), b) })
	v.jump = make([]int32, len(v.order))
	var st []int32 // indices with increasing lcp
	for i := len(v.order) - 1; i >= 0; i-- {
		for len(st) > 0 && v.lcp[st[len(st)-1]] >= v.lcp[i] {
			st = st[:len(st)-1]
		}
		v.jump[i] = int32(len(v.order))
		if len(st) > 0 {
			v.jump[i] = st[len(st)-1]
		}
		st = append(st, int32(i))
	}
	return v
}

// cmpFirst compares a non-empty piece's first byte with b: a binary search
// for b finds the first piece that starts with b or a later byte.
func cmpFirst(p []byte, b byte) int { return int(p[0]) - int(b) }

// Size returns the number of tokens.
func (v *Vocab) Size() int { return v.n }

func (v *Vocab) piece(id int32) []byte { return v.arena[v.off[id]:v.off[id+1]] }

// Tokens is what VocabOf reads of a tokenizer.
type Tokens interface {
	NVocab() int
	// Piece appends token id's bytes (special: control tokens' text too).
	Piece(dst []byte, id int32, special bool) []byte
	EOGs() []int32
}

// VocabOf prepares a tokenizer's vocabulary: each token's piece as
// llama.cpp's grammar sees it (token_to_piece with special tokens' text).
func VocabOf(t Tokens) *Vocab {
	pieces := make([][]byte, t.NVocab())
	var buf []byte
	for id := range pieces {
		start := len(buf)
		buf = t.Piece(buf, int32(id), true)
		pieces[id] = buf[start:len(buf):len(buf)]
	}
	return NewVocab(pieces, t.EOGs())
}
