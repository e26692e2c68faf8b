package deepseek4_test

import (
	"context"
	"fmt"
	"path/filepath"
	"testing"

	"github.com/pipe-engine/pipe/model"
	"github.com/pipe-engine/pipe/model/goldentest"
	"github.com/pipe-engine/pipe/router"
)

// routing is what the recording MoE routes with: the engine's router.
var routing = goldentest.Router{Route: router.Route, ScratchLen: router.ScratchLen}

const golden = "../../testdata/golden"

// TestIntermediatesMatchLlamaCpp runs the F32 tiny model on p0_fox and
// compares, layer by layer, with llama.cpp's dump of the same pass: every
// layer's attention output (raw window, CSA with the indexer's choice,
// HCA), its normed FFN input (after the attention's hyper-connection), the
// router logits, the experts chosen by √softplus plus the selection bias
// with their renormalised weights scaled by 1.5, the routed sum and the
// shared expert; then the logits after the head's hyper-connection.
func TestIntermediatesMatchLlamaCpp(t *testing.T) {
	const bound = 1e-5
	m, d, raw := goldentest.Load(t, filepath.Join(golden, "models/tiny-deepseek4-F32.gguf"), model.Options{})
	toks := goldentest.PromptTokens(t, filepath.Join(golden, "runs/tiny-deepseek4-F32/p0_fox__ref.json"))
	st, err := m.NewState(64, model.KVF32)
	if err != nil {
		t.Fatal(err)
	}
	rec := goldentest.NewRec(m, d, raw, routing)
	logits, err := m.Forward(context.Background(), st, toks, rec, true)
	if err != nil {
		t.Fatal(err)
	}
	dp := goldentest.LoadDump(t, filepath.Join(golden, "tensors/tiny-deepseek4-F32/p0_fox__ref"))
	check := func(what string, got [][]float32) float64 {
		e := goldentest.RelErr(t, what, got, dp.F32(t, what))
		if e > bound {
			t.Errorf("%s: relative error %.3g > %.0e", what, e, bound)
		}
		return e
	}
	hp := d.HParams
	for l := 0; l < hp.NLayer; l++ {
		check(fmt.Sprintf("ffn_norm-%d", l), rec.X[l])
		le := check(fmt.Sprintf("ffn_moe_logits-%d", l), rec.Logits[l])
		dp.CheckRouting(t, rec, l, hp.NExpert, m.Router(l).K, "ffn_moe_weights_scaled", le)
		check(fmt.Sprintf("ffn_moe_out-%d", l), rec.Out[l])
	}
	check("result_output", logits)
}
