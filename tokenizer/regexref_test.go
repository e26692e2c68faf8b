package tokenizer

import (
	"math/rand/v2"
	"slices"
	"testing"
)

// A small backtracking matcher with ECMAScript semantics (ordered
// alternation, greedy quantifiers that give back one step at a time,
// lookahead), used as an independent reference for the hand-written
// splitters: the patterns below are llama.cpp's qwen2 and gpt-4o regexes
// written out node by node, over the same collapsed character classes.

type node func(c []rune, f []uint8, i int, k func(int) bool) bool

func class(pred func(r rune, fl uint8) bool) node {
	return func(c []rune, f []uint8, i int, k func(int) bool) bool {
		return i < len(c) && pred(c[i], f[i]) && k(i+1)
	}
}

func seq(ns ...node) node {
	if len(ns) == 0 {
		return func(c []rune, f []uint8, i int, k func(int) bool) bool { return k(i) }
	}
	return func(c []rune, f []uint8, i int, k func(int) bool) bool {
		return ns[0](c, f, i, func(j int) bool { return seq(ns[1:]...)(c, f, j, k) })
	}
}

func alt(ns ...node) node {
	return func(c []rune, f []uint8, i int, k func(int) bool) bool {
		for _, n := range ns {
			if n(c, f, i, k) {
				return true
			}
		}
		return false
	}
}

// rep is a greedy {min,max} quantifier (max < 0: unbounded).
func rep(n node, min, max int) node {
	var try func(c []rune, f []uint8, i, count int, k func(int) bool) bool
	try = func(c []rune, f []uint8, i, count int, k func(int) bool) bool {
		if max < 0 || count < max {
			if n(c, f, i, func(j int) bool { return j > i && try(c, f, j, count+1, k) }) {
				return true
			}
		}
		return count >= min && k(i)
	}
	return func(c []rune, f []uint8, i int, k func(int) bool) bool { return try(c, f, i, 0, k) }
}

func star(n node) node { return rep(n, 0, -1) }
func plus(n node) node { return rep(n, 1, -1) }
func opt(n node) node  { return rep(n, 0, 1) }

// notFollowedByNonSpace is (?!\S).
func notFollowedByNonSpace() node {
	return func(c []rune, f []uint8, i int, k func(int) bool) bool {
		if i < len(c) && f[i]&fSpace == 0 {
			return false
		}
		return k(i)
	}
}

func ch(r rune) node { return class(func(x rune, _ uint8) bool { return x == r }) }
func either(a, b rune) node {
	return class(func(x rune, _ uint8) bool { return x == a || x == b })
}

var (
	cL     = class(func(_ rune, f uint8) bool { return f&fLetter != 0 })
	cN     = class(func(_ rune, f uint8) bool { return f&fNumber != 0 })
	cS     = class(func(_ rune, f uint8) bool { return f&fSpace != 0 })
	cRN    = class(func(r rune, _ uint8) bool { return r == '\r' || r == '\n' })
	cRNS   = class(func(r rune, _ uint8) bool { return r == '\r' || r == '\n' || r == '/' })
	cPre   = class(func(r rune, f uint8) bool { return r != '\r' && r != '\n' && f&(fLetter|fNumber) == 0 })
	cOther = class(func(_ rune, f uint8) bool { return f&(fLetter|fNumber|fSpace) == 0 })
	// (?=[\p{L}])([^a-z]) and (?=[\p{L}])([^A-Z]) on collapsed text
	cU = class(func(_ rune, f uint8) bool { return f&fLetter != 0 && f&fLowerASCII == 0 })
	cW = class(func(_ rune, f uint8) bool { return f&fLetter != 0 && f&fUpperASCII == 0 })

	contr = alt(
		seq(ch('\''), either('s', 'S')), seq(ch('\''), either('t', 'T')),
		seq(ch('\''), either('r', 'R'), either('e', 'E')), seq(ch('\''), either('v', 'V'), either('e', 'E')),
		seq(ch('\''), either('m', 'M')), seq(ch('\''), either('l', 'L'), either('l', 'L')),
		seq(ch('\''), either('d', 'D')))

	spaceTail = []node{
		seq(star(cS), plus(cRN)),
		seq(plus(cS), notFollowedByNonSpace()),
		plus(cS),
	}

	refQwen2 = alt(append([]node{
		contr,
		seq(opt(cPre), plus(cL)),
		cN,
		seq(opt(ch(' ')), plus(cOther), star(cRN)),
	}, spaceTail...)...)

	refGPT4o = alt(append([]node{
		seq(opt(cPre), star(cU), plus(cW), opt(contr)),
		seq(opt(cPre), plus(cU), star(cW), opt(contr)),
		rep(cN, 1, 3),
		seq(opt(ch(' ')), plus(cOther), star(cRNS)),
	}, spaceTail...)...)
)

