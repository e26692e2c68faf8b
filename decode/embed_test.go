package decode

import (
	"context"
	"encoding/json"
	"errors"
	"math"
	"os"
	"slices"
	"testing"
	"time"

	"github.com/rs/zerolog"

	"github.com/pipe-engine/pipe/model"
	"github.com/pipe-engine/pipe/stages"
)

// embedGolden is a testdata/golden/embeddings file: llama-server 3f545becc's
// /embedding answers for one token list on a tiny model, per pooling, raw
// (embd_normalize -1) and Euclidean-normalised (the default, 2; pooling
// none is never normalised).
type embedGolden struct {
	Model     string      `json:"model"`
	Tokens    []int32     `json:"tokens"`
	None      [][]float32 `json:"none"`
	Mean      [][]float32 `json:"mean"`
	CLS       [][]float32 `json:"cls"`
	Last      [][]float32 `json:"last"`
	MeanNorm2 [][]float32 `json:"mean_norm2"`
	CLSNorm2  [][]float32 `json:"cls_norm2"`
	LastNorm2 [][]float32 `json:"last_norm2"`
}

// rowsErr is the largest |got-want| over the rows, relative to the largest
// |want|.
func rowsErr(t *testing.T, got, want [][]float32) float64 {
	t.Helper()
	if len(got) != len(want) {
		t.Fatalf("%d rows, want %d", len(got), len(want))
	}
	diff, scale := 0.0, 0.0
	for i := range want {
		if len(got[i]) != len(want[i]) {
			t.Fatalf("row %d: %d floats, want %d", i, len(got[i]), len(want[i]))
		}
		for j, w := range want[i] {
			diff = max(diff, math.Abs(float64(got[i][j]-w)))
			scale = max(scale, math.Abs(float64(w)))
		}
	}
	return diff / scale
}

// TestEmbedGolden: the output-norm rows (pooling none) and the mean, cls
// and last poolings, raw and Euclidean-normalised, match llama-server's
// for qwen3moe's and gemma4's tiny models (gemma4's final soft-cap is a
// logit step, not applied to embeddings): relative to the largest |value|,
// 1e-5 on qwen3moe (measured ≤ 1e-5) and 1e-4 on gemma4 (measured ≤ 3.5e-5:
// ggml's F16-table GELU amplifies the summation-order differences, as in
// cmd/pipe's gemma4 golden test).
func TestEmbedGolden(t *testing.T) {
	for name, bound := range map[string]float64{"tiny-qwen3moe-F32": 1e-5, "tiny-gemma4-F32": 1e-4} {
		t.Run(name, func(t *testing.T) {
			b, err := os.ReadFile("../testdata/golden/embeddings/" + name + ".json")
			if err != nil {
				t.Fatal(err)
			}
			var g embedGolden
			if err := json.Unmarshal(b, &g); err != nil {
				t.Fatal(err)
			}
			m, err := Open(context.Background(), Options{
				Engine: stages.Config{Path: "../testdata/golden/models/" + name + ".gguf", IO: stages.IOConfig{Lanes: 2},
					Cache: stages.CacheConfig{Bytes: 4 << 20, Policy: "lru"}, Stream: stages.StreamOff, Threads: 2, Log: zerolog.Nop()},
				KV: model.KVF32,
			})
			if err != nil {
				t.Fatal(err)
			}
			defer m.Close()
			for _, c := range []struct {
				p         model.Pooling
				raw, norm [][]float32
			}{{model.PoolNone, g.None, nil}, {model.PoolMean, g.Mean, g.MeanNorm2}, {model.PoolCLS, g.CLS, g.CLSNorm2}, {model.PoolLast, g.Last, g.LastNorm2}} {
				e, err := m.Embed(context.Background(), g.Tokens, c.p, 0)
				if err != nil {
					t.Fatal(err)
				}
				if rel := rowsErr(t, e.Rows, c.raw); rel > bound {
					t.Errorf("%v: relative error %.3g over llama.cpp's rows", c.p, rel)
				}
				if e.Passes != 1 {
					t.Errorf("%v: %d passes for %d tokens", c.p, e.Passes, len(g.Tokens))
				}
				if c.norm == nil {
					continue
				}
				model.Normalize(e.Rows[0], e.Rows[0], 2)
				if rel := rowsErr(t, e.Rows, c.norm); rel > bound {
					t.Errorf("%v normalised: relative error %.3g over llama.cpp's", c.p, rel)
				}
			}
		})
	}
}

