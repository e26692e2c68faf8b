package bailingmoe3_test

import (
	"context"
	"encoding/binary"
	"errors"
	"fmt"
	"math"
	"path/filepath"
	"strings"
	"testing"

	"github.com/pipe-engine/pipe/kernels"
	"github.com/pipe-engine/pipe/model"
	"github.com/pipe-engine/pipe/model/bailingmoe3"
	"github.com/pipe-engine/pipe/model/goldentest"
	"github.com/pipe-engine/pipe/router"
)

// routing is what the recording MoE routes with: the engine's router.
var routing = goldentest.Router{Route: router.Route, ScratchLen: router.ScratchLen}

const golden = "../../testdata/golden"

// TestIntermediatesMatchLlamaCpp runs the F32 tiny model on p0_fox and
// compares, layer by layer, with llama.cpp's dump of the same pass: on
// every MoE layer (2-6) its normed FFN input (after the KDA layers 0, 1, 3, 4 and
// the gated MLA layers 2, 5, 6, the dense FFNs of layers 0 and 1, the
// second with its SwiGLU limit), the router logits, the experts chosen by
// the biased sigmoid among 2 of 4 groups with their renormalised weights
// scaled by 2.5, and the routed sum (layer 6's experts clamped); then the
// logits, after layer 6's clamped shared expert. The only differences are
// the order of float sums: ≤ 1e-5 relative.
func TestIntermediatesMatchLlamaCpp(t *testing.T) {
	const bound = 1e-5
	m, d, raw := goldentest.Load(t, filepath.Join(golden, "models/tiny-bailingmoe3-F32.gguf"), model.Options{})
	toks := goldentest.PromptTokens(t, filepath.Join(golden, "runs/tiny-bailingmoe3-F32/p0_fox__ref.json"))
	st, err := m.NewState(64, model.KVF32)
	if err != nil {
		t.Fatal(err)
	}
	rec := goldentest.NewRec(m, d, raw, routing)
	logits, err := m.Forward(context.Background(), st, toks, rec, true)
	if err != nil {
		t.Fatal(err)
	}
	dp := goldentest.LoadDump(t, filepath.Join(golden, "tensors/tiny-bailingmoe3-F32/p0_fox__ref"))
	check := func(what string, got [][]float32) float64 {
		e := goldentest.RelErr(t, what, got, dp.F32(t, what))
		if e > bound {
			t.Errorf("%s: relative error %.3g > %.0e", what, e, bound)
		}
		return e
	}
	hp := d.HParams
	for l := 0; l < hp.MoE.LeadingDense; l++ {
		if _, ok := rec.X[l]; ok {
			t.Fatalf("dense layer %d went through the MoE", l)
		}
	}
	for l := hp.MoE.LeadingDense; l < hp.NLayer; l++ {
		check(fmt.Sprintf("norm-%d", l), unweighted(t, d, raw, l, rec.X[l]))
		le := check(fmt.Sprintf("ffn_moe_logits-%d", l), rec.Logits[l])
		dp.CheckRouting(t, rec, l, hp.NExpert, m.Router(l).K, "ffn_moe_weights_scaled", le)
		check(fmt.Sprintf("ffn_moe_out-%d", l), rec.Out[l])
	}
	check("result_output", logits)
}

// unweighted divides the FFN inputs xs of layer l by its ffn_norm weight:
// llama.cpp's dump names the RMS norm before the weight ("norm-L"), not
// the product.
func unweighted(t *testing.T, d *model.Desc, raw []byte, l int, xs [][]float32) [][]float32 {
	t.Helper()
	ti := d.Tensors[fmt.Sprintf("blk.%d.ffn_norm.weight", l)]
	b, err := goldentest.FileSource(raw).TensorBytes(ti)
	if err != nil {
		t.Fatal(err)
	}
	var out [][]float32
	for _, x := range xs {
		y := make([]float32, len(x))
		for i := range y {
			y[i] = x[i] / math.Float32frombits(binary.LittleEndian.Uint32(b[4*i:]))
		}
		out = append(out, y)
	}
	return out
}

