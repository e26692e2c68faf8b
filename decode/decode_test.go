package decode

import (
	"context"
	"encoding/json"
	"errors"
	"os"
	"slices"
	"strings"
	"testing"

	"github.com/rs/zerolog"
	"go.uber.org/goleak"

	"github.com/pipe-engine/pipe/model"
	"github.com/pipe-engine/pipe/sample"
	"github.com/pipe-engine/pipe/stages"
)

func TestMain(m *testing.M) { goleak.VerifyTestMain(m) }

const tinyQ8 = "../testdata/golden/models/tiny-qwen3moe-Q8_0.gguf"

// golden is the part of a llama.cpp golden run the tests use.
type golden struct {
	Chat            bool    `json:"chat"`
	UserText        string  `json:"user_text"`
	PromptTokens    []int32 `json:"prompt_tokens"`
	GeneratedTokens []int32 `json:"generated_tokens"`
}

func loadGolden(t *testing.T, name string) golden {
	t.Helper()
	b, err := os.ReadFile("../testdata/golden/runs/tiny-qwen3moe-Q8_0/" + name + "__ref.json")
	if err != nil {
		t.Fatal(err)
	}
	var g golden
	if err := json.Unmarshal(b, &g); err != nil {
		t.Fatal(err)
	}
	return g
}

func open(t *testing.T, mode stages.StreamMode, ctxLen int) *Model {
	t.Helper()
	m, err := Open(context.Background(), Options{
		Engine: stages.Config{Path: tinyQ8, IO: stages.IOConfig{Lanes: 2}, Cache: stages.CacheConfig{Bytes: 4 << 20, Policy: "lru"},
			Stream: mode, Threads: 2, Log: zerolog.Nop()},
		KV: model.KVF32, Ctx: ctxLen,
	})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		if err := m.Close(); err != nil {
			t.Error(err)
		}
	})
	return m
}

var greedy = sample.Params{Temp: 0, TopP: 1, RepeatPenalty: 1}

// TestGenerateGolden: the library loop reproduces llama.cpp's greedy
// continuations (plain and chat prompts), streaming and mmap'd, and the
// callback's texts add up to the streamed text with its final flush.
func TestGenerateGolden(t *testing.T) {
	for _, name := range []string{"p1_village", "chat0_weather"} {
		for _, mode := range []stages.StreamMode{stages.StreamOn, stages.StreamOff} {
			t.Run(name+"/"+string(mode), func(t *testing.T) {
				g := loadGolden(t, name)
				m := open(t, mode, 0)
				if m.Streaming() != (mode != stages.StreamOff) || m.Engine().Metrics().Counters.Streaming != m.Streaming() {
					t.Fatalf("mode %s: streaming %v, cache %v", mode, m.Streaming(), m.Engine().Metrics().Counters.Streaming)
				}
				ids, _, err := m.Encode(Prompt{Text: g.UserText, Chat: g.Chat})
				if err != nil {
					t.Fatal(err)
				}
				if !slices.Equal(ids, g.PromptTokens) {
					t.Fatalf("prompt tokens\n got %v\nwant %v", ids, g.PromptTokens)
				}
				s, err := m.NewSession(SessionOptions{Sampling: greedy})
				if err != nil {
					t.Fatal(err)
				}
				var text strings.Builder
				res, err := s.Generate(context.Background(), ids, GenOptions{MaxTokens: len(g.GeneratedTokens), IgnoreEOS: true},
					func(tk Token) error { text.WriteString(tk.Text); return nil })
				if err != nil {
					t.Fatal(err)
				}
				if res.Prefill <= 0 || res.Decode <= 0 {
					t.Errorf("prefill %v, decode %v: both passes take time", res.Prefill, res.Decode)
				}
				if !slices.Equal(res.Tokens, g.GeneratedTokens) || res.Stop != StopLength {
					t.Fatalf("generated %v (%v)\nwant %v", res.Tokens, res.Stop, g.GeneratedTokens)
				}
				st := m.Tokenizer().NewStream(false)
				var want strings.Builder
				for _, id := range res.Tokens {
					want.WriteString(st.Add(id))
				}
				want.WriteString(st.Flush())
				if text.String() != want.String() {
					t.Errorf("callback text %q, streamed %q", text.String(), want.String())
				}
				if got := len(s.Tokens()); got != len(ids)+len(res.Tokens) {
					t.Errorf("%d tokens in the KV cache, want %d", got, len(ids)+len(res.Tokens))
				}
			})
		}
	}
}

