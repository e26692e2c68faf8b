package bailingmoe3_test

import (
	"encoding/base64"
	"encoding/binary"
	"encoding/json"
	"math"
	"os"
	"path/filepath"
	"slices"
	"testing"

	"github.com/rs/zerolog"

	"github.com/pipe-engine/pipe/decode"
	"github.com/pipe-engine/pipe/model"
	"github.com/pipe-engine/pipe/sample"
	"github.com/pipe-engine/pipe/stages"
)

// The bailingmoe3 golden runs (testdata/golden/README.md, section 18):
// tiny-bailingmoe3-{F32,Q4_K_M}, `pipe gen --preset bailingmoe3-tiny --seed 73412`
// quantized by llama-quantize and run by llama.cpp through
// testdata/golden/tools. They are compared, through the library decode
// loop on the engine, with the bounds the other families' golden runs use:
// logits within 1e-3 (F32) or 3e-2 (quantized) of the largest, one
// router-tie step per quantized run up to 1.5e-1.
const (
	f32Tol   = 1e-3
	quantTol = 3e-2
	tieBound = 1.5e-1
)

var goldenModels = []string{"tiny-bailingmoe3-F32", "tiny-bailingmoe3-Q4_K_M"}

type goldenRun struct {
	ModelFile       string  `json:"model_file"`
	PromptID        string  `json:"prompt_id"`
	Chat            bool    `json:"chat"`
	UserText        string  `json:"user_text"`
	PromptTokens    []int32 `json:"prompt_tokens"`
	GeneratedTokens []int32 `json:"generated_tokens"`
	NVocab          int     `json:"n_vocab"`
	Steps           []struct {
		Margin float64 `json:"margin_top1_top2"`
	} `json:"steps"`
	Logits struct {
		Data string `json:"data"`
	} `json:"logits"`
}

// runs are model's golden runs (p0_fox alone under -short).
func runs(t *testing.T, name string) []*goldenRun {
	t.Helper()
	files, err := filepath.Glob(filepath.Join(golden, "runs", name, "*__ref.json"))
	if err != nil || len(files) == 0 {
		t.Fatalf("no golden runs of %s: %v", name, err)
	}
	var out []*goldenRun
	for _, f := range files {
		b, err := os.ReadFile(f)
		if err != nil {
			t.Fatal(err)
		}
		var g goldenRun
		if err := json.Unmarshal(b, &g); err != nil {
			t.Fatalf("%s: %v", f, err)
		}
		if testing.Short() && g.PromptID != "p0_fox" {
			continue
		}
		out = append(out, &g)
	}
	return out
}

// logits are the run's llama.cpp logits, one row per step.
func (g *goldenRun) logits(t *testing.T) [][]float32 {
	t.Helper()
	raw, err := base64.StdEncoding.DecodeString(g.Logits.Data)
	if err != nil {
		t.Fatal(err)
	}
	var rows [][]float32
	for s := 0; (s+1)*g.NVocab*4 <= len(raw); s++ {
		row := make([]float32, g.NVocab)
		for i := range row {
			row[i] = math.Float32frombits(binary.LittleEndian.Uint32(raw[(s*g.NVocab+i)*4:]))
		}
		rows = append(rows, row)
	}
	if len(rows) != len(g.GeneratedTokens) {
		t.Fatalf("%d logit rows for %d steps", len(rows), len(g.GeneratedTokens))
	}
	return rows
}

// variant is one engine configuration a golden run goes through.
type variant struct {
	name    string
	stream  stages.StreamMode
	threads int
	cache   int64
}

var variants = []variant{
	{"stream-t1", stages.StreamOn, 1, 64 << 20},
	{"stream-t2", stages.StreamOn, 2, 64 << 20},
	{"mmap-t2", stages.StreamOff, 2, 0},
	{"stream-t1-cache1MiB", stages.StreamOn, 1, 1 << 20},
}

