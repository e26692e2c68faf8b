// Package size parses the memory sizes that flags take (--cache-mb,
// --mem-cap): a number with an optional binary unit. It is a leaf: every
// command and package that reads a size uses it.
package size

import (
	"errors"
	"fmt"
	"strconv"
	"strings"
)

// ErrSize marks a size that cannot be parsed or is out of range.
var ErrSize = errors.New("bad size")

// Parse reads a memory size: plain bytes, or a number with a K, M, G or T
// suffix (binary units; an optional trailing B or iB), e.g. 8G, 512M,
// 1.5GiB, 1073741824. It must be above 0 and below 4 EiB.
func Parse(s string) (int64, error) {
	t := strings.TrimSpace(strings.ToUpper(s))
	t = strings.TrimSuffix(strings.TrimSuffix(t, "B"), "I")
	mult := int64(1)
	if n := len(t); n > 0 {
		switch t[n-1] {
		case 'K':
			mult = 1 << 10
		case 'M':
			mult = 1 << 20
		case 'G':
			mult = 1 << 30
		case 'T':
			mult = 1 << 40
		}
		if mult > 1 {
			t = t[:n-1]
		}
	}
	v, err := strconv.ParseFloat(t, 64)
	if b := v * float64(mult); err != nil || !(v > 0) || !(b < 1<<62) {
		return 0, fmt.Errorf("%w %q (want e.g. 8G, 512M, 1073741824; at most 4 EiB)", ErrSize, s)
	}
	return int64(v * float64(mult)), nil
}

// MaxMiB bounds a plain number of MiB (ParseMiB): 8 EiB in bytes.
const MaxMiB = 1 << 43

// ParseMiB reads a size whose plain numbers are MiB (0..MaxMiB; 0 is
// allowed) and which otherwise is a size with a unit as Parse reads it.
func ParseMiB(s string) (int64, error) {
	if mb, err := strconv.ParseInt(s, 10, 64); err == nil {
		if mb < 0 || mb > MaxMiB {
			return 0, fmt.Errorf("%w %s: want MiB in 0..2^43 or a size like 6G", ErrSize, s)
		}
		return mb << 20, nil
	}
	return Parse(s)
}
