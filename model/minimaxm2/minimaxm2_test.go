package minimaxm2_test

import (
	"errors"
	"path/filepath"
	"strings"
	"testing"

	"github.com/pipe-engine/pipe/gguf"
	"github.com/pipe-engine/pipe/kernels"
	"github.com/pipe-engine/pipe/model"
	"github.com/pipe-engine/pipe/model/goldentest"
	_ "github.com/pipe-engine/pipe/model/minimaxm2"
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
// routed-expert input (ffn_norm: after the whole-projection q/k-normed,
// partially rotated attention), router logits, the experts chosen by the
// biased sigmoid probabilities with their renormalised weights, the routed
// output, then the logits. Only the order of float sums differs: ≤ 1e-5
// relative. The pass must exercise the selection bias.
func TestIntermediatesMatchLlamaCpp(t *testing.T) {
	goldentest.CheckLayers(t, routing, golden, "tiny-minimax-m2-F32", "ffn_moe_weights_norm", 1e-5)
	dp := goldentest.LoadDump(t, filepath.Join(golden, "tensors/tiny-minimax-m2-F32/p0_fox__ref"))
	moved := 0
	for l := 0; l < 3; l++ {
		moved += dp.BiasChanges(t, l, 16, 4)
	}
	if moved == 0 {
		t.Errorf("the golden pass does not exercise the selection bias")
	}
}

// TestFileShape: the tiny model gates every layer by sigmoid with its own
// selection bias and renormalised, unscaled weights, caches K and V of
// its 3 layers, rotates 32 of each head's 64 dims and norms Q and K over
// the whole projection; inspect says so, and that every layer is MoE
// without a shared expert (the dense / expert split).
func TestFileShape(t *testing.T) {
	m, d, _ := load(t, "tiny-minimax-m2-F32.gguf")
	for l := 0; l < 3; l++ {
		s := m.Router(l)
		if s.Gating != model.SigmoidTopK || !s.Normalize || (s.Scale != 0 && s.Scale != 1) || len(s.Bias) != 16 || s.K != 4 {
			t.Errorf("layer %d router %+v", l, s)
		}
	}
	if &m.Router(0).Bias[0] == &m.Router(1).Bias[0] {
		t.Errorf("layers 0 and 1 share one selection bias")
	}
	st, err := m.NewState(100, model.KVF32)
	if err != nil {
		t.Fatal(err)
	}
	want := int64(3 * 100 * 2 * 2 * 64 * 4)
	if st.Bytes() != want || model.StateBytes(d, 100, 4) != want {
		t.Errorf("KV state %d bytes (family says %d), want %d", st.Bytes(), model.StateBytes(d, 100, 4), want)
	}
	rows := map[string]string{}
	for _, r := range model.InspectRows(d) {
		rows[r.Key] = r.Value
	}
	if rows["rotary dims"] != "32 of head 64 (NeoX)" || rows["q/k norm"] != "whole projection (256 and 128 wide)" ||
		rows["routing"] != "sigmoid top-k with exp_probs_b, renormalised" || rows["layers"] != "3 MoE (no dense layers, no shared experts)" {
		t.Errorf("inspect rows %v", rows)
	}
}

// TestRefusesBadFiles: hyper-parameters the graph cannot run are refused
// as bad models naming the key (a file without expert_gating_func, which
// llama.cpp aborts on, among them); an unknown gating function or RoPE
// scaling as unsupported.
func TestRefusesBadFiles(t *testing.T) {
	_, d, raw := load(t, "tiny-minimax-m2-F32.gguf")
	for name, c := range map[string]struct {
		mut  func(d *model.Desc)
		want error
		key  string
	}{
		"odd rope":    {func(d *model.Desc) { d.HParams.NRot = 33 }, model.ErrBadModel, "minimax-m2.rope.dimension_count = 33"},
		"rope > head": {func(d *model.Desc) { d.HParams.NRot = 128 }, model.ErrBadModel, "minimax-m2.rope.dimension_count = 128"},
		"no ffn":      {func(d *model.Desc) { d.HParams.NFF = 0 }, model.ErrBadModel, "minimax-m2.feed_forward_length = 0"},
		"no gating":   {func(d *model.Desc) { d.HParams.MoE.GatingFunc = 0 }, model.ErrBadModel, "expert_gating_func is missing"},
		"gating":      {func(d *model.Desc) { d.HParams.MoE.GatingFunc = 7 }, model.ErrUnsupportedArch, "expert_gating_func = 7"},
		"yarn":        {func(d *model.Desc) { d.HParams.RopeScalingType = "yarn" }, model.ErrUnsupportedArch, "rope scaling \"yarn\""},
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
