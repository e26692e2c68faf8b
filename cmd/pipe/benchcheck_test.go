package main

import (
	"context"
	"path/filepath"
	"strings"
	"testing"
)

// TestBenchChecks: bench refuses a bad matrix before starting a child,
// warns when an axis has no effect in the mode, and fails with the child's
// error when every run of a configuration fails.
func TestBenchChecks(t *testing.T) {
	t.Setenv(mainEnv, "1") // children are this test binary acting as pipe
	dir := t.TempDir()
	const tiny = "../../testdata/golden/models/tiny-qwen3moe-Q8_0.gguf"
	bench := func(args ...string) (int, string) {
		var out syncBuffer
		base := []string{"--log-format", "json", "bench", "-m", tiny, "-n", "2", "--repeat", "1", "--out-dir", filepath.Join(dir, "b")}
		code := run(context.Background(), append(base, args...), &out, &out)
		return code, out.String()
	}
	code, out := bench("--vary", "cache-mb=4,lots")
	if code == 0 || !strings.Contains(out, "cache-mb=lots") || strings.Contains(out, "bench_run") {
		t.Fatalf("bad --vary value: exit %d, want a failure before any run:\n%s", code, out)
	}
	code, out = bench("--vary", "cache-mb=2,4", "--", "--moe-stream=false")
	if code != 0 || strings.Count(out, `"event":"bench_vary_no_effect"`) != 2 {
		t.Fatalf("cache-mb with mmap: exit %d, want two bench_vary_no_effect warnings:\n%s", code, out)
	}
	// A policy name is a flag error, refused before any run.
	code, out = bench("--vary", "cache-policy=lru,bogus")
	if code == 0 || !strings.Contains(out, "cache-policy=bogus") || !strings.Contains(out, "unknown policy") || strings.Contains(out, "bench_run") {
		t.Fatalf("bad --cache-policy value: exit %d, want a failure before any run:\n%s", code, out)
	}
	// More experts than the model has is known only once it is read.
	code, out = bench("--vary", "n-expert-used=0,999")
	if code == 0 || !strings.Contains(out, "n-expert-used=999: every run failed") || !strings.Contains(out, "exceeds the model's") {
		t.Fatalf("a configuration whose runs all fail: exit %d:\n%s", code, out)
	}
	// Its numbers do not apply: null in the JSON table, never -1.
	if !strings.Contains(out, `"steady_tok_s":null`) || !strings.Contains(out, `"ttft_ms":null`) || strings.Contains(out, `:-1,`) {
		t.Fatalf("the failed configuration's JSON numbers are not null:\n%s", out)
	}
}