// generate runs g's prompt through the decode loop on the engine of
// variant v, greedy, with force (nil: free-running), and returns the
// tokens and every step's logits.
func generate(t *testing.T, g *goldenRun, v variant, force []int32) ([]int32, [][]float32) {
	t.Helper()
	cfg := stages.Config{Path: filepath.Join(golden, g.ModelFile), IO: stages.IOConfig{Lanes: 2}, Stream: v.stream,
		Threads: v.threads, Log: zerolog.Nop()}
	if v.stream == stages.StreamOn {
		cfg.Cache = stages.CacheConfig{Bytes: v.cache, Policy: "lru"}
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

// rowErr is max|a-b| / max|b| and max|b|.
func rowErr(a, b []float32) (rel, maxAbs float64) {
	var maxDiff float64
	for i := range b {
		maxAbs = math.Max(maxAbs, math.Abs(float64(b[i])))
		maxDiff = math.Max(maxDiff, math.Abs(float64(a[i]-b[i])))
	}
	return maxDiff / maxAbs, maxAbs
}

func argmax(v []float32) int {
	b := 0
	for i, x := range v {
		if x > v[b] {
			b = i
		}
	}
	return b
}

// teacherForced feeds llama.cpp's tokens and returns each step's relative
// logit error and llama.cpp's largest |logit|, failing above the model's tolerance (one step of a
// quantized run may reach tieBound: a router tie, where either engine may
// pick the other expert) or on a different argmax where llama.cpp's
// top-1/top-2 margin exceeds twice the bound.
func teacherForced(t *testing.T, name string, g *goldenRun) (errs, maxAbs []float64) {
	t.Helper()
	tol := f32Tol
	if name != "tiny-bailingmoe3-F32" {
		tol = quantTol
	}
	_, got := generate(t, g, variants[0], g.GeneratedTokens)
	want := g.logits(t)
	if len(got) != len(want) {
		t.Fatalf("%d logit rows, llama.cpp %d", len(got), len(want))
	}
	errs, maxAbs = make([]float64, len(want)), make([]float64, len(want))
	ties, worst := 0, 0.0
	for s := range want {
		rel, mx := rowErr(got[s], want[s])
		errs[s], maxAbs[s], worst = rel, mx, math.Max(worst, rel)
		bound := tol
		if rel > tol && tol == quantTol && ties == 0 {
			ties, bound = 1, tieBound
		}
		if rel > bound {
			t.Errorf("step %d: logits %.3g × max|logit| from llama.cpp's, tolerance %.0e", s, rel, bound)
		}
		if g.Steps[s].Margin > 2*bound*mx && argmax(got[s]) != argmax(want[s]) {
			t.Errorf("step %d: argmax %d, llama.cpp %d (margin %.3g)", s, argmax(got[s]), argmax(want[s]), g.Steps[s].Margin)
		}
	}
	t.Logf("worst relative logit error %.2e (tolerance %.0e, router-tie steps %d)", worst, tol, ties)
	return errs, maxAbs
}

// TestGoldenRuns: for every golden run, the teacher-forced logits are
// llama.cpp's within the bounds above, and the free-running greedy tokens
// are llama.cpp's in every variant (streaming at one and two threads,
// mmap'd, streaming through a 1 MiB cache): all of them on the F32 model,
// on the quantized one up to the first step whose llama.cpp margin is not
// above twice our logit error there (a near-tie either engine may break
// either way; before it both are in the same state).
func TestGoldenRuns(t *testing.T) {
	for _, name := range goldenModels {
		for _, g := range runs(t, name) {
			t.Run(name+"/"+g.PromptID, func(t *testing.T) {
				errs, maxAbs := teacherForced(t, name, g)
				same := len(g.GeneratedTokens)
				for i := range g.GeneratedTokens {
					if name != "tiny-bailingmoe3-F32" && g.Steps[i].Margin <= 2*errs[i]*maxAbs[i] {
						same = i
						break
					}
				}
				for _, v := range variants {
					got, _ := generate(t, g, v, nil)
					if !slices.Equal(got[:same], g.GeneratedTokens[:same]) {
						t.Errorf("%s: greedy tokens\n got %v\nwant %v (first %d must agree)", v.name, got, g.GeneratedTokens, same)
					}
				}
				t.Logf("free-running: the first %d of %d tokens equal llama.cpp's in %d variants", same, len(g.GeneratedTokens), len(variants))
			})
		}
	}
}
