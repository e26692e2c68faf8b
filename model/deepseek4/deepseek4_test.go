package deepseek4_test

import (
	"context"
	"errors"
	"fmt"
	"path/filepath"
	"strings"
	"testing"

	"github.com/pipe-engine/pipe/kernels"
	"github.com/pipe-engine/pipe/model"
	"github.com/pipe-engine/pipe/model/deepseek4"
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

// TestFileShape: the tiny model's layers are window-only, CSA or HCA as
// its compress_ratios say, its state is what NewState allocates (the raw
// window and the compressors' pending rows per layer, the compressed rows
// per position), its routers gate by √softplus with the selection bias,
// and inspect names the layer kinds, the FFN (all MoE), the hash-routed
// and NextN layers (none), the indexer and the SwiGLU limit.
func TestFileShape(t *testing.T) {
	m, d, _ := goldentest.Load(t, filepath.Join(golden, "models/tiny-deepseek4-F32.gguf"), model.Options{})
	own := d.FamilyHP.(deepseek4.HParams)
	if fmt.Sprint(own.Ratios) != "[0 4 128 4]" || own.IdxTopK != 2 || own.HC != 4 {
		t.Errorf("hyper-parameters %+v", own)
	}
	// per layer the window's 8 raw rows of 96; layers 1, 3: pending kv and
	// score rows 8 × 192 and the indexer's 8 × 128, rows of 96 + 64 per
	// position; layer 2: 128 × 96 twice, rows of 96
	fixed := int64(4*8*96+2*(2*8*192+2*8*128)+2*128*96) * 4
	if got, want := model.StateBytes(d, 100, 4), fixed+int64(2*(96+64)+96)*100*4; got != want {
		t.Errorf("StateBytes = %d, want %d", got, want)
	}
	st, err := m.NewState(100, model.KVF32)
	if err != nil {
		t.Fatal(err)
	}
	if got, want := st.Bytes(), model.StateBytes(d, 100, 4); got != want {
		t.Errorf("State.Bytes() = %d, StateBytes %d", got, want)
	}
	s := m.Router(1)
	if s.Gating != model.ScoredTopK || s.Score == nil || !s.Normalize || s.Scale != 1.5 || len(s.Bias) != 16 || s.K != 4 {
		t.Errorf("layer 1 router %+v", s)
	}
	rows := map[string]string{}
	for _, r := range model.InspectRows(d) {
		rows[r.Key] = r.Value
	}
	if rows["layers"] != "1 window-only (0), 2 CSA ratio 4 + indexer (1 3), 1 HCA ratio 128 (2)" ||
		rows["FFN"] != "every layer MoE: routed top-4 of 16 + 1 shared expert(s); no dense layers" ||
		rows["hash-routed layers"] != "none" || rows["NextN (MTP) layers"] != "none (files with them are refused)" ||
		!strings.HasPrefix(rows["indexer"], "4 heads of 64, top 2") || !strings.HasPrefix(rows["SwiGLU limit"], "0.3 on every layer") || !strings.HasPrefix(rows["rope scaling"], "YaRN ×4 over 64") {
		t.Errorf("inspect rows %q", rows)
	}
}

// TestInspectHashRouted: inspect names the hash-routed layers of the file
// whose layer 0 routes by token id.
func TestInspectHashRouted(t *testing.T) {
	d, _ := goldentest.Open(t, filepath.Join(golden, "deepseek4-hash/models/tiny-deepseek4-hash-F32.gguf"))
	for _, r := range model.InspectRows(d) {
		if r.Key == "hash-routed layers" {
			if want := "1 (0: experts by token id, ffn_gate_tid2eid; no selection bias)"; r.Value != want {
				t.Fatalf("hash-routed layers row %q, want %q", r.Value, want)
			}
			return
		}
	}
	t.Fatal("no hash-routed layers row")
}

// TestRefusesUnsupportedFiles: hyper-parameters the graph does not run are
// refused naming the key.
func TestRefusesUnsupportedFiles(t *testing.T) {
	d, raw := goldentest.Open(t, filepath.Join(golden, "models/tiny-deepseek4-F32.gguf"))
	for name, c := range map[string]struct {
		mut  func(h *model.HParams, own *deepseek4.HParams)
		want error
	}{
		"odd rope":   {func(h *model.HParams, _ *deepseek4.HParams) { h.NRot = 31 }, model.ErrBadModel},
		"gating":     {func(h *model.HParams, _ *deepseek4.HParams) { h.MoE.GatingFunc = 2 }, model.ErrBadModel},
		"hc":         {func(_ *model.HParams, o *deepseek4.HParams) { o.HC = 2 }, model.ErrBadModel},
		"ratio":      {func(_ *model.HParams, o *deepseek4.HParams) { o.Ratios = []int{0, 8, 128, 4} }, model.ErrBadModel},
		"groups":     {func(_ *model.HParams, o *deepseek4.HParams) { o.OGroups = 3 }, model.ErrBadModel},
		"hash table": {func(_ *model.HParams, o *deepseek4.HParams) { o.HashLayers = 1 }, model.ErrBadModel},
		"longrope":   {func(h *model.HParams, _ *deepseek4.HParams) { h.RopeScalingType = "longrope" }, model.ErrUnsupportedArch},
	} {
		d2 := *d
		own := d.FamilyHP.(deepseek4.HParams)
		own.Ratios = append([]int(nil), own.Ratios...)
		c.mut(&d2.HParams, &own)
		d2.FamilyHP = own
		pool := kernels.NewPool(1)
		_, err := model.New(&d2, goldentest.FileSource(raw), model.Options{Pool: pool})
		pool.Close()
		if !errors.Is(err, c.want) {
			t.Errorf("%s: %v, want %v", name, err, c.want)
		}
	}
}
