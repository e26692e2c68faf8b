package kernels

import (
	"os"
	"testing"
)

// TestImplementationWanted lets CI name the kernel set a run must use
// (PIPE_KERNELS=sdot, neon, avx2 or purego), so a run meant for one set
// cannot silently test another (e.g. an emulator without the dot product).
func TestImplementationWanted(t *testing.T) {
	want := os.Getenv("PIPE_KERNELS")
	if want == "" {
		t.Skip("PIPE_KERNELS not set")
	}
	if got := Implementation(); got != want {
		t.Fatalf("kernel set in use is %q, PIPE_KERNELS wants %q", got, want)
	}
}
