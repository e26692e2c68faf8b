package grammar

import (
	"math"
	"strconv"
	"strings"
)

// minMaxInt writes a rule for the integers lo..hi (math.MinInt64 / MaxInt64:
// unbounded), llama.cpp's build_min_max_int.
func minMaxInt(lo, hi int64, out *strings.Builder, decimalsLeft int, top bool) {
	hasMin, hasMax := lo != math.MinInt64, hi != math.MaxInt64
	if hasMin && hasMax {
		bothBounds(lo, hi, out, decimalsLeft)
		return
	}
	less := max(decimalsLeft-1, 1)
	switch {
	case hasMin:
		minOnly(lo, out, decimalsLeft, less, top)
	case hasMax && hi >= 0:
		if top {
			out.WriteString(`"-" [1-9] `)
			moreDigits(out, 0, less)
			out.WriteString(" | ")
		}
		minMaxInt(0, hi, out, decimalsLeft, true)
	case hasMax:
		out.WriteString(`"-" (`)
		minMaxInt(-hi, math.MaxInt64, out, decimalsLeft, false)
		out.WriteString(")")
	}
}

func bothBounds(lo, hi int64, out *strings.Builder, decimalsLeft int) {
	if lo < 0 && hi < 0 {
		out.WriteString(`"-" (`)
		minMaxInt(-hi, -lo, out, decimalsLeft, true)
		out.WriteString(")")
		return
	}
	if lo < 0 {
		out.WriteString(`"-" (`)
		minMaxInt(0, -lo, out, decimalsLeft, true)
		out.WriteString(") | ")
		lo = 0
	}
	minS, maxS := strconv.FormatInt(lo, 10), strconv.FormatInt(hi, 10)
	for d := len(minS); d < len(maxS); d++ {
		uniformRange(out, minS, strings.Repeat("9", d))
		minS = "1" + strings.Repeat("0", d)
		out.WriteString(" | ")
	}
	uniformRange(out, minS, maxS)
}

func minOnly(lo int64, out *strings.Builder, decimalsLeft, less int, top bool) {
	switch {
	case lo < 0:
		out.WriteString(`"-" (`)
		minMaxInt(math.MinInt64, -lo, out, decimalsLeft, false)
		out.WriteString(") | [0] | [1-9] ")
		moreDigits(out, 0, decimalsLeft-1)
	case lo == 0 && top:
		out.WriteString("[0] | [1-9] ")
		moreDigits(out, 0, less)
	case lo == 0:
		moreDigits(out, 1, decimalsLeft)
	case lo <= 9:
		c := byte('0' + lo)
		start := byte('0')
		if top {
			start = '1'
		}
		if c > start {
			digitRange(out, start, c-1)
			out.WriteString(" ")
			moreDigits(out, 1, less)
			out.WriteString(" | ")
		}
		digitRange(out, c, '9')
		out.WriteString(" ")
		moreDigits(out, 0, less)
	default:
		s := strconv.FormatInt(lo, 10)
		c := s[0]
		if c > '1' {
			start := byte('0')
			if top {
				start = '1'
			}
			digitRange(out, start, c-1)
			out.WriteString(" ")
			moreDigits(out, len(s), less)
			out.WriteString(" | ")
		}
		digitRange(out, c, c)
		out.WriteString(" (")
		rest, _ := strconv.ParseInt(s[1:], 10, 64)
		minMaxInt(rest, math.MaxInt64, out, less, false)
		out.WriteString(")")
		if c < '9' {
			out.WriteString(" | ")
			digitRange(out, c+1, '9')
			out.WriteString(" ")
			moreDigits(out, len(s)-1, less)
		}
	}
}
