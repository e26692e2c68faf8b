// Package goldentest holds what the architectures' layer-by-layer tests
// share: a model loaded from a whole GGUF in memory, a MoE that records
// what the model hands it per layer (expert inputs, router logits and
// inputs, the routing and the output) while computing the routed experts
// from the file's bytes, and llama.cpp's eval-callback tensor dumps
// (testdata/golden/README.md, section 5) with the comparisons against them;
// and the golden run files (section 4: Run, Runs, Rows, RowErr, Argmax),
// which the families' model-level tests read and package decode/goldenruns
// drives through the whole engine; and the Q8_0 activation-rounding checks
// of the families' rounding tests (q8.go: BitsToF32, Q8Quants, GGMLQ8).
// Only tests import it.
//
// The recording MoE routes with the Router it is handed — package router's
// Route and ScratchLen in every test — rather than importing package router,
// which imports package model: this package sits beside the model it tests
// and below the router.
package goldentest

import (
	"context"
	"encoding/binary"
	"encoding/json"
	"fmt"
	"math"
	"os"
	"path/filepath"
	"testing"

	"github.com/pipe-engine/pipe/gguf"
	"github.com/pipe-engine/pipe/kernels"
	"github.com/pipe-engine/pipe/model"
)

// FileSource serves tensors from the whole file in memory.
type FileSource []byte

// TensorBytes implements model.DenseSource.
func (s FileSource) TensorBytes(ti *gguf.TensorInfo) ([]byte, error) {
	if ti.Offset+ti.Size > uint64(len(s)) {
		return nil, fmt.Errorf("tensor %s beyond the file", ti.Name)
	}
	return s[ti.Offset : ti.Offset+ti.Size], nil
}

// Open reads the GGUF at path whole and describes it.
func Open(t *testing.T, path string) (*model.Desc, []byte) {
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
	return d, raw
}

// Load opens the model at path and builds it with opt, on a one-thread
// pool (closed when the test ends) when opt has none.
func Load(t *testing.T, path string, opt model.Options) (model.Model, *model.Desc, []byte) {
	t.Helper()
	d, raw := Open(t, path)
	if opt.Pool == nil {
		pool := kernels.NewPool(1)
		t.Cleanup(pool.Close)
		opt.Pool = pool
	}
	m, err := model.New(d, FileSource(raw), opt)
	if err != nil {
		t.Fatal(err)
	}
	return m, d, raw
}

// Router is the routing the recording MoE uses: router.Route and
// router.ScratchLen.
type Router struct {
	// Route selects spec.K experts from a token's logits into ids and
	// weights, with probs as scratch of ScratchLen(spec) floats.
	Route      func(spec model.RouterSpec, logits []float32, ids []int, weights []float32, probs []float32) error
	ScratchLen func(spec model.RouterSpec) int
}

// Rec is a model.RouterInputMoE that routes with the model's RouterSpec,
// computes every routed expert from the file's bytes, sums in rank order and
// records, per layer and token, what it was handed and what it computed.
type Rec struct {
	m                            model.Model
	rt                           Router
	d                            *model.Desc
	file                         []byte
	X, Logits, RouterIn, Out, Ws map[int][][]float32
	IDs                          map[int][][]int
}

// NewRec returns a recording MoE for m (described by d, bytes file) that
// routes with rt.
func NewRec(m model.Model, d *model.Desc, file []byte, rt Router) *Rec {
	mk := func() map[int][][]float32 { return map[int][][]float32{} }
	return &Rec{m: m, rt: rt, d: d, file: file, X: mk(), Logits: mk(), RouterIn: mk(), Out: mk(), Ws: mk(), IDs: map[int][][]int{}}
}

// RunMoE implements model.MoE.
func (r *Rec) RunMoE(ctx context.Context, layer int, x, logits, out [][]float32) error {
	return r.RunMoERouted(ctx, layer, x, logits, x, out)
}

