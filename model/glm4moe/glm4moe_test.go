package glm4moe_test

import (
	"errors"
	"fmt"
	"math"
	"path/filepath"
	"strings"
	"testing"

	"github.com/pipe-engine/pipe/gguf"
	"github.com/pipe-engine/pipe/kernels"
	"github.com/pipe-engine/pipe/model"
	_ "github.com/pipe-engine/pipe/model/glm4moe"
	"github.com/pipe-engine/pipe/model/goldentest"
	"github.com/pipe-engine/pipe/router"
)

// routing is what the recording MoE routes with: the engine's router.
var routing = goldentest.Router{Route: router.Route, ScratchLen: router.ScratchLen}

const golden = "../../testdata/golden"

func load(t *testing.T, name string) (model.Model, *model.Desc, []byte) {
	return goldentest.Load(t, filepath.Join(golden, "models", name), model.Options{})
}

// TestIntermediatesMatchLlamaCpp runs the F32 model on p0_fox and compares,
// layer by layer, with llama.cpp's dump of the same pass: every layer's
// FFN input (post_attn_norm: after the biased, q/k-normed, partially
// rotated attention; layer 0's FFN is dense) and its output (l_out), and
// on the MoE layers the router logits, the sigmoid probabilities, the
// experts chosen by the biased probabilities, their renormalised and
// scaled weights and the routed experts' sum; then the logits. Only the
// order of float sums differs: ≤ 1e-5 relative.
func TestIntermediatesMatchLlamaCpp(t *testing.T) {
	const bound = 1e-5
	m, d, raw := load(t, "tiny-glm4moe-F32.gguf")
	toks := goldentest.PromptTokens(t, filepath.Join(golden, "runs/tiny-glm4moe-F32/p0_fox__ref.json"))
	st, err := m.NewState(64, model.KVF32)
	if err != nil {
		t.Fatal(err)
	}
	rec := goldentest.NewRec(m, d, raw, routing)
	logits, err := m.Forward(t.Context(), st, toks, rec, true)
	if err != nil {
		t.Fatal(err)
	}
	dp := goldentest.LoadDump(t, filepath.Join(golden, "tensors/tiny-glm4moe-F32/p0_fox__ref"))
	check := func(what string, got [][]float32) float64 {
		e := goldentest.RelErr(t, what, got, dp.F32(t, what))
		if e > bound {
			t.Errorf("%s: relative error %.3g > %.0e", what, e, bound)
		}
		return e
	}
	hp := d.HParams
	if _, ok := rec.X[0]; ok || hp.MoE.LeadingDense != 1 {
		t.Fatalf("layer 0 went through the MoE (leading dense layers %d)", hp.MoE.LeadingDense)
	}
	biasMoved := 0
	for l := 1; l < hp.NLayer-1; l++ { // the last block is the NextN layer
		check(fmt.Sprintf("post_attn_norm-%d", l), rec.X[l])
		check(fmt.Sprintf("ffn_moe_logits-%d", l), rec.Logits[l])
		checkRouting(t, dp, rec, l, hp.NExpert, m.Router(l).K, bound)
		check(fmt.Sprintf("ffn_moe_out-%d", l), rec.Out[l])
		biasMoved += dp.BiasChanges(t, l, hp.NExpert, m.Router(l).K)
	}
	check("result_output", logits)
	if _, ok := rec.X[hp.NLayer-1]; ok {
		t.Errorf("the NextN layer %d was run", hp.NLayer-1)
	}
	if biasMoved == 0 {
		t.Errorf("the golden pass does not exercise the selection bias")
	}
}

// checkRouting: every token of layer l routes to llama.cpp's experts (its
// argsort of the biased probabilities) with its renormalised, scaled
// weights (ffn_moe_weights_scaled) within bound. llama.cpp's last run layer
// keeps only the output position.
func checkRouting(t *testing.T, dp *goldentest.Dump, rec *goldentest.Rec, l, n, k int, bound float64) {
	t.Helper()
	order := dp.F32(t, fmt.Sprintf("ffn_moe_argsort-%d", l)) // int32 bits
	ws := dp.F32(t, fmt.Sprintf("ffn_moe_weights_scaled-%d", l))
	nTok := len(order) / n
	first := len(rec.IDs[l]) - nTok
	for tk := 0; tk < nTok; tk++ {
		rank := map[int]int{}
		for r := 0; r < k; r++ {
			rank[int(int32(math.Float32bits(order[tk*n+r])))] = r
		}
		for r, e := range rec.IDs[l][first+tk] {
			lr, ok := rank[e]
			if !ok {
				t.Fatalf("layer %d token %d: experts %v, llama.cpp's argsort %v", l, tk, rec.IDs[l][first+tk], order[tk*n:tk*n+k])
			}
			if dw := math.Abs(float64(rec.Ws[l][first+tk][r] - ws[tk*k+lr])); dw > bound {
				t.Errorf("layer %d token %d expert %d: weight %v, llama.cpp %v", l, tk, e, rec.Ws[l][first+tk][r], ws[tk*k+lr])
			}
		}
	}
}