// TestFileShape: the tiny model's layers are KDA or gated MLA as its
// head_count_kv says (the trailing partial group MLA), its state is the
// MLA layers' latent rows plus the KDA layers' convolution and delta-rule
// states, its MoE layers gate by biased sigmoid in groups, and inspect
// names the layer kinds and the SwiGLU limits.
func TestFileShape(t *testing.T) {
	m, d, _ := goldentest.Load(t, filepath.Join(golden, "models/tiny-bailingmoe3-F32.gguf"), model.Options{})
	own := d.FamilyHP.(bailingmoe3.HParams)
	var kinds []string
	for l := 0; l < d.HParams.NLayer; l++ {
		kinds = append(kinds, map[bool]string{true: "K", false: "M"}[own.IsKDA(l)])
	}
	if got := strings.Join(kinds, ""); got != "KKMKKMM" {
		t.Errorf("layer kinds %s, want KKMKKMM", got)
	}
	// 3 MLA layers × (64 + 32) per position; 4 KDA layers × (3 convs × 3 × 256 + 4 heads × 64²) float32
	kda := int64(4 * 4 * (3*3*256 + 4*64*64))
	if got, want := model.StateBytes(d, 100, 4), int64(3*96*100*4)+kda; got != want {
		t.Errorf("StateBytes = %d, want %d", got, want)
	}
	st, err := m.NewState(100, model.KVF32)
	if err != nil {
		t.Fatal(err)
	}
	if got, want := st.Bytes(), model.StateBytes(d, 100, 4); got != want {
		t.Errorf("State.Bytes() = %d, StateBytes %d", got, want)
	}
	s := m.Router(3)
	if s.Gating != model.SigmoidTopK || !s.Normalize || s.Scale != 2.5 || s.Groups != 4 || s.GroupsUsed != 2 || len(s.Bias) != 16 || s.K != 4 {
		t.Errorf("layer 3 router %+v", s)
	}
	rows := map[string]string{}
	for _, r := range model.InspectRows(d) {
		rows[r.Key] = r.Value
	}
	if !strings.HasPrefix(rows["layers"], "4 KDA + 3 gated MLA (MLA: 2 5 6)") || !strings.Contains(rows["SwiGLU limits"], "experts 6:0.25") ||
		!strings.Contains(rows["SwiGLU limits"], "shared/dense 1:0.3 6:0.2") {
		t.Errorf("inspect rows %q", rows)
	}
}

// TestRefusesUnsupportedFiles: bad or unsupported hyper-parameters are
// refused naming the key.
func TestRefusesUnsupportedFiles(t *testing.T) {
	d, raw := goldentest.Open(t, filepath.Join(golden, "models/tiny-bailingmoe3-F32.gguf"))
	for name, c := range map[string]struct {
		mut  func(h *model.HParams)
		want error
	}{
		"rope too wide": {func(h *model.HParams) { h.NRot = h.MLA.KeyLength }, model.ErrBadModel},
		"odd rope":      {func(h *model.HParams) { h.NRot = 31 }, model.ErrBadModel},
		"gating":        {func(h *model.HParams) { h.MoE.GatingFunc = 3 }, model.ErrUnsupportedArch},
		"groups":        {func(h *model.HParams) { h.MoE.Groups, h.MoE.GroupsUsed = 3, 1 }, model.ErrBadModel},
		"yarn":          {func(h *model.HParams) { h.RopeScalingType = "yarn" }, model.ErrUnsupportedArch},
	} {
		d2 := *d
		c.mut(&d2.HParams)
		pool := kernels.NewPool(1)
		_, err := model.New(&d2, goldentest.FileSource(raw), model.Options{Pool: pool})
		pool.Close()
		if !errors.Is(err, c.want) {
			t.Errorf("%s: %v, want %v", name, err, c.want)
		}
	}
}
