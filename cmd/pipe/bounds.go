package main

import (
	"fmt"

	"github.com/pipe-engine/pipe/stages"
)

// maxPositions bounds -n and -c: more positions than any model's context,
// so only a mistake or an overflowing number meets it (and sizes computed
// from it cannot overflow).
const maxPositions = 1 << 30

// checkThreads checks -t: 0 (the number of CPUs) up to stages.MaxThreads.
func checkThreads(t int) error {
	if t < 0 || t > stages.MaxThreads() {
		return fmt.Errorf("%w: -t %d must be in 0..%d (0 = the number of CPUs)", errFlag, t, stages.MaxThreads())
	}
	return nil
}

// checkPositions checks a count of positions (-n, -c) named flag: lo up to
// maxPositions.
func checkPositions(flag string, v, lo int) error {
	if v < lo || v > maxPositions {
		return fmt.Errorf("%w: %s %d must be in %d..%d", errFlag, flag, v, lo, maxPositions)
	}
	return nil
}
