package main

import (
	"bytes"
	"context"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// TestHotSetFromTrace: `pipe hotset` builds a hot set from a run's route
// trace; the next `pipe run --hot-set` warm-starts from it and generates the
// same tokens as --warm-start=false; a trace of another model is refused.
func TestHotSetFromTrace(t *testing.T) {
	dir := t.TempDir()
	t.Setenv("XDG_CACHE_HOME", dir) // --hot-set auto of the runs below
	tr, hot := filepath.Join(dir, "run.route.csv"), filepath.Join(dir, "tiny.hot")
	base := []string{"--log-level", "error", "run", "-m", tinyModel, "-p", "The quick brown fox", "-n", "6", "--temp", "0",
		"--ignore-eos", "--moe-stream=true", "--cache-mb", "8"}
	runPipe(t, append(base, "--route-trace", tr, "--hot-set", "none")...)
	if out := runPipe(t, "--log-level", "error", "hotset", "-m", tinyModel, "--route-trace", tr, "-o", hot); strings.TrimSpace(out) != hot {
		t.Fatalf("hotset printed %q, want %q", out, hot)
	}
	csv := func(name string, args ...string) (string, string) {
		p := filepath.Join(dir, name+".csv")
		text := runPipe(t, append(append(base, "--csv", p, "--hot-set", hot), args...)...)
		b, err := os.ReadFile(p)
		if err != nil {
			t.Fatal(err)
		}
		return text, string(b)
	}
	warmText, warm := csv("warm")
	if !strings.Contains(warm, " warm_start=1") || !strings.Contains(warm, " ttft_ms=") {
		t.Errorf("run with the built hot set: no warm start in the trailer:\n%s", warm)
	}
	offText, off := csv("off", "--warm-start=false")
	if !strings.Contains(off, " warm_start=0") || offText != warmText {
		t.Errorf("--warm-start=false: trailer %q, text %q vs %q", off[strings.LastIndex(off, "#"):], offText, warmText)
	}
	var out, errb bytes.Buffer
	code := run(context.Background(), []string{"hotset", "-m", tinyModel, "--route-trace", "../../tools/replay/testdata/gemma.route.csv", "-o", hot}, &out, &errb)
	if code == 0 || !strings.Contains(errb.String(), "recorded on another model") {
		t.Errorf("trace of another model: exit %d, stderr %q", code, errb.String())
	}
}
