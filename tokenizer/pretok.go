package tokenizer

import "unicode"

// Code point class flags, with the meaning llama.cpp's collapsed-regex path
// gives them: ASCII characters keep their identity (so \s is the C-locale
// isspace set and only A-Z, a-z are letters among them); non-ASCII code points
// are whitespace (White_Space property), letter (category L), number
// (category N), or anything else (marks, punctuation, symbols, controls,
// unassigned), which all match [^\s\p{L}\p{N}].
const (
	fLetter uint8 = 1 << iota
	fNumber
	fSpace
	fUpperASCII // 'A'..'Z'
	fLowerASCII // 'a'..'z'
)

var asciiFlags [128]uint8

func init() {
	for c := 0; c < 128; c++ {
		var f uint8
		switch {
		case c >= 'A' && c <= 'Z':
			f = fLetter | fUpperASCII
		case c >= 'a' && c <= 'z':
			f = fLetter | fLowerASCII
		case c >= '0' && c <= '9':
			f = fNumber
		case c == ' ' || (c >= '\t' && c <= '\r'):
			f = fSpace
		}
		asciiFlags[c] = f
	}
}

func cptFlags(r rune) uint8 {
	if r < 128 {
		return asciiFlags[r]
	}
	switch {
	case unicode.Is(unicode.White_Space, r):
		return fSpace
	case unicode.IsLetter(r):
		return fLetter
	case unicode.IsNumber(r):
		return fNumber
	}
	return 0
}

// splitter appends the end offset (in code points) of every pre-token of c.
type splitter func(c []rune, f []uint8, ends []int) []int

func isRN(r rune) bool { return r == '\r' || r == '\n' }

// contraction returns the length (2, 3 or 0) of (?:'[sS]|'[tT]|'[rR][eE]|
// '[vV][eE]|'[mM]|'[lL][lL]|'[dD]) at p.
func contraction(c []rune, p int) int {
	n := len(c)
	if p+1 >= n || c[p] != '\'' {
		return 0
	}
	switch c[p+1] {
	case 's', 'S', 't', 'T', 'm', 'M', 'd', 'D':
		return 2
	}
	if p+2 < n {
		a, b := c[p+1]|0x20, c[p+2]|0x20 // ASCII lower-case; other runes never match below
		if c[p+1] < 128 && c[p+2] < 128 && ((a == 'r' && b == 'e') || (a == 'v' && b == 'e') || (a == 'l' && b == 'l')) {
			return 3
		}
	}
	return 0
}

// matchPunctAndSpace handles the alternatives shared by both patterns after
// the letter and number ones:
//
//	' ?[^\s\p{L}\p{N}]+[\r\n<extra>]*' | '\s*[\r\n]+' | '\s+(?!\S)' | '\s+'
//
// where extra is '/' for gpt-4o. It always consumes at least one code point.
func matchPunctAndSpace(c []rune, f []uint8, p int, slash bool) int {
	n := len(c)
	const lns = fLetter | fNumber | fSpace
	q := p
	if c[p] == ' ' && p+1 < n && f[p+1]&lns == 0 {
		q = p + 1
	}
	if f[q]&lns == 0 {
		for q < n && f[q]&lns == 0 {
			q++
		}
		for q < n && (isRN(c[q]) || (slash && c[q] == '/')) {
			q++
		}
		return q
	}
	// c[p] is whitespace here.
	q = p
	lastRN := -1
	for q < n && f[q]&fSpace != 0 {
		if isRN(c[q]) {
			lastRN = q
		}
		q++
	}
	if lastRN >= 0 { // \s*[\r\n]+
		return lastRN + 1
	}
	if q == n { // \s+(?!\S) at the end of the fragment
		return q
	}
	if q-1 > p { // \s+(?!\S): leave the last space to the next word
		return q - 1
	}
	return q // \s+
}

// splitQwen2 implements llama.cpp's qwen2 pattern
//
//	(?:'[sS]|'[tT]|'[rR][eE]|'[vV][eE]|'[mM]|'[lL][lL]|'[dD])|[^\r\n\p{L}\p{N}]?\p{L}+|\p{N}|
//	 ?[^\s\p{L}\p{N}]+[\r\n]*|\s*[\r\n]+|\s+(?!\S)|\s+
//
// with leftmost-first (ECMAScript) alternation.
func splitQwen2(c []rune, f []uint8, ends []int) []int {
	n := len(c)
	for p := 0; p < n; {
		e := p
		if k := contraction(c, p); k > 0 {
			e = p + k
		} else if f[p]&fLetter != 0 {
			e = p + 1
			for e < n && f[e]&fLetter != 0 {
				e++
			}
		} else if !isRN(c[p]) && f[p]&fNumber == 0 && p+1 < n && f[p+1]&fLetter != 0 {
			e = p + 2
			for e < n && f[e]&fLetter != 0 {
				e++
			}
		} else if f[p]&fNumber != 0 {
			e = p + 1
		} else {
			e = matchPunctAndSpace(c, f, p, false)
		}
		ends = append(ends, e)
		p = e
	}
	return ends
}

// splitGPT4o implements llama.cpp's gpt-4o pattern
//
//	[^\r\n\p{L}\p{N}]?((?=[\p{L}])([^a-z]))*((?=[\p{L}])([^A-Z]))+(?:'[sS]|...|'[dD])?|
//	[^\r\n\p{L}\p{N}]?((?=[\p{L}])([^a-z]))+((?=[\p{L}])([^A-Z]))*(?:'[sS]|...|'[dD])?|
//	\p{N}{1,3}| ?[^\s\p{L}\p{N}]+[\r\n/]*|\s*[\r\n]+|\s+(?!\S)|\s+
//
// on llama.cpp's collapsed text, where every non-ASCII letter is one class
// byte: it matches both "letter but not a-z" (U) and "letter but not A-Z" (W).
// The first alternative is resolved with backtracking order: U* greedy, then
// the first position (from the right) where W+ can start.
func splitGPT4o(c []rune, f []uint8, ends []int) []int {
	n := len(c)
	isU := func(i int) bool { return i < n && f[i]&fLetter != 0 && f[i]&fLowerASCII == 0 }
	isW := func(i int) bool { return i < n && f[i]&fLetter != 0 && f[i]&fUpperASCII == 0 }
	for p := 0; p < n; {
		e := -1
		s := -1
		if f[p]&fLetter != 0 {
			s = p
		} else if !isRN(c[p]) && f[p]&fNumber == 0 && p+1 < n && f[p+1]&fLetter != 0 {
			s = p + 1
		}
		if s >= 0 {
			// alternative 1: U* W+
			j := s
			for isU(j) {
				j++
			}
			for k := j; k >= s; k-- {
				if isW(k) {
					e = k + 1
					for isW(e) {
						e++
					}
					break
				}
			}
			// alternative 2: U+ W*
			if e < 0 && isU(s) {
				e = j
				for isW(e) {
					e++
				}
			}
			if e >= 0 {
				e += contraction(c, e)
			}
		}
		if e < 0 {
			if f[p]&fNumber != 0 {
				e = p + 1
				for e < n && e < p+3 && f[e]&fNumber != 0 {
					e++
				}
			} else {
				e = matchPunctAndSpace(c, f, p, true)
			}
		}
		ends = append(ends, e)
		p = e
	}
	return ends
}
