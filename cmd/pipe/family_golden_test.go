package main

import (
	"fmt"
	"math"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// The golden comparisons every architecture's tiny models go through
// (gemma4, qwen35moe): llama.cpp's config "ref" runs of
// testdata/golden/runs/<model>, compared by `pipe run` with an F32 KV
// cache, greedy, not stopping at end-of-generation.

// familyRuns lists model's golden runs.
func familyRuns(t *testing.T, model string) []string {
	runs, err := filepath.Glob(filepath.Join("../../testdata/golden/runs", model, "*__ref.json"))
	if err != nil || len(runs) == 0 {
		t.Fatalf("no golden runs of %s: %v", model, err)
	}
	return runs
}

// goldenArgs are the `pipe run` arguments of golden run g, plus extra.
func goldenArgs(g *goldenRun, extra ...string) []string {
	args := []string{"--log-level", "error", "run", "-m", filepath.Join("../../testdata/golden", g.ModelFile),
		"-n", fmt.Sprint(len(g.GeneratedTokens)), "--temp", "0", "--kv-type", "f32", "--ignore-eos", "-p", g.UserText}
	if g.Chat {
		args = append(args, "--chat")
	}
	return append(args, extra...)
}

// teacherForced feeds llama.cpp's tokens through `pipe run` and compares
// the logits of every step with goldenTolerance, for every run of every
// model. On a quantized model one step per run may reach tieBound (a
// router tie, where either engine may pick the other expert; the
// architecture's tests show why). Where llama.cpp's top-1/top-2 margin
// exceeds twice the bound, the argmax must agree.
func teacherForced(t *testing.T, models []string, tieBound float64) {
	for _, name := range models {
		for _, rf := range familyRuns(t, name) {
			g := loadGolden(t, rf)
			t.Run(name+"/"+g.PromptID, func(t *testing.T) {
				if testing.Short() && g.PromptID != "p0_fox" {
					t.Skip("short: one prompt per model")
				}
				tmp := t.TempDir()
				lo, to := filepath.Join(tmp, "logits.bin"), filepath.Join(tmp, "tokens.txt")
				runPipe(t, goldenArgs(g, "--force-tokens", joinInts(g.GeneratedTokens), "--logits-out", lo, "--tokens-out", to)...)
				toks, _ := os.ReadFile(to)
				if got := strings.SplitN(string(toks), "\n", 2)[0]; got != joinInts(g.PromptTokens) {
					t.Fatalf("prompt tokens\n got %s\nwant %s", got, joinInts(g.PromptTokens))
				}
				raw, _ := os.ReadFile(lo)
				got, want := bytesToF32(raw), decodeF32(t, g.Logits.Data)
				V := g.NVocab
				if len(got) != len(want) || V == 0 {
					t.Fatalf("%d logits, want %d", len(got), len(want))
				}
				tol := goldenTolerance(name)
				var worst float64
				var ties []int
				for s := 0; s < len(want)/V; s++ {
					gr, wr := got[s*V:(s+1)*V], want[s*V:(s+1)*V]
					rel, maxAbs, maxDiff := relRowDiff(gr, wr)
					worst = math.Max(worst, rel)
					bound := tol
					if rel > tol && len(ties) == 0 && !strings.HasSuffix(name, "-F32") {
						ties, bound = append(ties, s), tieBound
					}
					if rel > bound {
						t.Errorf("step %d: max |Δlogit| %.3g = %.3g × max|logit|, tolerance %.0e", s, maxDiff, rel, bound)
					}
					if g.Steps[s].Margin > 2*bound*maxAbs && argmax(gr) != argmax(wr) {
						t.Errorf("step %d: argmax %d, llama.cpp %d (margin %.3g)", s, argmax(gr), argmax(wr), g.Steps[s].Margin)
					}
				}
				t.Logf("worst relative logit error %.2e (tolerance %.0e; router-tie step: %v)", worst, tol, ties)
			})
		}
	}
}

// freeRunning: greedy continuations equal llama.cpp's token for token up to
// the first step whose llama.cpp top-1/top-2 margin is not above twice our
// logit error at that step (measured by a teacher-forced run; up to the
// first differing token the free run is in the same state, so its error is
// the same). Beyond such a step either token is right at our precision.
// Each variant (extra `pipe run` flags) must give the same tokens. With
// -short only the p0_fox prompt runs, as in teacherForced.
func freeRunning(t *testing.T, models []string, variants ...[]string) {
	freeRun(t, models, false, variants)
}

// freeRunningAll is freeRunning with every token equal, near-ties included
// (F32 models whose logit error is far below their smallest margin).
func freeRunningAll(t *testing.T, models []string, variants ...[]string) {
	freeRun(t, models, true, variants)
}

func freeRun(t *testing.T, models []string, all bool, variants [][]string) {
	if len(variants) == 0 {
		variants = [][]string{nil}
	}
	for _, name := range models {
		for _, rf := range familyRuns(t, name) {
			g := loadGolden(t, rf)
			t.Run(name+"/"+g.PromptID, func(t *testing.T) {
				if testing.Short() && g.PromptID != "p0_fox" {
					// the race pass: every variant, one prompt (the
					// plain pass runs them all; TestDeepSeek2GoldenFreeRunning
					// alone took 6 minutes under -race)
					t.Skip("short: one prompt per model")
				}
				tmp := t.TempDir()
				lo, to := filepath.Join(tmp, "logits.bin"), filepath.Join(tmp, "tokens.txt")
				runPipe(t, goldenArgs(g, "--force-tokens", joinInts(g.GeneratedTokens), "--logits-out", lo)...)
				raw, _ := os.ReadFile(lo)
				forced, ref, V := bytesToF32(raw), decodeF32(t, g.Logits.Data), g.NVocab
				if len(forced) != len(ref) {
					t.Fatalf("%d forced logits, want %d", len(forced), len(ref))
				}
				for _, extra := range variants {
					runPipe(t, goldenArgs(g, append([]string{"--tokens-out", to}, extra...)...)...)
					toks, _ := os.ReadFile(to)
					lines := strings.Split(string(toks), "\n")
					if len(lines) < 2 {
						t.Fatalf("%v: tokens file %q", extra, toks)
					}
					got := strings.Split(lines[1], ",")
					if len(got) != len(g.GeneratedTokens) {
						t.Fatalf("%v: generated %d tokens, want %d", extra, len(got), len(g.GeneratedTokens))
					}
					same := len(got)
					for i, w := range g.GeneratedTokens {
						_, _, errI := relRowDiff(forced[i*V:(i+1)*V], ref[i*V:(i+1)*V])
						if !all && g.Steps[i].Margin <= 2*errI {
							same = i
							break
						}
						if got[i] != fmt.Sprint(w) {
							t.Fatalf("%v: token %d: %s, llama.cpp %d (margin %.3g, our error %.3g)\n got %s\nwant %s", extra, i, got[i], w, g.Steps[i].Margin, errI, lines[1], joinInts(g.GeneratedTokens))
						}
					}
					t.Logf("%v: identical for the first %d of %d tokens (then a near-tie, if fewer)", extra, same, len(got))
				}
			})
		}
	}
}
