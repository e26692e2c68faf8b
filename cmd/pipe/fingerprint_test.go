package main

import (
	"crypto/sha256"
	"flag"
	"fmt"
	"os"
	"path/filepath"
	"runtime"
	"sort"
	"strings"
	"testing"
)

var updateFingerprints = flag.Bool("update-fingerprints", false,
	"rewrite testdata/logits.sha256 from this machine's logits (do it on amd64 and check arm64 agrees)")

const fingerprintFile = "testdata/logits.sha256"

// TestLogitsFingerprint: the teacher-forced logits of one golden prompt per
// tiny model hash to the values in testdata/logits.sha256, which were made
// on amd64. Every kernel implementation is bit-identical to the pure-Go
// reference and no float operation may be fused, so the same bits come out
// on every architecture and kernel set (CI runs this under arm64 emulation
// with both arm64 kernel sets). A deliberate change of the numerics
// regenerates the file with -update-fingerprints.
func TestLogitsFingerprint(t *testing.T) {
	dirs, err := filepath.Glob("../../testdata/golden/runs/tiny-*")
	if err != nil || len(dirs) == 0 {
		t.Fatalf("no golden runs: %v", err)
	}
	got := map[string]string{}
	for _, dir := range dirs {
		runs, _ := filepath.Glob(filepath.Join(dir, "*__ref.json"))
		if len(runs) == 0 {
			t.Fatalf("%s: no ref runs", dir)
		}
		sort.Strings(runs)
		g := loadGolden(t, runs[0])
		key := filepath.Base(dir) + "/" + g.PromptID
		lo := filepath.Join(t.TempDir(), "logits.bin")
		args := []string{"--log-level", "error", "run", "-m", filepath.Join("../../testdata/golden", g.ModelFile),
			"-n", fmt.Sprint(len(g.GeneratedTokens)), "--temp", "0", "--kv-type", "f32", "--ignore-eos",
			"--force-tokens", joinInts(g.GeneratedTokens), "--logits-out", lo, "-p", g.UserText}
		if g.Chat {
			args = append(args, "--chat")
		}
		runPipe(t, args...)
		raw, err := os.ReadFile(lo)
		if err != nil || len(raw) == 0 {
			t.Fatalf("%s: no logits written: %v", key, err)
		}
		got[key] = fmt.Sprintf("%x", sha256.Sum256(raw))
	}
	if *updateFingerprints {
		writeFingerprints(t, got)
		return
	}
	want := readFingerprints(t)
	for key, sum := range got {
		switch w, ok := want[key]; {
		case !ok:
			t.Errorf("%s: no fingerprint in %s (run with -update-fingerprints on amd64)", key, fingerprintFile)
		case w != sum:
			t.Errorf("%s on %s: logits sha256 %s, amd64 gave %s", key, runtime.GOARCH, sum, w)
		}
	}
	if len(want) != len(got) {
		t.Errorf("%s has %d entries, %d models tested", fingerprintFile, len(want), len(got))
	}
}

func readFingerprints(t *testing.T) map[string]string {
	b, err := os.ReadFile(fingerprintFile)
	if err != nil {
		t.Fatal(err)
	}
	m := map[string]string{}
	for _, line := range strings.Split(strings.TrimSpace(string(b)), "\n") {
		f := strings.Fields(line)
		if len(f) != 2 {
			t.Fatalf("%s: bad line %q", fingerprintFile, line)
		}
		m[f[1]] = f[0]
	}
	return m
}

func writeFingerprints(t *testing.T, m map[string]string) {
	keys := make([]string, 0, len(m))
	for k := range m {
		keys = append(keys, k)
	}
	sort.Strings(keys)
	var b strings.Builder
	for _, k := range keys {
		fmt.Fprintf(&b, "%s  %s\n", m[k], k)
	}
	if err := os.MkdirAll(filepath.Dir(fingerprintFile), 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(fingerprintFile, []byte(b.String()), 0o644); err != nil {
		t.Fatal(err)
	}
	t.Logf("wrote %s (%d models, %s)", fingerprintFile, len(m), runtime.GOARCH)
}