// refSplit splits like std::regex_iterator: a match at every position (the
// patterns match any character, so no gap can occur).
func refSplit(t *testing.T, re node, text []rune) []string {
	f := make([]uint8, len(text))
	for i, r := range text {
		f[i] = cptFlags(r)
	}
	var out []string
	for p := 0; p < len(text); {
		e := -1
		re(text, f, p, func(j int) bool { e = j; return true })
		if e <= p {
			t.Fatalf("reference: no match at %d in %q", p, string(text))
		}
		out = append(out, string(text[p:e]))
		p = e
	}
	return out
}

// alphabet covers every class the patterns distinguish: ASCII upper/lower
// (including contraction letters), non-ASCII letters (Latin, CJK), marks,
// ASCII and non-ASCII digits, the whitespace kinds, the apostrophe, slash and
// other punctuation.
var alphabet = []rune{'a', 'b', 'B', 'Z', 's', 'S', 't', 'r', 'e', 'E', 'l', 'L', 'v', 'm', 'd', 'D',
	'À', 'é', 'ß', '東', 'ǅ', '\u0301', '\u093f', '1', '9', '٣', 'Ⅻ',
	' ', ' ', '\n', '\r', '\t', '\u00a0', '\u3000', '\'', '/', '!', '.', '$', '\u200b', '\x1f'}

func TestSplittersMatchReferenceRegex(t *testing.T) {
	rng := rand.New(rand.NewPCG(1, 2))
	n := 5000
	if testing.Short() {
		n = 1000
	}
	for it := 0; it < n; it++ {
		text := make([]rune, 1+rng.IntN(12))
		for i := range text {
			text[i] = alphabet[rng.IntN(len(alphabet))]
		}
		s := string(text)
		if got, want := pretokens(splitQwen2, s), refSplit(t, refQwen2, text); !slices.Equal(got, want) {
			t.Fatalf("qwen2 %q:\n got %q\nwant %q", s, got, want)
		}
		if got, want := pretokens(splitGPT4o, s), refSplit(t, refGPT4o, text); !slices.Equal(got, want) {
			t.Fatalf("gpt-4o %q:\n got %q\nwant %q", s, got, want)
		}
	}
}

func FuzzSplitters(f *testing.F) {
	f.Add([]byte{0, 16, 3, 27})
	f.Add([]byte{16, 2, 27, 34, 4})
	f.Fuzz(func(t *testing.T, b []byte) {
		if len(b) > 40 {
			b = b[:40]
		}
		text := make([]rune, len(b))
		for i, x := range b {
			text[i] = alphabet[int(x)%len(alphabet)]
		}
		s := string(text)
		if got, want := pretokens(splitQwen2, s), refSplit(t, refQwen2, text); !slices.Equal(got, want) {
			t.Fatalf("qwen2 %q:\n got %q\nwant %q", s, got, want)
		}
		if got, want := pretokens(splitGPT4o, s), refSplit(t, refGPT4o, text); !slices.Equal(got, want) {
			t.Fatalf("gpt-4o %q:\n got %q\nwant %q", s, got, want)
		}
	})
}
