//go:build arm64 && !purego

package kernels

import (
	"strings"
	"testing"
)

func TestArm64Key(t *testing.T) {
	for in, want := range map[string]string{
		"processor\t: 0\nBogoMIPS\t: 50.00\nCPU implementer\t: 0x41\nCPU architecture: 8\nCPU variant\t: 0x1\nCPU part\t: 0xd0c\n\nprocessor\t: 1\nCPU implementer\t: 0x51\nCPU part\t: 0x001\n": "arm64-0x41-0xd0c",
		"CPU implementer : 0x61\nCPU part : 0x../x\n": "arm64-0x61-0x___x",
		"processor : 0\n":  "arm64-unknown",
		"\x00\xff garbage": "arm64-unknown",
	} {
		if got := arm64Key(strings.NewReader(in)); got != want {
			t.Errorf("%q: %q, want %q", in, got, want)
		}
	}
}
