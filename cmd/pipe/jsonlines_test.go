package main

import (
	"bytes"
	"context"
	"encoding/json"
	"path/filepath"
	"runtime"
	"strings"
	"testing"
)

// allJSON fails unless every line of out is one JSON object; it returns the
// objects.
func allJSON(t *testing.T, what string, out []byte) []map[string]any {
	t.Helper()
	var objs []map[string]any
	for _, line := range strings.Split(strings.TrimRight(string(out), "\n"), "\n") {
		var m map[string]any
		if err := json.Unmarshal([]byte(line), &m); err != nil {
			t.Fatalf("%s: a line is not a JSON object: %q\nall output:\n%s", what, line, out)
		}
		objs = append(objs, m)
	}
	return objs
}

func hasEvent(objs []map[string]any, event string) bool {
	for _, o := range objs {
		if o["event"] == event {
			return true
		}
	}
	return false
}

// TestGenBenchJSONLines: `pipe gen … 2>&1` and `pipe bench … 2>&1` (stdout
// and stderr into one pipe, no terminal) are JSON lines only — progress,
// per-run lines and bench's table included. The model is qwen3-tiny's first
// layer: the lines do not depend on the depth, and its four layers'
// quantization took most of the test's 184 s under -race at load 37.
func TestGenBenchJSONLines(t *testing.T) {
	dir := t.TempDir()
	var out syncBuffer
	model := filepath.Join(dir, "t.gguf")
	if code := run(context.Background(), []string{"gen", "--preset", "qwen3-tiny", "--layers", "1", "--out", model, "--progress"}, &out, &out); code != 0 {
		t.Fatalf("gen: exit %d\n%s", code, out.String())
	}
	if objs := allJSON(t, "gen", []byte(out.String())); !hasEvent(objs, "gen_done") {
		t.Fatalf("gen: no gen_done event:\n%s", out.String())
	}

	t.Setenv(mainEnv, "1") // bench's children are this test binary acting as pipe
	out.Reset()
	args := []string{"bench", "-m", model, "-n", "2", "--repeat", "1", "--out-dir", filepath.Join(dir, "b"), "--vary", "io-threads=1,2"}
	if code := run(context.Background(), args, &out, &out); code != 0 {
		t.Fatalf("bench: exit %d\n%s", code, out.String())
	}
	objs := allJSON(t, "bench", []byte(out.String()))
	if !hasEvent(objs, "bench_run") || !hasEvent(objs, "bench_done") {
		t.Fatalf("bench: want bench_run and bench_done events:\n%s", out.String())
	}
	table := false
	for _, o := range objs {
		_, table = o["configs"]
		if table {
			break
		}
	}
	if !table {
		t.Fatalf("bench: no JSON table on stdout:\n%s", out.String())
	}
}

// TestErrorsAsJSON: with a JSON log, the error that ends a run — a bad flag
// or a failure after parsing — is a JSON event too.
func TestErrorsAsJSON(t *testing.T) {
	for _, args := range [][]string{
		{"run", "-m", filepath.Join(t.TempDir(), "missing.gguf")},
		{"run", "-ngl", "99"},
		{"run", "--no-such-flag"},
		{"--log-format", "json", "bench", "--vary", "nonsense"},
	} {
		var out syncBuffer
		if code := run(context.Background(), args, &out, &out); code == 0 {
			t.Fatalf("%q: exit 0", args)
		}
		objs := allJSON(t, strings.Join(args, " "), []byte(out.String()))
		last := objs[len(objs)-1]
		if last["event"] != "error" || last["level"] != "error" || last["message"] == "" {
			t.Errorf("%q: last line %v, want an error event", args, last)
		}
	}
}

// TestVersion: --version names the build from debug.ReadBuildInfo.
func TestVersion(t *testing.T) {
	var out, errb bytes.Buffer
	if code := run(context.Background(), []string{"--version"}, &out, &errb); code != 0 {
		t.Fatalf("exit %d: %s", code, errb.String())
	}
	got := strings.TrimSpace(out.String())
	if !strings.HasPrefix(got, "pipe ") || !strings.Contains(got, runtime.Version()) || got != versionString() {
		t.Fatalf("--version printed %q, want %q", got, versionString())
	}
}
