package main

import (
	"fmt"
)

// maxPositions bounds -n and -c: more positions than any model's context,
// so only a mistake or an overflowing number meets it (and sizes computed
// from it cannot overflow).
const maxPositions = 1 << 30

// checkPositions checks a count of positions (-n, -c) named flag: lo up to
// maxPositions.
func checkPositions(flag string, v, lo int) error {
	if v < lo || v > maxPositions {
		return fmt.Errorf("%w: %s %d must be in %d..%d", errFlag, flag, v, lo, maxPositions)
	}
	return nil
}
