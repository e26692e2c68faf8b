// Package goldenruns checks a model family against its golden runs —
// llama.cpp's greedy runs of the family's tiny models
// (testdata/golden/README.md, section 4) — through the library decode loop
// on the whole engine: decode.Open over stages, in several I/O and thread
// configurations. Only tests import it.
//
// A family with an F32 and a quantized golden model needs one test:
//
//	func TestGoldenRuns(t *testing.T) {
//		goldenruns.Check(t, "../../testdata/golden", "tiny-myfamily-F32", "tiny-myfamily-Q4_K_M")
//	}
//
// Check compares teacher-forced logits with llama.cpp's within F32Tol (F32)
// or QuantTol (quantized; one router-tie step per run up to TieBound), and
// the free-running greedy tokens in every Variant. The run files are read
// by package model/goldentest, which the layer-by-layer tests use too; this
// package sits beside decode because it drives it, so that goldentest stays
// below the model's callers.
package goldenruns

import (
	"math"
	"path/filepath"
	"slices"
	"testing"

	"github.com/rs/zerolog"

	"github.com/pipe-engine/pipe/decode"
	"github.com/pipe-engine/pipe/model"
	"github.com/pipe-engine/pipe/model/goldentest"
	"github.com/pipe-engine/pipe/sample"
	"github.com/pipe-engine/pipe/stages"
)

// The bounds every family's golden runs are held to: logits within F32Tol
// (F32) or QuantTol (quantized) of the row's largest |logit|, and one step
// per quantized run up to TieBound — a router tie, where either engine may
// pick the other expert.
const (
	F32Tol   = 1e-3
	QuantTol = 3e-2
	TieBound = 1.5e-1
)

// Variant is one engine configuration a golden run goes through.
type Variant struct {
	Name    string
	Stream  stages.StreamMode
	Threads int
	Cache   int64 // expert cache bytes when streaming
}

// Variants are the configurations Check runs: streaming at one and two
// threads, mmap'd, and streaming through a 1 MiB cache.
var Variants = []Variant{
	{"stream-t1", stages.StreamOn, 1, 64 << 20},
	{"stream-t2", stages.StreamOn, 2, 64 << 20},
	{"mmap-t2", stages.StreamOff, 2, 0},
	{"stream-t1-cache1MiB", stages.StreamOn, 1, 1 << 20},
}

// Runs are the golden runs of model name under goldenDir, p0_fox alone
// under -short.
func Runs(t *testing.T, goldenDir, name string) []*goldentest.Run {
	t.Helper()
	var out []*goldentest.Run
	for _, g := range goldentest.Runs(t, goldenDir, name) {
		if testing.Short() && g.PromptID != "p0_fox" {
			continue
		}
		out = append(out, g)
	}
	return out
}

// Logits are the run's llama.cpp logits, one row per generated token.
func Logits(t *testing.T, g *goldentest.Run) [][]float32 {
	t.Helper()
	rows := goldentest.Rows(t, g.Logits.Data, g.NVocab)
	if len(rows) != len(g.GeneratedTokens) {
		t.Fatalf("%d logit rows for %d steps", len(rows), len(g.GeneratedTokens))
	}
	return rows
}

// Generate runs g's prompt through the decode loop on the engine of
// variant v over goldenDir/g.ModelFile, greedy, with force (nil:
// free-running), and returns the tokens and every step's logits.
func Generate(t *testing.T, goldenDir string, g *goldentest.Run, v Variant, force []int32) ([]int32, [][]float32) {
	t.Helper()
	cfg := stages.Config{Path: filepath.Join(goldenDir, g.ModelFile), IO: stages.IOConfig{Lanes: 2}, Stream: v.Stream,
		Threads: v.Threads, Log: zerolog.Nop()}
	if v.Stream == stages.StreamOn {
		cfg.Cache = stages.CacheConfig{Bytes: v.Cache, Policy: "lru"}
	}
	m, err := decode.Open(t.Context(), decode.Options{Engine: cfg, KV: model.KVF32, Ctx: len(g.PromptTokens) + len(g.GeneratedTokens)})
	if err != nil {
		t.Fatal(err)
	}
	defer func() {
		if err := m.Close(); err != nil {
			t.Error(err)
		}
	}()
	ids, _, err := m.Encode(decode.Prompt{Text: g.UserText, Chat: g.Chat})
	if err != nil {
		t.Fatal(err)
	}
	if !slices.Equal(ids, g.PromptTokens) {
		t.Fatalf("prompt tokens\n got %v\nwant %v", ids, g.PromptTokens)
	}
	s, err := m.NewSession(decode.SessionOptions{Sampling: sample.Params{Temp: 0, TopP: 1, RepeatPenalty: 1}, Force: force})
	if err != nil {
		t.Fatal(err)
	}
	var rows [][]float32
	o := decode.GenOptions{MaxTokens: len(g.GeneratedTokens), IgnoreEOS: true,
		OnLogits: func(l []float32) error { rows = append(rows, slices.Clone(l)); return nil }}
	res, err := s.Generate(t.Context(), ids, o, func(decode.Token) error { return nil })
	if err != nil {
		t.Fatal(err)
	}
	return res.Tokens, rows
}

