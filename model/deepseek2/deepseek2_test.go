package deepseek2_test

import (
	"context"
	"errors"
	"fmt"
	"math"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"github.com/pipe-engine/pipe/kernels"
	"github.com/pipe-engine/pipe/model"
	_ "github.com/pipe-engine/pipe/model/deepseek2"
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
// layer by layer, with llama.cpp's dump of the same pass: every layer's FFN
// input (after the latent attention; layer 0's FFN is dense), and on the MoE
// layers the router logits, the sigmoid probabilities, the experts chosen
// (by the biased probabilities among the two best of four groups), their
// renormalised and scaled weights and the routed experts' sum; then the
// logits of every position. The only differences are the order of float
// sums: ≤ 1e-5 relative (measured ≤ 6e-7).
func TestIntermediatesMatchLlamaCpp(t *testing.T) {
	const bound = 1e-5
	m, d, raw := load(t, "tiny-deepseek2-F32.gguf")
	toks := goldentest.PromptTokens(t, filepath.Join(golden, "runs/tiny-deepseek2-F32/p0_fox__ref.json"))
	st, err := m.NewState(64, model.KVF32)
	if err != nil {
		t.Fatal(err)
	}
	rec := goldentest.NewRec(m, d, raw, routing)
	logits, err := m.Forward(context.Background(), st, toks, rec, true)
	if err != nil {
		t.Fatal(err)
	}
	dp := goldentest.LoadDump(t, filepath.Join(golden, "tensors/tiny-deepseek2-F32/p0_fox__ref"))
	check := func(what string, got [][]float32) {
		if e := goldentest.RelErr(t, what, got, dp.F32(t, what)); e > bound {
			t.Errorf("%s: relative error %.3g > %.0e", what, e, bound)
		}
	}
	hp := d.HParams
	if _, ok := rec.X[0]; ok || hp.MoE.LeadingDense != 1 {
		t.Fatalf("layer 0 went through the MoE (leading dense layers %d)", hp.MoE.LeadingDense)
	}
	k, n := hp.NExpertUsed, hp.NExpert
	biasMoved, groupMoved := 0, 0
	for l := 1; l < hp.NLayer; l++ {
		check(fmt.Sprintf("ffn_norm-%d", l), rec.X[l])
		check(fmt.Sprintf("ffn_moe_logits-%d", l), rec.Logits[l])
		spec := m.Router(l)
		probs := make([][]float32, len(toks))
		for tk := range toks {
			probs[tk] = make([]float32, router.ScratchLen(spec))
			if err := router.Route(spec, rec.Logits[l][tk], make([]int, k), make([]float32, k), probs[tk]); err != nil {
				t.Fatal(err)
			}
			probs[tk] = probs[tk][:n]
		}
		check(fmt.Sprintf("ffn_moe_probs-%d", l), probs)
		order := i32(dp.F32(t, fmt.Sprintf("ffn_moe_argsort-%d", l)))
		first := len(toks) - len(order)/n // the last layer: the output rows only
		ws := dp.F32(t, fmt.Sprintf("ffn_moe_weights_scaled-%d", l))
		biased := dp.F32(t, fmt.Sprintf("ffn_moe_probs_biased-%d", l))
		for tk := range toks[first:] {
			want := order[tk*n : tk*n+k]
			if got := rec.IDs[l][first+tk]; !slices.Equal(got, want) {
				t.Errorf("layer %d token %d: experts %v, llama.cpp %v", l, tk, got, want)
				continue
			}
			for r := 0; r < k; r++ {
				if dw := math.Abs(float64(rec.Ws[l][first+tk][r] - ws[tk*k+r])); dw > bound {
					t.Errorf("layer %d token %d rank %d: weight %v, llama.cpp %v", l, first+tk, r, rec.Ws[l][first+tk][r], ws[tk*k+r])
				}
			}
			// what the bias and the groups decided: the unbiased top-k, and
			// the biased top-k over every group
			plain, all := make([]int, k), make([]int, k)
			topK(probs[first+tk], plain)
			topK(biased[tk*n:(tk+1)*n], all)
			if !sameSet(plain, all) {
				biasMoved++
			}
			if !sameSet(all, want) {
				groupMoved++
			}
		}
		check(fmt.Sprintf("ffn_moe_out-%d", l), rec.Out[l])
	}
	check("result_output", logits)
	t.Logf("choices the selection bias changed: %d, the expert groups: %d", biasMoved, groupMoved)
	if biasMoved == 0 || groupMoved == 0 {
		t.Errorf("the golden pass does not exercise the routing variants (bias changed %d choices, groups %d)", biasMoved, groupMoved)
	}
}

// i32 is the int32 tensor whose raw words Dump.F32 read.
func i32(words []float32) []int {
	out := make([]int, len(words))
	for i, w := range words {
		out[i] = int(int32(math.Float32bits(w)))
	}
	return out
}

// topK writes the indices of the len(ids) largest values of v, largest first.
func topK(v []float32, ids []int) {
	idx := make([]int, len(v))
	for i := range idx {
		idx[i] = i
	}
	slices.SortStableFunc(idx, func(a, b int) int {
		switch {
		case v[a] > v[b]:
			return -1
		case v[a] < v[b]:
			return 1
		}
		return 0
	})
	copy(ids, idx)
}

func sameSet(a, b []int) bool {
	x, y := slices.Clone(a), slices.Clone(b)
	slices.Sort(x)
	slices.Sort(y)
	return slices.Equal(x, y)
}

// TestLatentCache: the KV cache holds one row of kv_lora_rank + n_rot per
// position and layer (64 + 32 floats), as llama.cpp's K-only MLA cache,
// and HParams.KVRow (the budget's estimate) says the same.
func TestLatentCache(t *testing.T) {
	m, d, _ := load(t, "tiny-deepseek2-F32.gguf")
	hp := d.HParams
	if hp.KVRow() != 96 || hp.MLA.KVLoraRank != 64 || hp.NRot != 32 {
		t.Fatalf("KVRow %d (kv_lora_rank %d, n_rot %d), want 96", hp.KVRow(), hp.MLA.KVLoraRank, hp.NRot)
	}
	for _, kv := range []model.KVType{model.KVF16, model.KVF32} {
		st, err := m.NewState(100, kv)
		if err != nil {
			t.Fatal(err)
		}
		elem := int64(2)
		if kv == model.KVF32 {
			elem = 4
		}
		if want := int64(hp.NLayer) * 100 * 96 * elem; st.Bytes() != want {
			t.Errorf("%v: cache %d bytes, want %d", kv, st.Bytes(), want)
		}
	}
}

// TestFileRouter: the tiny model's MoE layers gate by sigmoid with their
// selection bias, renormalised weights scaled by 2.5, and 2 of 4 expert
// groups.
func TestFileRouter(t *testing.T) {
	m, _, _ := load(t, "tiny-deepseek2-F32.gguf")
	s := m.Router(1)
	if s.Gating != model.SigmoidTopK || !s.Normalize || s.Scale != 2.5 || s.Groups != 4 || s.GroupsUsed != 2 || len(s.Bias) != 16 || s.K != 3 {
		t.Errorf("layer 1 router %+v", s)
	}
}

// TestRefusesLegacyAndBadFiles: a file without the _mla key lengths (from
// before llama.cpp split attn_kv_b) is refused as unsupported, inconsistent
// latent geometry as a bad model.
func TestRefusesLegacyAndBadFiles(t *testing.T) {
	_, d, raw := load(t, "tiny-deepseek2-F32.gguf")
	for name, c := range map[string]struct {
		mut  func(h *model.HParams)
		want error
		key  string // the key the error names ("": not checked)
	}{
		"legacy":       {func(h *model.HParams) { h.MLA.KeyLength, h.MLA.ValLength = 0, 0 }, model.ErrUnsupportedArch, ""},
		"no latent":    {func(h *model.HParams) { h.MLA.KVLoraRank = 0 }, model.ErrBadModel, "deepseek2.attention.kv_lora_rank = 0"},
		"rope too big": {func(h *model.HParams) { h.NRot = h.MLA.KeyLength }, model.ErrBadModel, "deepseek2.attention.key_length_mla"},
		"odd rope":     {func(h *model.HParams) { h.NRot = 3 }, model.ErrBadModel, "deepseek2.rope.dimension_count = 3"},
		"dense layers": {func(h *model.HParams) { h.MoE.LeadingDense = h.NLayer + 1 }, model.ErrBadModel, "deepseek2.leading_dense_block_count"},
		"no ffn":       {func(h *model.HParams) { h.NFFExp = 0 }, model.ErrBadModel, "deepseek2.expert_feed_forward_length = 0"},
		"groups":       {func(h *model.HParams) { h.MoE.Groups, h.MoE.GroupsUsed = 3, 1 }, model.ErrBadModel, ""},
	} {
		d2 := *d
		c.mut(&d2.HParams)
		pool := kernels.NewPool(1)
		_, err := model.New(&d2, goldentest.FileSource(raw), model.Options{Pool: pool})
		pool.Close()
		if !errors.Is(err, c.want) {
			t.Errorf("%s: %v, want %v", name, err, c.want)
		}
		// issue 35: the key, not a dump of every hyper-parameter
		if err != nil && c.key != "" && (!strings.Contains(err.Error(), c.key) || strings.Contains(err.Error(), "{")) {
			t.Errorf("%s: %v, want it to name %s and only that", name, err, c.key)
		}
	}
}
