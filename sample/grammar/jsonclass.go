package grammar

import (
	"fmt"
	"slices"
	"strings"
)

// A pattern describes a JSON string's decoded text, but its rule matches
// the raw JSON text between the quotes; llama.cpp's conversion lets a class
// or `.` take '"', '\' or a control character there, which would end the
// string or break the JSON. pipe keeps them out (jsonSafeDot, jsonSafeClass),
// so an answer always parses; the price is that a pattern cannot make the
// model write such a character (escaped or not).

// jsonSafeDot is `.` inside a JSON string.
const jsonSafeDot = `[^"\\\x7F\x00-\x1F]`

type cpRange struct{ lo, hi uint32 }

// forbidden are the code points a JSON string cannot hold unescaped.
var forbidden = []cpRange{{0, 0x1F}, {'"', '"'}, {'\\', '\\'}, {0x7F, 0x7F}}

// jsonSafeClass rewrites a GBNF character class ("[...]" or "[^...]") to
// exclude the forbidden code points.
func jsonSafeClass(class string) (string, error) {
	g, err := Parse("root ::= " + class)
	if err != nil {
		return "", err
	}
	el := g.elems[g.start[g.root]:]
	if el[0].k == kCharNot {
		inner := strings.TrimPrefix(class[1:len(class)-1], "^")
		return `[^` + inner + `"\\\x7F\x00-\x1F]`, nil
	}
	var rs []cpRange
	for i := 0; el[i].k == kChar || el[i].k == kCharAlt; {
		r := cpRange{el[i].v, el[i].v}
		i++
		if el[i].k == kRngUpper {
			r.hi = el[i].v
			i++
		}
		rs = append(rs, r)
	}
	for _, f := range forbidden {
		rs = subtract(rs, f)
	}
	if len(rs) == 0 {
		return "", fmt.Errorf("class %s holds only characters a JSON string cannot hold unescaped", class)
	}
	slices.SortFunc(rs, func(a, b cpRange) int { return int(a.lo) - int(b.lo) })
	var b strings.Builder
	b.WriteByte('[')
	for _, r := range rs {
		fmt.Fprintf(&b, `\U%08X`, r.lo)
		if r.hi != r.lo {
			fmt.Fprintf(&b, `-\U%08X`, r.hi)
		}
	}
	b.WriteByte(']')
	return b.String(), nil
}

func subtract(rs []cpRange, f cpRange) []cpRange {
	var out []cpRange
	for _, r := range rs {
		if r.hi < f.lo || r.lo > f.hi {
			out = append(out, r)
			continue
		}
		if r.lo < f.lo {
			out = append(out, cpRange{r.lo, f.lo - 1})
		}
		if r.hi > f.hi {
			out = append(out, cpRange{f.hi + 1, r.hi})
		}
	}
	return out
}