// TeacherForced feeds llama.cpp's tokens and returns each step's relative
// logit error and llama.cpp's largest |logit|, failing above tol (one step
// of a quantized run may reach TieBound: a router tie, where either engine
// may pick the other expert) or on a different argmax where llama.cpp's
// top-1/top-2 margin exceeds twice the bound.
func TeacherForced(t *testing.T, goldenDir string, g *goldentest.Run, tol float64) (errs, maxAbs []float64) {
	t.Helper()
	_, got := Generate(t, goldenDir, g, Variants[0], g.GeneratedTokens)
	want := Logits(t, g)
	if len(got) != len(want) {
		t.Fatalf("%d logit rows, llama.cpp %d", len(got), len(want))
	}
	errs, maxAbs = make([]float64, len(want)), make([]float64, len(want))
	ties, worst := 0, 0.0
	for s := range want {
		rel, mx := goldentest.RowErr(got[s], want[s])
		errs[s], maxAbs[s], worst = rel, mx, math.Max(worst, rel)
		bound := tol
		if rel > tol && tol == QuantTol && ties == 0 {
			ties, bound = 1, TieBound
		}
		if rel > bound {
			t.Errorf("step %d: logits %.3g × max|logit| from llama.cpp's, tolerance %.0e", s, rel, bound)
		}
		if g.Steps[s].Margin > 2*bound*mx && goldentest.Argmax(got[s]) != goldentest.Argmax(want[s]) {
			t.Errorf("step %d: argmax %d, llama.cpp %d (margin %.3g)", s, goldentest.Argmax(got[s]), goldentest.Argmax(want[s]), g.Steps[s].Margin)
		}
	}
	t.Logf("worst relative logit error %.2e (tolerance %.0e, router-tie steps %d)", worst, tol, ties)
	return errs, maxAbs
}

// Check runs every golden run of the F32 model f32 and of the quantized
// models under goldenDir: the teacher-forced logits are llama.cpp's within
// the bounds above, and the free-running greedy tokens are llama.cpp's in
// every Variant — all of them on the F32 model, on a quantized one up to
// the first step whose llama.cpp margin is not above twice our logit
// error there (a near-tie either engine may break either way; before it
// both are in the same state). Each run is a subtest "model/prompt".
func Check(t *testing.T, goldenDir, f32 string, quantized ...string) {
	t.Helper()
	for _, name := range append([]string{f32}, quantized...) {
		tol := QuantTol
		if name == f32 {
			tol = F32Tol
		}
		for _, g := range Runs(t, goldenDir, name) {
			t.Run(name+"/"+g.PromptID, func(t *testing.T) {
				errs, maxAbs := TeacherForced(t, goldenDir, g, tol)
				same := len(g.GeneratedTokens)
				for i := range g.GeneratedTokens {
					if name != f32 && g.Steps[i].Margin <= 2*errs[i]*maxAbs[i] {
						same = i
						break
					}
				}
				for _, v := range Variants {
					got, _ := Generate(t, goldenDir, g, v, nil)
					if !slices.Equal(got[:same], g.GeneratedTokens[:same]) {
						t.Errorf("%s: greedy tokens\n got %v\nwant %v (first %d must agree)", v.Name, got, g.GeneratedTokens, same)
					}
				}
				t.Logf("free-running: the first %d of %d tokens equal llama.cpp's in %d variants", same, len(g.GeneratedTokens), len(Variants))
			})
		}
	}
}
