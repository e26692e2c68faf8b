//go:build !linux

package affinity

import "testing"

func threadCPUs(t *testing.T, tid int) []int {
	t.Fatal("no thread affinity on this OS")
	return nil
}