// TestFileShape: the tiny model runs 3 of its 4 blocks (the last is the
// NextN layer), caches K and V of those 3 only, gates layers 1-2 by
// sigmoid with their selection bias, renormalised weights scaled by 2.5,
// and rotates 32 of each head's 64 dims.
func TestFileShape(t *testing.T) {
	m, d, _ := load(t, "tiny-glm4moe-F32.gguf")
	s := m.Router(1)
	if s.Gating != model.SigmoidTopK || !s.Normalize || s.Scale != 2.5 || len(s.Bias) != 16 || s.K != 4 {
		t.Errorf("layer 1 router %+v", s)
	}
	st, err := m.NewState(100, model.KVF32)
	if err != nil {
		t.Fatal(err)
	}
	want := int64(3 * 100 * 2 * 2 * 64 * 4)
	if st.Bytes() != want || model.StateBytes(d, 100, 4) != want {
		t.Errorf("KV state %d bytes (family says %d), want %d (3 run layers)", st.Bytes(), model.StateBytes(d, 100, 4), want)
	}
	rows := map[string]string{}
	for _, r := range model.InspectRows(d) {
		rows[r.Key] = r.Value
	}
	if rows["layers run"] != "3 of 4: 1 dense + 2 MoE" || rows["NextN (MTP) layers"] != "1 (blk.3: loaded, not run)" ||
		rows["rotary dims"] != "32 of head 64 (NeoX)" {
		t.Errorf("inspect rows %v", rows)
	}
}

// TestRefusesBadFiles: hyper-parameters the graph cannot run, and a NextN
// layer without the tensors llama.cpp requires, are refused as bad models
// naming the key or tensor; multi-section RoPE as unsupported.
func TestRefusesBadFiles(t *testing.T) {
	_, d, raw := load(t, "tiny-glm4moe-F32.gguf")
	for name, c := range map[string]struct {
		mut  func(d *model.Desc)
		want error
		key  string
	}{
		"odd rope":     {func(d *model.Desc) { d.HParams.NRot = 33 }, model.ErrBadModel, "glm4moe.rope.dimension_count = 33"},
		"rope > head":  {func(d *model.Desc) { d.HParams.NRot = 128 }, model.ErrBadModel, "glm4moe.rope.dimension_count = 128"},
		"dense layers": {func(d *model.Desc) { d.HParams.MoE.LeadingDense = 4 }, model.ErrBadModel, "glm4moe.leading_dense_block_count = 4"},
		"no ffn":       {func(d *model.Desc) { d.HParams.NFFExp = 0 }, model.ErrBadModel, "glm4moe.expert_feed_forward_length = 0"},
		"gating":       {func(d *model.Desc) { d.HParams.MoE.GatingFunc = 7 }, model.ErrUnsupportedArch, "expert_gating_func = 7"},
		"mrope":        {func(d *model.Desc) { d.HParams.RopeSections = []int{8, 12, 12, 0} }, model.ErrUnsupportedArch, "rope.dimension_sections"},
		"nextn tensor": {func(d *model.Desc) { delete(d.Tensors, "blk.3.nextn.eh_proj.weight") }, model.ErrBadModel, "blk.3.nextn.eh_proj.weight"},
		"nextn shape": {func(d *model.Desc) {
			ti := *d.Tensors["blk.3.nextn.enorm.weight"]
			ti.Dims = []uint64{255}
			d.Tensors["blk.3.nextn.enorm.weight"] = &ti
		}, model.ErrBadModel, "blk.3.nextn.enorm.weight"},
	} {
		d2 := *d
		d2.Tensors = map[string]*gguf.TensorInfo{}
		for k, v := range d.Tensors {
			d2.Tensors[k] = v
		}
		c.mut(&d2)
		pool := kernels.NewPool(1)
		_, err := model.New(&d2, goldentest.FileSource(raw), model.Options{Pool: pool})
		pool.Close()
		if !errors.Is(err, c.want) || err == nil || !strings.Contains(err.Error(), c.key) {
			t.Errorf("%s: %v, want %v naming %s", name, err, c.want, c.key)
		}
	}
}
