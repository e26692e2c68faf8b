// Package modeltest holds what the architectures' tests share: loading a
// GGUF file into a model without the stages, a direct MoE that routes and
// sums experts in rank order while recording every layer's router input,
// logits, choice and output, and llama.cpp's intermediate-tensor dumps
// (testdata/golden/tools/golden-dump --tensors) with the relative error
// the layer-by-layer comparisons use. It is imported by tests only.
package modeltest

import (
	"context"
	"encoding/binary"
	"encoding/json"
	"math"
	"os"
	"path/filepath"
	"strconv"
	"testing"

	"github.com/pipe-engine/pipe/gguf"
	"github.com/pipe-engine/pipe/kernels"
	"github.com/pipe-engine/pipe/model"
	"github.com/pipe-engine/pipe/router"
)

// fileSource serves tensors from the whole file read into memory.
type fileSource struct{ b []byte }

func (s fileSource) TensorBytes(ti *gguf.TensorInfo) ([]byte, error) {
	return s.b[ti.Offset : ti.Offset+ti.Size], nil
}

// Load builds the model at path (its architecture registered by the
// caller's imports) on a pool of threads, and a DirectMoE over its bytes.
func Load(t testing.TB, path string, threads int) (model.Model, *DirectMoE) {
	t.Helper()
	raw, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	f, err := gguf.Open(path)
	if err != nil {
		t.Fatal(err)
	}
	d, err := model.Describe(f)
	if err != nil {
		t.Fatal(err)
	}
	pool := kernels.NewPool(threads)
	t.Cleanup(pool.Close)
	m, err := model.New(d, fileSource{raw}, model.Options{Pool: pool})
	if err != nil {
		t.Fatal(err)
	}
	return m, &DirectMoE{m: m, d: d, file: raw}
}

// DirectMoE routes each token and sums its experts, computed from the file
// bytes, in rank order. After Record it keeps, per layer and token, the
// experts' input X, the router Logits, the chosen IDs and weights W, and
// the output Out.
type DirectMoE struct {
	m                 model.Model
	d                 *model.Desc
	file              []byte
	rec               bool
	X, Logits, W, Out map[int][][]float32
	IDs               map[int][][]int
}

// Record starts recording.
func (r *DirectMoE) Record() {
	r.rec = true
	r.X, r.Logits, r.W, r.Out, r.IDs = map[int][][]float32{}, map[int][][]float32{}, map[int][][]float32{}, map[int][][]float32{}, map[int][][]int{}
}

// RunMoE implements model.MoE.
func (r *DirectMoE) RunMoE(_ context.Context, layer int, x, logits [][]float32, out [][]float32) error {
	spec := r.m.Router(layer)
	var s model.Scratch
	y := make([]float32, len(x[0]))
	probs := make([]float32, router.ScratchLen(spec))
	cp := func(v []float32) []float32 { return append([]float32(nil), v...) }
	for t := range x {
		ids, w := make([]int, spec.K), make([]float32, spec.K)
		if err := router.Route(spec, logits[t], ids, w, probs); err != nil {
			return err
		}
		for rank, e := range ids {
			var parts [][]byte
			for _, sl := range r.d.Experts[layer][e] {
				parts = append(parts, r.file[sl.Off:sl.Off+sl.Len])
			}
			if err := r.m.ComputeExpert(layer, e, parts, 1, x[t], y, &s); err != nil {
				return err
			}
			for i := range y {
				if rank == 0 {
					out[t][i] = y[i] * w[rank]
				} else {
					out[t][i] += float32(y[i] * w[rank])
				}
			}
		}
		if r.rec {
			r.X[layer], r.Logits[layer] = append(r.X[layer], cp(x[t])), append(r.Logits[layer], cp(logits[t]))
			r.IDs[layer], r.W[layer] = append(r.IDs[layer], ids), append(r.W[layer], w)
			r.Out[layer] = append(r.Out[layer], cp(out[t]))
		}
	}
	return nil
}

