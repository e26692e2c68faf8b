package quant

import (
	"os"
	"os/exec"
	"regexp"
	"testing"
)

// TestNoFusedMultiplyAdd compiles this package for arm64 (where Go fuses
// x*y+z into one instruction unless an explicit float32() conversion
// forbids it) and fails if any fused multiply-add survives. ggml-base is
// built without contraction, so a single fused operation would make
// Quantize/Dequantize differ from llama.cpp on arm64 while passing on amd64.
func TestNoFusedMultiplyAdd(t *testing.T) {
	if testing.Short() || raceEnabled {
		t.Skip("compiles the package; skipped in -short and -race runs")
	}
	goBin, err := exec.LookPath("go")
	if err != nil {
		t.Skip("go tool not in PATH")
	}
	cmd := exec.Command(goBin, "build", "-gcflags=-S", "-o", os.DevNull, ".")
	cmd.Env = append(os.Environ(), "GOOS=linux", "GOARCH=arm64", "CGO_ENABLED=0")
	out, err := cmd.CombinedOutput()
	if err != nil {
		t.Fatalf("go build for arm64: %v\n%s", err, out)
	}
	if len(out) < 1000 {
		t.Fatalf("no assembly listing produced (%d bytes)", len(out))
	}
	fused := regexp.MustCompile(`(?m)^\s+0x[0-9a-f]+ \d+ \(([^)]*)\)\s+(F(N)?M(ADD|SUB)[SD])\b`)
	for _, m := range fused.FindAllStringSubmatch(string(out), -1) {
		t.Errorf("fused %s at %s", m[2], m[1])
	}
}