// TestStopReuse: a callback's ErrStop ends the generation without feeding
// that token; Reuse then keeps the shared prefix and generation continues
// exactly as an uninterrupted run would.
func TestStopReuse(t *testing.T) {
	g := loadGolden(t, "p1_village")
	m := open(t, stages.StreamOn, 64)
	s, err := m.NewSession(SessionOptions{Sampling: greedy})
	if err != nil {
		t.Fatal(err)
	}
	ctx := context.Background()
	n := 0
	res, err := s.Generate(ctx, g.PromptTokens, GenOptions{MaxTokens: 10}, func(Token) error {
		if n++; n == 3 {
			return ErrStop
		}
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	if res.Stop != StopCallback || len(res.Tokens) != 3 || len(s.Tokens()) != len(g.PromptTokens)+2 {
		t.Fatalf("stop %v, %d tokens, %d in KV", res.Stop, len(res.Tokens), len(s.Tokens()))
	}
	full := append(slices.Clone(g.PromptTokens), g.GeneratedTokens[:5]...)
	k := s.Reuse(full)
	if k != len(g.PromptTokens)+2 {
		t.Fatalf("Reuse kept %d tokens, want %d", k, len(g.PromptTokens)+2)
	}
	if err := s.SetSampling(greedy); err != nil {
		t.Fatal(err)
	}
	res, err = s.Generate(ctx, full[k:], GenOptions{MaxTokens: 4}, nil)
	if err != nil {
		t.Fatal(err)
	}
	if want := g.GeneratedTokens[5:9]; !slices.Equal(res.Tokens, want) {
		t.Fatalf("after Reuse generated %v, want %v", res.Tokens, want)
	}
	if res.PromptTokens != len(full)-k {
		t.Errorf("fed %d prompt tokens, want %d", res.PromptTokens, len(full)-k)
	}
}

// TestContext: MaxTokens < 0 fills the context; a prompt that cannot fit is
// ErrContextFull before anything runs.
func TestContext(t *testing.T) {
	g := loadGolden(t, "p1_village")
	m := open(t, stages.StreamOn, len(g.PromptTokens)+4)
	s, err := m.NewSession(SessionOptions{Sampling: greedy})
	if err != nil {
		t.Fatal(err)
	}
	res, err := s.Generate(context.Background(), g.PromptTokens, GenOptions{MaxTokens: -1, IgnoreEOS: true}, nil)
	if err != nil {
		t.Fatal(err)
	}
	if len(res.Tokens) != 4 || res.Stop != StopLength || s.Ctx() != len(g.PromptTokens)+4 {
		t.Fatalf("%d tokens (%v), ctx %d", len(res.Tokens), res.Stop, s.Ctx())
	}
	if _, err := s.Generate(context.Background(), []int32{1}, GenOptions{MaxTokens: 1}, nil); !errors.Is(err, model.ErrContextFull) {
		t.Fatalf("full context: err %v, want ErrContextFull", err)
	}
}

// TestChat: a second turn feeds only what it adds — the first turn's KV
// stays, the end of the first reply is closed — and replies are
// deterministic.
func TestChat(t *testing.T) {
	m := open(t, stages.StreamOn, 0)
	s, err := m.NewSession(SessionOptions{Sampling: greedy})
	if err != nil {
		t.Fatal(err)
	}
	ctx := context.Background()
	r1, err := s.Chat(ctx, "hello there", GenOptions{MaxTokens: 6}, nil)
	if err != nil {
		t.Fatal(err)
	}
	if s.Ctx() != DefaultCtx {
		t.Fatalf("chat session ctx %d, want %d", s.Ctx(), DefaultCtx)
	}
	first := slices.Clone(s.Tokens())
	r2, err := s.Chat(ctx, "what is the weather", GenOptions{MaxTokens: 6}, nil)
	if err != nil {
		t.Fatal(err)
	}
	all := s.Tokens()
	if !slices.Equal(all[:len(first)], first) {
		t.Fatal("the second turn rewrote the first turn's tokens")
	}
	end, ok := m.Tokenizer().EndOfTurn()
	added := all[len(first):]
	if !ok || (added[0] != end && !m.Tokenizer().IsEOG(added[0])) {
		t.Fatalf("second turn starts with %d, want the end of turn %d (%v)", added[0], end, ok)
	}
	if r2.PromptTokens >= len(first) || len(r1.Tokens) == 0 || len(r2.Tokens) == 0 {
		t.Fatalf("second turn fed %d tokens (first turn held %d); replies %d, %d", r2.PromptTokens, len(first), len(r1.Tokens), len(r2.Tokens))
	}
}
