//go:build !linux

package affinity

import "testing"

func threadCPUs(t *testing.T, tid int) ([]int, bool) {
	t.Fatal("no thread affinity on this OS")
	return nil, false
}

// Current fails: this OS has no thread CPU affinity the engine uses.
func Current() ([]int, error) { return nil, ErrUnsupported }