// RunMoERouted implements model.RouterInputMoE.
func (r *Rec) RunMoERouted(_ context.Context, layer int, x, logits, routerIn, out [][]float32) error {
	spec := r.m.Router(layer)
	var s model.Scratch
	probs := make([]float32, r.rt.ScratchLen(spec))
	y := make([]float32, len(x[0]))
	cp := func(v []float32) []float32 { return append([]float32(nil), v...) }
	for t := range x {
		ids, w := make([]int, spec.K), make([]float32, spec.K)
		if err := r.rt.Route(spec, logits[t], ids, w, probs); err != nil {
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
		r.IDs[layer] = append(r.IDs[layer], ids)
		r.Ws[layer] = append(r.Ws[layer], w)
		r.X[layer] = append(r.X[layer], cp(x[t]))
		r.Logits[layer] = append(r.Logits[layer], cp(logits[t]))
		r.RouterIn[layer] = append(r.RouterIn[layer], cp(routerIn[t]))
		r.Out[layer] = append(r.Out[layer], cp(out[t]))
	}
	return nil
}

// Dump is llama.cpp's tensor dump of one prompt pass.
type Dump struct {
	dir   string
	files map[string]string // name -> file of the last node of that name
}

// LoadDump reads dir/index.json.
func LoadDump(t *testing.T, dir string) *Dump {
	t.Helper()
	b, err := os.ReadFile(filepath.Join(dir, "index.json"))
	if err != nil {
		t.Fatal(err)
	}
	var ix []struct{ Name, File string }
	if err := json.Unmarshal(b, &ix); err != nil {
		t.Fatalf("%s: %v", dir, err)
	}
	d := &Dump{dir: dir, files: map[string]string{}}
	for _, e := range ix {
		d.files[e.Name] = e.File
	}
	return d
}

// F32 reads tensor name as its raw 32-bit words (float32, or int32 bits).
func (d *Dump) F32(t *testing.T, name string) []float32 {
	t.Helper()
	f, ok := d.files[name]
	if !ok {
		t.Fatalf("%s: no tensor %q in the dump", d.dir, name)
	}
	b, err := os.ReadFile(filepath.Join(d.dir, f))
	if err != nil {
		t.Fatalf("%s: %v", name, err)
	}
	out := make([]float32, len(b)/4)
	for i := range out {
		out[i] = math.Float32frombits(binary.LittleEndian.Uint32(b[4*i:]))
	}
	return out
}

// RelErr is max|got-want| / max|want| over token-major rows. When want has
// fewer rows than got (llama.cpp keeps only the last position after the
// last layer's attention), the last rows of got are compared.
func RelErr(t *testing.T, what string, got [][]float32, want []float32) float64 {
	t.Helper()
	if len(got) == 0 {
		t.Fatalf("%s: nothing recorded", what)
	}
	w := len(got[0])
	rows := len(want) / w
	if rows == 0 || rows > len(got) || rows*w != len(want) {
		t.Fatalf("%s: %d llama.cpp values for %d rows of %d", what, len(want), len(got), w)
	}
	got = got[len(got)-rows:]
	var maxAbs, maxDiff float64
	for tk, row := range got {
		for i, v := range row {
			maxAbs = math.Max(maxAbs, math.Abs(float64(want[tk*w+i])))
			maxDiff = math.Max(maxDiff, math.Abs(float64(v-want[tk*w+i])))
		}
	}
	t.Logf("%s: max |Δ| %.3g = %.3g × max|x|", what, maxDiff, maxDiff/maxAbs)
	return maxDiff / maxAbs
}

// CheckRouting compares layer's routing with llama.cpp's: for every token
// whose k-th and (k+1)-th router logits (llama.cpp's) are further apart
// than 10× the layer's relative logit error le (times the largest logit),
// the same k experts with the same weights (within 10·le); weights is the
// dumped tensor of the final expert weights (ffn_moe_weights or
// ffn_moe_weights_norm).
func (d *Dump) CheckRouting(t *testing.T, rec *Rec, layer, nExpert, k int, weights string, le float64) {
	t.Helper()
	want := d.F32(t, fmt.Sprintf("ffn_moe_logits-%d", layer))
	order := d.F32(t, fmt.Sprintf("ffn_moe_argsort-%d", layer)) // int32 bits, nExpert per token
	wn := d.F32(t, fmt.Sprintf("%s-%d", weights, layer))
	nTok := len(order) / nExpert
	ours := rec.IDs[layer][len(rec.IDs[layer])-nTok:]
	ourW := rec.Ws[layer][len(rec.Ws[layer])-nTok:]
	var maxLogit float64
	for _, v := range want {
		maxLogit = math.Max(maxLogit, math.Abs(float64(v)))
	}
	for tk := 0; tk < nTok; tk++ {
		id := func(r int) int { return int(math.Float32bits(order[tk*nExpert+r])) }
		if k < nExpert {
			if gap := float64(want[tk*nExpert+id(k-1)] - want[tk*nExpert+id(k)]); gap <= 10*le*maxLogit {
				t.Logf("layer %d token %d: %d-th/%d-th router logits %.3g apart, a tie at our precision", layer, tk, k, k+1, gap)
				continue
			}
		}
		rank := map[int]int{}
		for r := 0; r < k; r++ {
			rank[id(r)] = r
		}
		for r := 0; r < k; r++ {
			e, w := ours[tk][r], ourW[tk][r]
			lr, ok := rank[e]
			if !ok {
				lc := make([]int, k)
				for i := range lc {
					lc[i] = id(i)
				}
				t.Fatalf("layer %d token %d: experts %v, llama.cpp %v", layer, tk, ours[tk], lc)
			}
			if dw := math.Abs(float64(w - wn[tk*k+lr])); dw > 10*le {
				t.Errorf("layer %d token %d expert %d: weight %v, llama.cpp %v", layer, tk, e, w, wn[tk*k+lr])
			}
		}
	}
}

// BiasChanges counts the tokens of layer l (n experts, top k) whose top-k
// by the unbiased sigmoid probabilities (ffn_moe_probs-L) differs from
// llama.cpp's choice by the biased ones (ffn_moe_probs_biased-L): how much
// of the pass the selection bias decides.
func (d *Dump) BiasChanges(t *testing.T, l, n, k int) int {
	t.Helper()
	probs := d.F32(t, fmt.Sprintf("ffn_moe_probs-%d", l))
	biased := d.F32(t, fmt.Sprintf("ffn_moe_probs_biased-%d", l))
	moved := 0
	for tk := 0; tk < len(probs)/n; tk++ {
		if topSet(probs[tk*n:(tk+1)*n], k) != topSet(biased[tk*n:(tk+1)*n], k) {
			moved++
		}
	}
	return moved
}

// topSet is the set of the k largest of v, as a bit mask.
func topSet(v []float32, k int) uint64 {
	var set uint64
	for r := 0; r < k; r++ {
		b := -1
		for i, x := range v {
			if set&(1<<i) == 0 && (b < 0 || x > v[b]) {
				b = i
			}
		}
		set |= 1 << b
	}
	return set
}

// PromptTokens reads the prompt_tokens of a golden run file.
func PromptTokens(t *testing.T, runFile string) []int32 {
	t.Helper()
	b, err := os.ReadFile(runFile)
	if err != nil {
		t.Fatal(err)
	}
	var r struct {
		PromptTokens []int32 `json:"prompt_tokens"`
	}
	if err := json.Unmarshal(b, &r); err != nil || len(r.PromptTokens) == 0 {
		t.Fatalf("%s: no prompt_tokens (%v)", runFile, err)
	}
	return r.PromptTokens
}

// CheckLayers runs goldenDir/models/<name>.gguf on its p0_fox prompt and
// compares, layer by layer, with llama.cpp's dump of the same pass
// (tensors/<name>/p0_fox__ref): the routed experts' input (ffn_norm-L), the
// router logits, the top-k experts and their weights (the dumped tensor
// weights-L: ffn_moe_weights or ffn_moe_weights_norm), the routed output
// (ffn_moe_out-L), and the logits last. Each relative error must be within
// bound; a divergence shows at its first layer and op. The model routes
// with rt.
func CheckLayers(t *testing.T, rt Router, goldenDir, name, weights string, bound float64) {
	t.Helper()
	CheckLayersFrom(t, rt, goldenDir, name, "ffn_norm", weights, bound)
}

// CheckLayersFrom is CheckLayers for a family whose dump names the routed
// experts' input input-L (qwen35moe's and qwen3next's attn_post_norm).
func CheckLayersFrom(t *testing.T, rt Router, goldenDir, name, input, weights string, bound float64) {
	t.Helper()
	m, d, raw := Load(t, filepath.Join(goldenDir, "models", name+".gguf"), model.Options{})
	prompt := PromptTokens(t, filepath.Join(goldenDir, "runs", name, "p0_fox__ref.json"))
	st, err := m.NewState(len(prompt), model.KVF32)
	if err != nil {
		t.Fatal(err)
	}
	rec := NewRec(m, d, raw, rt)
	logits, err := m.Forward(context.Background(), st, prompt, rec, true)
	if err != nil {
		t.Fatal(err)
	}
	dp := LoadDump(t, filepath.Join(goldenDir, "tensors", name, "p0_fox__ref"))
	check := func(what string, got [][]float32) float64 {
		e := RelErr(t, what, got, dp.F32(t, what))
		if e > bound {
			t.Errorf("%s: relative error %.3g > %.0e", what, e, bound)
		}
		return e
	}
	hp := d.HParams
	for l := 0; l < hp.NLayer; l++ {
		check(fmt.Sprintf("%s-%d", input, l), rec.X[l])
		le := check(fmt.Sprintf("ffn_moe_logits-%d", l), rec.Logits[l])
		dp.CheckRouting(t, rec, l, hp.NExpert, m.Router(l).K, weights, le)
		check(fmt.Sprintf("ffn_moe_out-%d", l), rec.Out[l])
	}
	check("result_output", logits) // llama.cpp's pass outputs the last position
}
