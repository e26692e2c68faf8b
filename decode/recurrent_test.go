package decode

import (
	"context"
	"path/filepath"
	"slices"
	"testing"

	"github.com/rs/zerolog"

	"github.com/pipe-engine/pipe/model"
	"github.com/pipe-engine/pipe/model/gen"
	"github.com/pipe-engine/pipe/stages"
)

// TestReuseRecurrent: with recurrent layers (qwen35moe) Reuse keeps the
// cache when the new prompt extends everything in it, and generation then
// continues as an uninterrupted run; a prompt that leaves the cached
// sequence part way starts over (Reuse returns 0) and generates what a
// fresh session does.
func TestReuseRecurrent(t *testing.T) {
	path := filepath.Join(t.TempDir(), "q35.gguf")
	if _, err := gen.GenerateFile(context.Background(), gen.Options{Preset: "qwen35moe-tiny", Quant: "Q8_0", Seed: 5, RoutingSkew: gen.DefaultRoutingSkew}, path); err != nil {
		t.Fatal(err)
	}
	m, err := Open(context.Background(), Options{
		Engine: stages.Config{Path: path, IO: stages.IOConfig{Lanes: 2}, Cache: stages.CacheConfig{Bytes: 1 << 20, Policy: "lru"},
			Threads: 2, Log: zerolog.Nop()},
		KV: model.KVF32, Ctx: 96,
	})
	if err != nil {
		t.Fatal(err)
	}
	defer m.Close()
	ctx := context.Background()
	gen := func(s *Session, ids []int32, n int) []int32 {
		t.Helper()
		res, err := s.Generate(ctx, ids, GenOptions{MaxTokens: n, IgnoreEOS: true}, nil)
		if err != nil {
			t.Fatal(err)
		}
		return res.Tokens
	}
	session := func() *Session {
		s, err := m.NewSession(SessionOptions{Sampling: greedy})
		if err != nil {
			t.Fatal(err)
		}
		return s
	}
	prompt := []int32{300, 32, 113, 117, 105, 278, 293, 372, 110, 287, 111, 120}
	whole := gen(session(), prompt, 12)

	s := session()
	first := gen(s, prompt, 6)
	cached := len(s.Tokens())
	full := append(append(slices.Clone(prompt), first...), whole[6:8]...)
	if k := s.Reuse(full); k != cached {
		t.Fatalf("Reuse of an extension kept %d tokens, want all %d", k, cached)
	}
	if err := s.SetSampling(greedy); err != nil {
		t.Fatal(err)
	}
	rest := gen(s, full[cached:], len(prompt)+len(whole)-len(full))
	if got := append(full[len(prompt):], rest...); !slices.Equal(got, whole) {
		t.Fatalf("continued after Reuse: %v\nuninterrupted: %v", got, whole)
	}
	if k := s.Reuse(s.Tokens()); k != 0 {
		t.Fatalf("Reuse of exactly the cached tokens kept %d: one must be fed again, which a recurrent state cannot", k)
	}

	other := append(slices.Clone(prompt[:5]), 400, 401, 402)
	if k := s.Reuse(other); k != 0 {
		t.Fatalf("Reuse of a diverging prompt kept %d tokens: a recurrent state cannot be rolled back", k)
	}
	if err := s.SetSampling(greedy); err != nil {
		t.Fatal(err)
	}
	if got, want := gen(s, other, 8), gen(session(), other, 8); !slices.Equal(got, want) {
		t.Fatalf("after starting over: %v, fresh session: %v", got, want)
	}
}
