package lfm2moe_test

import (
	"context"
	"errors"
	"fmt"
	"math"
	"path/filepath"
	"strings"
	"testing"

	"github.com/pipe-engine/pipe/kernels"
	"github.com/pipe-engine/pipe/model"
	"github.com/pipe-engine/pipe/model/goldentest"
	"github.com/pipe-engine/pipe/model/lfm2moe"
	"github.com/pipe-engine/pipe/router"
)

// routing is what the recording MoE routes with: the engine's router.
var routing = goldentest.Router{Route: router.Route, ScratchLen: router.ScratchLen}

const golden = "../../testdata/golden"

func goldenPrompt(t *testing.T) []int32 {
	return goldentest.PromptTokens(t, filepath.Join(golden, "runs/tiny-lfm2moe-F32/p0_fox__ref.json"))
}

// TestIntermediatesMatchLlamaCpp runs the golden F32 model on p0_fox and
// compares, layer by layer, with llama.cpp's dump of the same pass: the FFN
// input of every MoE layer (llama.cpp names ffn_norm's output
// "model.layers.{}.ffn_out"; layer 1's is layer 0's short-conv block and
// dense FFN through the norm), the router logits, the experts chosen by
// σ(logits) + exp_probs_b with their renormalised weights, the routed
// output (the last layer's for the last position only, as llama.cpp
// computes it); the last position's logits last. Only float summation orders
// differ: bound 1e-5.
func TestIntermediatesMatchLlamaCpp(t *testing.T) {
	const bound = 1e-5
	m, d, raw := goldentest.Load(t, filepath.Join(golden, "models/tiny-lfm2moe-F32.gguf"), model.Options{})
	rec := goldentest.NewRec(m, d, raw, routing)
	st, err := m.NewState(64, model.KVF32)
	if err != nil {
		t.Fatal(err)
	}
	logits, err := m.Forward(context.Background(), st, goldenPrompt(t), rec, true)
	if err != nil {
		t.Fatal(err)
	}
	dp := goldentest.LoadDump(t, filepath.Join(golden, "tensors/tiny-lfm2moe-F32/p0_fox__ref"))
	check := func(what string, got [][]float32) float64 {
		e := goldentest.RelErr(t, what, got, dp.F32(t, what))
		if e > bound {
			t.Errorf("%s: relative error %.3g > %.0e", what, e, bound)
		}
		return e
	}
	hp := d.HParams
	for l := hp.MoE.LeadingDense; l < hp.NLayer; l++ {
		check(fmt.Sprintf("model.layers.{}.ffn_out-%d", l), rec.X[l])
		le := check(fmt.Sprintf("ffn_moe_logits-%d", l), rec.Logits[l])
		dp.CheckRouting(t, rec, l, hp.NExpert, m.Router(l).K, "ffn_moe_weights_norm", le)
		check(fmt.Sprintf("ffn_moe_out-%d", l), rec.Out[l])
	}
	check("result_output", logits)
}

// TestPassesAgree: the logits of the prompt are the same bits whether it
// is fed whole, in chunks (the conv and KV states carried between passes)
// or token by token, at -t 1 and 2; the state holds KV rows for the two
// attention layers and (l_cache-1)·n_embd floats for the two conv layers.
func TestPassesAgree(t *testing.T) {
	prompt := goldenPrompt(t)
	var ref [][]float32
	for _, threads := range []int{1, 2} {
		pool := kernels.NewPool(threads)
		t.Cleanup(pool.Close)
		m, d, raw := goldentest.Load(t, filepath.Join(golden, "models/tiny-lfm2moe-Q8_0.gguf"), model.Options{Pool: pool})
		moe := goldentest.NewRec(m, d, raw, routing)
		for _, size := range []int{len(prompt), 6, 1} {
			st, err := m.NewState(64, model.KVF32)
			if err != nil {
				t.Fatal(err)
			}
			if want := int64(2*2*64*128*4 + 2*2*256*4); st.Bytes() != want {
				t.Fatalf("state of %d bytes, want %d", st.Bytes(), want)
			}
			var got [][]float32
			for i := 0; i < len(prompt); i += size {
				rows, err := m.Forward(context.Background(), st, prompt[i:min(i+size, len(prompt))], moe, true)
				if err != nil {
					t.Fatal(err)
				}
				for _, r := range rows {
					got = append(got, append([]float32(nil), r...))
				}
			}
			if ref == nil {
				ref = got
				continue
			}
			for p := range ref {
				for i := range ref[p] {
					if math.Float32bits(got[p][i]) != math.Float32bits(ref[p][i]) {
						t.Fatalf("-t %d passes of %d: position %d logit %d = %v, whole prompt -t 1: %v", threads, size, p, i, got[p][i], ref[p][i])
					}
				}
			}
		}
	}
}

// TestFamilyKeys: shortconv.l_cache is lfm2moe's own key (not in the
// common HParams): Describe keeps it in FamilyHP, the stages' refusal of a
// too-large state names it (StateKeys), inspect shows the short-conv layers
// from it, and a model without it is refused.
func TestFamilyKeys(t *testing.T) {
	d, raw := goldentest.Open(t, filepath.Join(golden, "models/tiny-lfm2moe-F32.gguf"))
	if own, ok := d.FamilyHP.(lfm2moe.HParams); !ok || own.ShortConvL != 3 {
		t.Fatalf("FamilyHP = %#v, want lfm2moe.HParams{ShortConvL: 3}", d.FamilyHP)
	}
	if keys := model.StateKeys(d); keys != "shortconv.l_cache 3, embedding_length 256" {
		t.Fatalf("StateKeys = %q", keys)
	}
	rows := model.InspectRows(d)
	if len(rows) != 2 || rows[0].Value != "2 of 4 (state 512 floats each)" || rows[1].Value != "3" {
		t.Fatalf("InspectRows = %v", rows)
	}
	d.FamilyHP = lfm2moe.HParams{ShortConvL: 1}
	pool := kernels.NewPool(1)
	defer pool.Close()
	_, err := model.New(d, goldentest.FileSource(raw), model.Options{Pool: pool})
	if !errors.Is(err, model.ErrBadModel) || !strings.Contains(err.Error(), "shortconv.l_cache") {
		t.Fatalf("l_cache 1: %v", err)
	}
}
