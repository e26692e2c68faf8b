package qwen35moe_test

import (
	"context"
	"fmt"
	"path/filepath"
	"testing"

	"github.com/pipe-engine/pipe/model"
	"github.com/pipe-engine/pipe/model/goldentest"
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
	m, d, raw := goldentest.Load(t, filepath.Join(golden, "models/tiny-qwen35moe-F32.gguf"), model.Options{})
	rec := goldentest.NewRec(m, d, raw, routing)
	prompt := goldentest.PromptTokens(t, filepath.Join(golden, "runs/tiny-qwen35moe-F32/p0_fox__ref.json"))
	st, err := m.NewState(64, model.KVF32)
	if err != nil {
		t.Fatal(err)
	}
	logits, err := m.Forward(context.Background(), st, prompt, rec, true)
	if err != nil {
		t.Fatal(err)
	}
	dp := goldentest.LoadDump(t, filepath.Join(golden, "tensors/tiny-qwen35moe-F32/p0_fox__ref"))
	check := func(what string, got [][]float32) float64 {
		e := goldentest.RelErr(t, what, got, dp.F32(t, what))
		if e > bound {
			t.Errorf("%s: relative error %.3g > %.0e", what, e, bound)
		}
		return e
	}
	hp := d.HParams
	for l := range hp.NLayer {
		check(fmt.Sprintf("attn_post_norm-%d", l), rec.X[l])
		le := check(fmt.Sprintf("ffn_moe_logits-%d", l), rec.Logits[l])
		dp.CheckRouting(t, rec, l, hp.NExpert, m.Router(l).K, "ffn_moe_weights_norm", le)
		check(fmt.Sprintf("ffn_moe_out-%d", l), rec.Out[l])
	}
	check("result_output", logits) // llama.cpp's pass outputs the last position
}
