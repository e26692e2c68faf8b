package kernels

import (
	"bufio"
	"bytes"
	"encoding/binary"
	"encoding/hex"
	"os"
	"os/exec"
	"regexp"
	"strings"
	"testing"
)

// fusedARM64 reports whether the AArch64 instruction word w is a fused
// multiply-add of any kind: the scalar FMADD/FMSUB/FNMADD/FNMSUB class, the
// vector FMLA/FMLS and their by-element forms.
func fusedARM64(w uint32) bool {
	return w&0x5f000000 == 0x1f000000 || // FP data-processing, 3 sources
		w&0x9f20fc00 == 0x0e20cc00 || // FMLA/FMLS Vd.<T> (single/double)
		w&0x9fa0fc00 == 0x0e400c00 || // FMLA/FMLS Vd.<T> (half)
		w&0x9f80b400 == 0x0f801000 || // FMLA/FMLS Vd.<T>, Vm.<Ts>[i]
		w&0x9fc0b400 == 0x0f001000 || // same, half
		w&0xdf80b400 == 0x5f801000 // FMLA/FMLS scalar by element
}

// expReplicas are the assembly functions whose exponential is math.Exp's
// arm64 code (exp_arm64.s): archExp fuses its polynomial steps, so they
// must, in float64 and nowhere else (fusedF64Vector).
var expReplicas = map[string]bool{
	"github.com/pipe-engine/pipe/kernels.swiGLUNEON":   true,
	"github.com/pipe-engine/pipe/kernels.siluNEON":     true,
	"github.com/pipe-engine/pipe/kernels.expShiftNEON": true,
	"github.com/pipe-engine/pipe/kernels.expF64NEON":   true,
}

// fusedF64Vector reports whether w is FMLA or FMLS Vd.2D, Vn.2D, Vm.2D.
func fusedF64Vector(w uint32) bool { return w&0xffe0fc00 == 0x4e60cc00 || w&0xffe0fc00 == 0x4ee0cc00 }

// TestNoFusedMultiplyAdd builds this package for arm64 (Go fuses x*y+z
// into one instruction there unless an explicit float32() conversion
// forbids it) and fails if the machine code of any function, compiled Go or
// hand-written assembly (including the WORD-encoded instructions), holds a
// fused multiply-add: the package's rounding order forbids them. The one
// exception is the float64 vector FMLA/FMLS of the math.Exp replicas
// (expReplicas).
func TestNoFusedMultiplyAdd(t *testing.T) {
	if testing.Short() {
		t.Skip("compiles the package; skipped in -short runs")
	}
	goBin, err := exec.LookPath("go")
	if err != nil {
		t.Skip("go tool not in PATH")
	}
	cmd := exec.Command(goBin, "build", "-gcflags=-S", "-asmflags=-S", "-o", os.DevNull, ".")
	cmd.Env = append(os.Environ(), "GOOS=linux", "GOARCH=arm64", "CGO_ENABLED=0")
	out, err := cmd.CombinedOutput()
	if err != nil {
		t.Fatalf("go build for arm64: %v\n%s", err, out)
	}
	funcs, words := 0, 0
	for name, code := range textSymbols(t, out) {
		funcs++
		for i := 0; i+4 <= len(code); i += 4 {
			words++
			if w := binary.LittleEndian.Uint32(code[i:]); fusedARM64(w) && !(expReplicas[name] && fusedF64Vector(w)) {
				t.Errorf("%s+%#x: fused multiply-add %#08x", name, i, w)
			}
		}
	}
	if funcs < 20 || !bytes.Contains(out, []byte("dotQ8_0NEON")) {
		t.Fatalf("listing has %d functions (%d words), no dotQ8_0NEON: not the expected build", funcs, words)
	}
	fused := regexp.MustCompile(`(?m)^\s+0x[0-9a-f]+ \d+ \(([^)]*)\)\s+(V?F(N)?M(ADD|SUB|LA|LS)[SD]?)\b`)
	for _, m := range fused.FindAllSubmatch(out, -1) {
		t.Errorf("fused %s at %s", m[2], m[1])
	}
}

// textSymbols collects the machine code hex dumps of the STEXT symbols in a
// -S listing.
func textSymbols(t *testing.T, listing []byte) map[string][]byte {
	syms := map[string][]byte{}
	dump := regexp.MustCompile(`^\t0x[0-9a-f]{4}((?: [0-9a-f]{2}){1,16})(?:  |$)`)
	cur := ""
	sc := bufio.NewScanner(bytes.NewReader(listing))
	sc.Buffer(nil, 1<<20)
	for sc.Scan() {
		line := sc.Text()
		if !strings.HasPrefix(line, "\t") {
			cur = ""
			if f := strings.Fields(line); len(f) > 1 && f[1] == "STEXT" {
				cur = f[0]
			}
			continue
		}
		m := dump.FindStringSubmatch(line)
		if cur == "" || m == nil {
			continue
		}
		b, err := hex.DecodeString(strings.ReplaceAll(m[1], " ", ""))
		if err != nil {
			t.Fatalf("bad hex dump line %q: %v", line, err)
		}
		syms[cur] = append(syms[cur], b...)
	}
	return syms
}
