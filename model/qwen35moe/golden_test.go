package qwen35moe_test

import (
	"context"
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"testing"

	"github.com/pipe-engine/pipe/model"
	"github.com/pipe-engine/pipe/model/modeltest"
)

const golden = "../../testdata/golden"

// TestIntermediatesMatchLlamaCpp runs the golden F32 model on p0_fox and
// compares, layer by layer, with llama.cpp's dump of the same pass: the FFN
// input (attn_post_norm: the delta-net or gated attention output through
// the residual and the norm), the router logits, the top-2 experts and
// their renormalised weights, and the routed-expert output; the last
// position's logits last. A divergence shows at its first layer and op. The
// only differences are float summation orders (ggml's SIMD dot products,
// and its delta rule's, vs ours), a few 1e-7 relative; bound 1e-5.
func TestIntermediatesMatchLlamaCpp(t *testing.T) {
	const bound = 1e-5
	m, rec := modeltest.Load(t, filepath.Join(golden, "models/tiny-qwen35moe-F32.gguf"), 1)
	rec.Record()
	prompt := promptOf(t, "runs/tiny-qwen35moe-F32/p0_fox__ref.json")
	st, err := m.NewState(64, model.KVF32)
	if err != nil {
		t.Fatal(err)
	}
	logits, err := m.Forward(context.Background(), st, prompt, rec, true)
	if err != nil {
		t.Fatal(err)
	}
	dp := modeltest.LoadDump(t, filepath.Join(golden, "tensors/tiny-qwen35moe-F32/p0_fox__ref"))
	check := func(what string, got [][]float32) float64 {
		e := modeltest.RelErr(t, what, got, dp.F32(t, what))
		if e > bound {
			t.Errorf("%s: relative error %.3g > %.0e", what, e, bound)
		}
		return e
	}
	for l := range m.Desc().HParams.NLayer {
		check(fmt.Sprintf("attn_post_norm-%d", l), rec.X[l])
		le := check(fmt.Sprintf("ffn_moe_logits-%d", l), rec.Logits[l])
		modeltest.CheckRouting(t, dp, rec, l, le)
		check(fmt.Sprintf("ffn_moe_out-%d", l), rec.Out[l])
	}
	check("result_output", logits[len(logits)-1:]) // llama.cpp's pass outputs the last position
}

// promptOf reads a golden run's prompt ids.
func promptOf(t *testing.T, run string) []int32 {
	t.Helper()
	b, err := os.ReadFile(filepath.Join(golden, run))
	if err != nil {
		t.Fatal(err)
	}
	var r struct {
		PromptTokens []int32 `json:"prompt_tokens"`
	}
	if err := json.Unmarshal(b, &r); err != nil {
		t.Fatal(err)
	}
	return r.PromptTokens
}
