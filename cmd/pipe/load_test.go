package main

import (
	"bytes"
	"context"
	"net/http/httptest"
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
}
