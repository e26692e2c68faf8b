package main

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"net/http/httptest"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/rs/zerolog"

	"github.com/pipe-engine/pipe/decode"
	"github.com/pipe-engine/pipe/model"
	"github.com/pipe-engine/pipe/sample"
	"github.com/pipe-engine/pipe/serve"
	"github.com/pipe-engine/pipe/stages"
)

// TestBenchClients: pipe bench --clients 2 --url against pipe serve with 2
// slots prints the summary and a line per client; load mode without --url
// is a flag error.
func TestBenchClients(t *testing.T) {
	const tiny = "../../testdata/golden/models/tiny-qwen3moe-Q8_0.gguf"
	m, err := decode.Open(context.Background(), decode.Options{
		Engine: stages.Config{Path: tiny, IO: stages.IOConfig{Lanes: 2}, Cache: stages.CacheConfig{Bytes: 4 << 20, Policy: "lru"},
			Threads: 2, Log: zerolog.Nop()},
		KV: model.KVF32, Ctx: 128,
	})
	if err != nil {
		t.Fatal(err)
	}
	defer m.Close()
	srv, err := serve.New(serve.Options{Model: m, ModelID: "tiny", Ctx: 128, Parallel: 2, Log: zerolog.Nop(),
		Sampling: sample.Params{Temp: 0, TopP: 1, RepeatPenalty: 1}})
	if err != nil {
		t.Fatal(err)
	}
	defer srv.Close()
	hs := httptest.NewServer(srv.Handler())
	defer hs.Close()
	var out, errb bytes.Buffer
	if code := run(context.Background(), []string{"bench", "--clients", "2", "--url", hs.URL, "-n", "3", "-p", "hello"}, &out, &errb); code != 0 {
		t.Fatalf("exit %d: %s", code, errb.String())
	}
	if s := out.String(); !strings.HasPrefix(s, "2 clients × 3 tokens: aggregate ") || !strings.Contains(s, "\nclient 1: 3 tokens, TTFT ") {
		t.Fatalf("output %q", s)
	}
	out.Reset()
	errb.Reset()
	if code := run(context.Background(), []string{"bench", "--clients", "2"}, &out, &errb); code == 0 || !strings.Contains(errb.String(), "--url") {
		t.Fatalf("no --url: exit %d, %q", code, errb.String())
	}
	// --client-prompts: client i sends line i; the JSON report carries each
	// client's text, which is the greedy text of its own prompt
	dir := t.TempDir()
	prompts, empty := filepath.Join(dir, "prompts.txt"), filepath.Join(dir, "empty.txt")
	if err := errors.Join(os.WriteFile(prompts, []byte("hello\n\nThe village\n"), 0o644), os.WriteFile(empty, []byte("\n"), 0o644)); err != nil {
		t.Fatal(err)
	}
	texts := func(args ...string) []string {
		t.Helper()
		out.Reset()
		args = append([]string{"bench", "--url", hs.URL, "-n", "3", "--format", "json"}, args...)
		if code := run(context.Background(), args, &out, &errb); code != 0 {
			t.Fatalf("%v: exit %d: %s", args, code, errb.String())
		}
		var rep struct{ Clients []struct{ Text string } }
		if err := json.Unmarshal(out.Bytes(), &rep); err != nil {
			t.Fatal(err)
		}
		var ts []string
		for _, c := range rep.Clients {
			ts = append(ts, c.Text)
		}
		return ts
	}
	both := texts("--clients", "2", "--client-prompts", prompts)
	if a, b := texts("--clients", "1", "-p", "hello"), texts("--clients", "1", "-p", "The village"); len(both) != 2 || both[0] != a[0] || both[1] != b[0] || a[0] == b[0] {
		t.Fatalf("--client-prompts texts %q; alone %q and %q", both, a, b)
	}
	errb.Reset()
	if code := run(context.Background(), []string{"bench", "--clients", "1", "--url", hs.URL, "--client-prompts", empty}, &out, &errb); code == 0 || !strings.Contains(errb.String(), "--client-prompts") {
		t.Fatalf("empty --client-prompts: exit %d, %q", code, errb.String())
	}
}
