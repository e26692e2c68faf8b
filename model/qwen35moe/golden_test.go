package qwen35moe_test

import (
	"context"
	"encoding/binary"
	"encoding/json"
	"fmt"
	"math"
	"os"
	"path/filepath"
	"testing"

	"github.com/pipe-engine/pipe/model"
)

const golden = "../../testdata/golden"

// dump is llama.cpp's tensor dump of the F32 prompt pass of p0_fox
// (testdata/golden/tools/golden-dump --tensors).
type dump struct {
	dir   string
	files map[string]string // name -> file (the last node of a name)
}

func loadDump(t *testing.T) *dump {
	t.Helper()
	dir := filepath.Join(golden, "tensors/tiny-qwen35moe-F32/p0_fox__ref")
	b, err := os.ReadFile(filepath.Join(dir, "index.json"))
	if err != nil {
		t.Fatal(err)
	}
	var ix []struct{ Name, File string }
	if err := json.Unmarshal(b, &ix); err != nil {
		t.Fatal(err)
	}
	d := &dump{dir: dir, files: map[string]string{}}
	for _, e := range ix {
		if e.File != "" {
			d.files[e.Name] = e.File
		}
	}
	return d
}

// f32 reads tensor name (its raw 32-bit words: float32, or int32 bits).
func (d *dump) f32(t *testing.T, name string) []float32 {
	t.Helper()
	b, err := os.ReadFile(filepath.Join(d.dir, d.files[name]))
	if err != nil {
		t.Fatalf("%s: %v", name, err)
	}
	out := make([]float32, len(b)/4)
	for i := range out {
		out[i] = math.Float32frombits(binary.LittleEndian.Uint32(b[4*i:]))
	}
	return out
}

// goldenModel loads the golden F32 model and its p0_fox prompt ids.
func goldenModel(t *testing.T) (model.Model, *directMoE, []int32) {
	t.Helper()
	m, rec := load(t, filepath.Join(golden, "models/tiny-qwen35moe-F32.gguf"), 1)
	rec.x, rec.ids, rec.logits, rec.ws, rec.outs = map[int][][]float32{}, map[int][][]int{}, map[int][][]float32{}, map[int][][]float32{}, map[int][][]float32{}
	b, err := os.ReadFile(filepath.Join(golden, "runs/tiny-qwen35moe-F32/p0_fox__ref.json"))
	if err != nil {
		t.Fatal(err)
	}
	var run struct {
		PromptTokens []int32 `json:"prompt_tokens"`
	}
	if err := json.Unmarshal(b, &run); err != nil {
		t.Fatal(err)
	}
	return m, rec, run.PromptTokens
}

// relErr is max|got-want| / max|want| over token-major rows.
func relErr(t *testing.T, what string, got [][]float32, want []float32) float64 {
	t.Helper()
	if len(got) == 0 || len(want)%len(got) != 0 {
		t.Fatalf("%s: %d rows, llama.cpp %d values", what, len(got), len(want))
	}
	w := len(want) / len(got)
	var maxAbs, maxDiff float64
	for tk, row := range got {
		if len(row) != w {
			t.Fatalf("%s: rows of %d, llama.cpp %d", what, len(row), w)
		}
		for i, v := range row {
			maxAbs = math.Max(maxAbs, math.Abs(float64(want[tk*w+i])))
			maxDiff = math.Max(maxDiff, math.Abs(float64(v-want[tk*w+i])))
		}
	}
	t.Logf("%s: max |Δ| %.3g = %.3g × max|x|", what, maxDiff, maxDiff/maxAbs)
	return maxDiff / maxAbs
}

// TestIntermediatesMatchLlamaCpp runs the golden F32 model on p0_fox and
// compares, layer by layer, with llama.cpp's dump of the same pass: the FFN
// input (attn_post_norm: the delta-net or gated attention output through
// the residual and the norm), the router logits, the top-2 experts and
// their renormalised weights, and the routed-expert output; the last
// position's logits last. A divergence shows at its first layer and op. The
// only differences are float summation orders (ggml's SIMD dot products,
// and its delta rule's, vs ours), a few 1e-7 relative; bound 1e-5.
// Experts are compared where llama.cpp's 2nd and 3rd router logits are
// further apart than 10× the layer's logit error (a closer pair is a tie at
// our precision).
func TestIntermediatesMatchLlamaCpp(t *testing.T) {
	const bound = 1e-5
	m, rec, prompt := goldenModel(t)
	st, err := m.NewState(64, model.KVF32)
	if err != nil {
		t.Fatal(err)
	}
	logits, err := m.Forward(context.Background(), st, prompt, rec, true)
	if err != nil {
		t.Fatal(err)
	}
	dp := loadDump(t)
	check := func(what string, got [][]float32) float64 {
		e := relErr(t, what, got, dp.f32(t, what))
		if e > bound {
			t.Errorf("%s: relative error %.3g > %.0e", what, e, bound)
		}
		return e
	}
	nExp := m.Router(0).NExpert
	for l := range m.Desc().HParams.NLayer {
		check(fmt.Sprintf("attn_post_norm-%d", l), rec.x[l])
		le := check(fmt.Sprintf("ffn_moe_logits-%d", l), rec.logits[l])
		want := dp.f32(t, fmt.Sprintf("ffn_moe_logits-%d", l))
		order := dp.f32(t, fmt.Sprintf("ffn_moe_argsort-%d", l)) // int32 bits, nExp per token
		wn := dp.f32(t, fmt.Sprintf("ffn_moe_weights_norm-%d", l))
		var maxLogit float64
		for _, v := range want {
			maxLogit = math.Max(maxLogit, math.Abs(float64(v)))
		}
		for tk := range prompt {
			id := func(r int) int { return int(math.Float32bits(order[tk*nExp+r])) }
			if gap := float64(want[tk*nExp+id(1)] - want[tk*nExp+id(2)]); gap <= 10*le*maxLogit {
				t.Logf("layer %d token %d: 2nd/3rd router logits %.3g apart, a tie at our precision", l, tk, gap)
				continue
			}
			for r := 0; r < 2; r++ {
				e, w := rec.ids[l][tk][r], rec.ws[l][tk][r]
				lr, ok := map[int]int{id(0): 0, id(1): 1}[e]
				if !ok {
					t.Fatalf("layer %d token %d: experts %v, llama.cpp [%d %d]", l, tk, rec.ids[l][tk], id(0), id(1))
				}
				if dw := math.Abs(float64(w - wn[tk*2+lr])); dw > 10*le {
					t.Errorf("layer %d token %d expert %d: weight %v, llama.cpp %v", l, tk, e, w, wn[tk*2+lr])
				}
			}
		}
		check(fmt.Sprintf("ffn_moe_out-%d", l), rec.outs[l])
	}
	check("result_output", logits[len(logits)-1:]) // llama.cpp's pass outputs the last position
}
