package deepseek4_test

import (
	"context"
	"path/filepath"
	"testing"

	"github.com/pipe-engine/pipe/model"
	"github.com/pipe-engine/pipe/model/goldentest"
)

// TestEmbeddingsAreResultNorm: in embeddings mode (model.State.Embeddings)
// Forward returns, per token, the output norm after the head's
// hyper-connection, n_embd wide — llama.cpp's result_norm, which its
// tensor dump of p0_fox holds for the last position (llama-server
// 3f545becc itself aborts on deepseek4's embeddings, so this dump is the
// reference) — and the LM head is not applied.
func TestEmbeddingsAreResultNorm(t *testing.T) {
	const bound = 1e-5
	m, d, raw := goldentest.Load(t, filepath.Join(golden, "models/tiny-deepseek4-F32.gguf"), model.Options{})
	toks := goldentest.PromptTokens(t, filepath.Join(golden, "runs/tiny-deepseek4-F32/p0_fox__ref.json"))
	st, err := m.NewState(64, model.KVF32)
	if err != nil {
		t.Fatal(err)
	}
	st.Embeddings = true
	rows, err := m.Forward(context.Background(), st, toks, goldentest.NewRec(m, d, raw, routing), true)
	if err != nil {
		t.Fatal(err)
	}
	if len(rows) != len(toks) || len(rows[0]) != d.HParams.NEmbd {
		t.Fatalf("%d rows of %d for %d tokens, want rows of n_embd %d", len(rows), len(rows[0]), len(toks), d.HParams.NEmbd)
	}
	dp := goldentest.LoadDump(t, filepath.Join(golden, "tensors/tiny-deepseek4-F32/p0_fox__ref"))
	if e := goldentest.RelErr(t, "result_norm", rows, dp.F32(t, "result_norm")); e > bound {
		t.Errorf("result_norm: relative error %.3g > %.0e", e, bound)
	}
}
