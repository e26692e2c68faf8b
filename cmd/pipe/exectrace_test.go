package main

import (
	"bytes"
	"os"
	"path/filepath"
	"regexp"
	"testing"
)

// TestExecTraceWritten: --exec-trace writes a Go execution trace of the run
// (the runtime's header, then its event batches), closed before pipe exits.
func TestExecTraceWritten(t *testing.T) {
	out := filepath.Join(t.TempDir(), "run.trace")
	runPipe(t, "--log-level", "error", "run", "-m", tinyModel, "-n", "3", "--temp", "0", "--moe-stream=true", "--exec-trace", out)
	b, err := os.ReadFile(out)
	if err != nil {
		t.Fatalf("no trace written: %v", err)
	}
	header := regexp.MustCompile(`^go 1\.[0-9]+ trace\x00+`)
	h := header.Find(b)
	if h == nil {
		t.Fatalf("not a Go execution trace: starts %q", b[:min(len(b), 24)])
	}
	if len(b) < len(h)+1024 || bytes.Count(b[len(h):], []byte{0}) == len(b)-len(h) {
		t.Fatalf("the trace holds no events: %d bytes after its header", len(b)-len(h))
	}
}