// KeepLast drops all but the last n tokens' records of layer (llama.cpp's
// graphs keep only the output positions in their last layer).
func (r *DirectMoE) KeepLast(layer, n int) {
	tail := func(v [][]float32) [][]float32 { return v[max(len(v)-n, 0):] }
	r.X[layer], r.Logits[layer], r.W[layer], r.Out[layer] = tail(r.X[layer]), tail(r.Logits[layer]), tail(r.W[layer]), tail(r.Out[layer])
	r.IDs[layer] = r.IDs[layer][max(len(r.IDs[layer])-n, 0):]
}

// Dump is llama.cpp's tensor dump of one prompt pass.
type Dump struct {
	dir   string
	files map[string]string // name -> file (the last node of a name)
}

// LoadDump reads dir/index.json.
func LoadDump(t testing.TB, dir string) *Dump {
	t.Helper()
	b, err := os.ReadFile(filepath.Join(dir, "index.json"))
	if err != nil {
		t.Fatal(err)
	}
	var ix []struct{ Name, File string }
	if err := json.Unmarshal(b, &ix); err != nil {
		t.Fatal(err)
	}
	d := &Dump{dir: dir, files: map[string]string{}}
	for _, e := range ix {
		if e.File != "" {
			d.files[e.Name] = e.File
		}
	}
	return d
}

// F32 reads tensor name (its raw 32-bit words: float32, or int32 bits).
func (d *Dump) F32(t testing.TB, name string) []float32 {
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

// RelErr is max|got-want| / max|want| over token-major rows.
func RelErr(t testing.TB, what string, got [][]float32, want []float32) float64 {
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

// CheckRouting compares layer's recorded choice with llama.cpp's dump
// (ffn_moe_argsort-L, ffn_moe_weights_norm-L, and the scores the choice
// sorted: ffn_moe_probs_biased-L when the router has a selection bias,
// else ffn_moe_logits-L) for every token: the same k experts with the same
// weights, skipping tokens whose k-th and (k+1)-th scores are within 10×
// the layer's relative logit error le (a tie at our precision).
func CheckRouting(t testing.TB, dp *Dump, r *DirectMoE, layer int, le float64) {
	t.Helper()
	sfx := "-" + strconv.Itoa(layer)
	scores := "ffn_moe_logits" + sfx
	if _, ok := dp.files["ffn_moe_probs_biased"+sfx]; ok {
		scores = "ffn_moe_probs_biased" + sfx
	}
	want, order, wn := dp.F32(t, scores), dp.F32(t, "ffn_moe_argsort"+sfx), dp.F32(t, "ffn_moe_weights_norm"+sfx)
	nExp := len(want) / len(r.IDs[layer])
	var maxLogit float64
	for _, v := range want {
		maxLogit = math.Max(maxLogit, math.Abs(float64(v)))
	}
	for tk, ids := range r.IDs[layer] {
		k := len(ids)
		id := func(i int) int { return int(math.Float32bits(order[tk*nExp+i])) }
		if k < nExp {
			if gap := float64(want[tk*nExp+id(k-1)] - want[tk*nExp+id(k)]); gap <= 10*le*maxLogit {
				t.Logf("layer %d token %d: k-th and (k+1)-th router logits %.3g apart, a tie at our precision", layer, tk, gap)
				continue
			}
		}
		rank := map[int]int{}
		for i := 0; i < k; i++ {
			rank[id(i)] = i
		}
		for i, e := range ids {
			lr, ok := rank[e]
			if !ok {
				t.Fatalf("layer %d token %d: experts %v, not llama.cpp's first %d of %v", layer, tk, ids, k, order[tk*nExp:tk*nExp+k])
			}
			if dw := math.Abs(float64(r.W[layer][tk][i] - wn[tk*k+lr])); dw > 10*le {
				t.Errorf("layer %d token %d expert %d: weight %v, llama.cpp %v", layer, tk, e, r.W[layer][tk][i], wn[tk*k+lr])
			}
		}
	}
}