// TestEmbedChunks: the rows are the same bits whatever the passes the
// prompt is cut into (and the passes are counted); an empty prompt is
// ErrEmptyPrompt.
func TestEmbedChunks(t *testing.T) {
	m := open(t, stages.StreamOff, 64)
	ids := []int32{5, 17, 99, 3, 42, 8, 11}
	whole, err := m.Embed(context.Background(), ids, model.PoolNone, 0)
	if err != nil {
		t.Fatal(err)
	}
	cut, err := m.Embed(context.Background(), ids, model.PoolNone, 3)
	if err != nil {
		t.Fatal(err)
	}
	if whole.Passes != 1 || cut.Passes != 3 {
		t.Errorf("passes %d and %d, want 1 and 3", whole.Passes, cut.Passes)
	}
	if rel := rowsErr(t, cut.Rows, whole.Rows); rel != 0 {
		t.Errorf("rows fed 3 at a time differ from one pass by %.3g", rel)
	}
	if _, err := m.Embed(context.Background(), nil, model.PoolMean, 0); !errors.Is(err, ErrEmptyPrompt) {
		t.Errorf("empty prompt: %v, want ErrEmptyPrompt", err)
	}
}

// TestBatchExclusive: an Embed run through Batch.Exclusive while a request
// generates on the batch (called from inside its token callback, so that
// the request is mid-generation) gives the rows Embed gives with no batch,
// and the request's tokens are those it generates alone; a cancelled
// context is returned before f runs.
func TestBatchExclusive(t *testing.T) {
	const n = 6
	m := open(t, stages.StreamOff, 0)
	prompt := batchPrompts(t, 1)[0]
	ids := []int32{5, 17, 99, 3, 42, 8, 11}
	want, err := m.Embed(context.Background(), ids, model.PoolMean, 0)
	if err != nil {
		t.Fatal(err)
	}
	solo := soloRuns(t, m, [][]int32{prompt}, n)[0]
	b := newBatch(t, m, BatchOptions{Slots: 2, Ctx: 64, Ubatch: 4})
	type result struct {
		e   Embedding
		err error
	}
	done := make(chan result, 1)
	started := false
	res, err := b.Generate(context.Background(), Request{IDs: prompt, Chain: greedyChain(t), MaxTokens: n}, func(tok Token) error {
		if started {
			return nil
		}
		started = true
		go func() {
			var r result
			r.err = b.Exclusive(context.Background(), func() (err error) {
				r.e, err = m.Embed(context.Background(), ids, model.PoolMean, 0)
				return err
			})
			done <- r
		}()
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	if !slices.Equal(res.Tokens, solo) {
		t.Errorf("tokens beside an embedding %v, alone %v", res.Tokens, solo)
	}
	select {
	case r := <-done:
		if r.err != nil {
			t.Fatal(r.err)
		}
		if rel := rowsErr(t, r.e.Rows, want.Rows); rel != 0 {
			t.Errorf("rows through Exclusive differ by %.3g", rel)
		}
	case <-time.After(2 * time.Minute): // a hang guard only
		t.Fatal("Exclusive did not return")
	}
	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	ran := false
	b.Close()
	if err := b.Exclusive(ctx, func() error { ran = true; return nil }); err == nil || ran {
		t.Errorf("Exclusive on a cancelled context of a closed batch: %v, ran %v", err, ran)
	}
}
