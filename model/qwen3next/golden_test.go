package qwen3next_test

import (
	"fmt"
	"math"
	"path/filepath"
	"testing"

	"github.com/pipe-engine/pipe/model"
	"github.com/pipe-engine/pipe/model/goldentest"
)

// The golden set: qwen3next-tiny written by `pipe gen --seed 90533` (a
// seed no test uses otherwise), its Q4_K_M by llama-quantize, run through
// llama.cpp 3f545becc by testdata/golden/tools (README section 15).
const golden = "../../testdata/golden"

// TestIntermediatesMatchLlamaCpp runs the golden F32 model on p0_fox and
// compares, layer by layer, with llama.cpp's dump of the same pass: the FFN
// input (attn_post_norm: the delta-net or gated attention output through
// the residual and the norm), the router logits, the top-2 experts and
// their renormalised weights, and the routed-expert output; the last
// position's logits last. A divergence shows at its first layer and op.
// The only differences are float summation orders (ggml's SIMD dot
// products and its delta rule's vs ours); bound 1e-5. With the key heads
// tiled (qwen35moe's h mod nk) instead of grouped, layer 0 is off by far
// more.
func TestIntermediatesMatchLlamaCpp(t *testing.T) {
	goldentest.CheckLayersFrom(t, routing, golden, "tiny-qwen3next-F32", "attn_post_norm", "ffn_moe_weights_norm", 1e-5)
}

// goldenBound is the relative logit error allowed against llama.cpp: F32
// differs in summation order only; Q4_K_M adds the activations' Q8_K and
// Q8_0 rounding, which pipe's kernels follow.
var goldenBound = map[string]float64{"tiny-qwen3next-F32": 1e-5, "tiny-qwen3next-Q4_K_M": 1e-4}

// tieBound is what one row per quantized run may reach instead: an
// activation whose quantized value lands on a rounding tie, where the two
// engines' float summation orders round it either way. The one such row
// of this set is chat0_weather's last step (3.7e-3): layer 3's shared
// expert hands its down projection (Q8_0) a SwiGLU output that llama.cpp
// scales to −107.500015 in its Q8_0 block, and pipe, 1e-7 away, to the
// other side of −107.5; every layer before it agrees within 2e-7.
const tieBound = 1e-2

// TestGoldenTeacherForced feeds each run's prompt (logits at every
// position) and then llama.cpp's generated tokens one at a time, and
// compares every row with llama.cpp's within goldenBound (one row of a
// quantized run within tieBound); where llama.cpp's top-1/top-2 margin is
// clear of the bound, the argmax must agree.
func TestGoldenTeacherForced(t *testing.T) {
	for name, bound := range goldenBound {
		m, moe := load(t, filepath.Join(golden, "models", name+".gguf"), 1)
		for _, g := range goldentest.Runs(t, golden, name) {
			t.Run(name+"/"+g.PromptID, func(t *testing.T) {
				st, err := m.NewState(len(g.PromptTokens)+len(g.GeneratedTokens), model.KVF32)
				if err != nil {
					t.Fatal(err)
				}
				got := forward(t, m, moe, st, g.PromptTokens)
				got = append(got, forward(t, m, moe, st, g.GeneratedTokens[:len(g.GeneratedTokens)-1], ones(len(g.GeneratedTokens)-1)...)...)
				want := append(goldentest.Rows(t, g.PromptLogits.Data, g.NVocab), goldentest.Rows(t, g.Logits.Data, g.NVocab)[1:]...)
				if len(got) != len(want) {
					t.Fatalf("%d rows, llama.cpp %d", len(got), len(want))
				}
				var worst float64
				tie := name == "tiny-qwen3next-F32" // F32: no allowance
				for i := range want {
					rel, maxAbs := goldentest.RowErr(got[i], want[i])
					worst = math.Max(worst, rel)
					bound := bound
					if rel > bound && !tie {
						tie, bound = true, tieBound
						t.Logf("row %d: relative logit error %.3g (the run's one rounding tie)", i, rel)
					}
					if rel > bound {
						t.Errorf("row %d: relative logit error %.3g > %.0e", i, rel, bound)
					}
					if s := i - len(g.PromptTokens) + 1; s >= 0 && g.Steps[s].Margin > 2*bound*maxAbs && goldentest.Argmax(got[i]) != goldentest.Argmax(want[i]) {
						t.Errorf("step %d: argmax %d, llama.cpp %d", s, goldentest.Argmax(got[i]), goldentest.Argmax(want[i]))
					}
				}
				t.Logf("worst relative logit error %.3g over %d rows", worst, len(want))
			})
		}
	}
}

func ones(n int) []int {
	s := make([]int, n)
	for i := range s {
		s[i] = 1
	}
	return s
}

// TestGoldenFreeRunning: greedy continuations equal llama.cpp's on one
// thread and two — F32 every token, Q4_K_M up to the first step whose
// top-1/top-2 margin in llama.cpp is within the logit error bound (a
// near-tie, where either engine may pick the other token).
func TestGoldenFreeRunning(t *testing.T) {
	for name, bound := range goldenBound {
		for _, threads := range []int{1, 2} {
			m, moe := load(t, filepath.Join(golden, "models", name+".gguf"), threads)
			for _, g := range goldentest.Runs(t, golden, name) {
				t.Run(fmt.Sprintf("%s/%s/t%d", name, g.PromptID, threads), func(t *testing.T) {
					st, err := m.NewState(len(g.PromptTokens)+len(g.GeneratedTokens), model.KVF32)
					if err != nil {
						t.Fatal(err)
					}
					last := forward(t, m, moe, st, g.PromptTokens)
					want := goldentest.Rows(t, g.Logits.Data, g.NVocab)
					for s, tok := range g.GeneratedTokens {
						row := last[len(last)-1]
						if _, maxAbs := goldentest.RowErr(row, want[s]); g.Steps[s].Margin <= 4*bound*maxAbs {
							t.Logf("step %d: near-tie (margin %.3g); compared up to here", s, g.Steps[s].Margin)
							if name == "tiny-qwen3next-F32" {
								t.Errorf("F32 run has a near-tie at step %d: pick another seed", s)
							}
							return
						}
						if got := goldentest.Argmax(row); got != tok {
							t.Fatalf("step %d: greedy token %d, llama.cpp %d", s, got, tok)
						}
						last = forward(t, m, moe, st, []int32{tok})
					}
				})
			}
		}
	}
}
