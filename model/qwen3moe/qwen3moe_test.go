package qwen3moe_test

import (
	"context"
	"encoding/binary"
	"encoding/json"
	"fmt"
	"math"
	"os"
	"path/filepath"
	"testing"

	"github.com/pipe-engine/pipe/internal/goldentest"
	"github.com/pipe-engine/pipe/model"
	_ "github.com/pipe-engine/pipe/model/qwen3moe"
	"github.com/pipe-engine/pipe/router"
)

const golden = "../../testdata/golden"

// recMoE is a minimal MoE: route, compute every routed expert from the
// file bytes, sum in rank order; it records routing per layer.
type recMoE struct {
	m     model.Model
	d     *model.Desc
	file  []byte
	ids   map[int][][]int
	ws    map[int][][]float32
	outs  map[int][][]float32
	probs []float32
}

func (r *recMoE) RunMoE(_ context.Context, layer int, x, logits [][]float32, out [][]float32) error {
	spec := r.m.Router(layer)
	var s model.Scratch
	E := len(x[0])
	y := make([]float32, E)
	for t := range x {
		ids, w := make([]int, spec.K), make([]float32, spec.K)
		if err := router.Route(spec, logits[t], ids, w, r.probs); err != nil {
			return err
		}
		r.ids[layer] = append(r.ids[layer], ids)
		r.ws[layer] = append(r.ws[layer], w)
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
		r.outs[layer] = append(r.outs[layer], append([]float32(nil), out[t]...))
	}
	return nil
}

type dumpEntry struct {
	Name string `json:"name"`
	File string `json:"file"`
	Ne   []int  `json:"ne"`
}

func loadDump(t *testing.T, dir string) map[string]dumpEntry {
	b, err := os.ReadFile(filepath.Join(dir, "index.json"))
	if err != nil {
		t.Fatal(err)
	}
	var ix []dumpEntry
	if err := json.Unmarshal(b, &ix); err != nil {
		t.Fatal(err)
	}
	m := map[string]dumpEntry{}
	for _, e := range ix {
		m[e.Name] = e // the last node of a name wins (e.g. the ROPE after MUL_MAT)
	}
	return m
}

func readF32(t *testing.T, path string) []float32 {
	b, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	out := make([]float32, len(b)/4)
	for i := range out {
		out[i] = math.Float32frombits(binary.LittleEndian.Uint32(b[4*i:]))
	}
	return out
}

// TestIntermediatesMatchLlamaCpp compares, layer by layer, the routing and
// the MoE output of the F32 model on p0_fox with llama.cpp's own dump of the
// same pass, so a divergence is located at its first layer and op.
func TestIntermediatesMatchLlamaCpp(t *testing.T) {
	path := filepath.Join(golden, "models/tiny-qwen3moe-F32.gguf")
	m, d, raw := goldentest.Load(t, path, model.Options{})
	st, err := m.NewState(64, model.KVF32)
	if err != nil {
		t.Fatal(err)
	}
	prompt := []int32{284, 444, 330, 107, 285, 426, 110, 458, 32, 106, 319, 112, 115, 466, 259, 279, 97, 122, 121, 451, 46}
	rec := &recMoE{m: m, d: d, file: raw, ids: map[int][][]int{}, ws: map[int][][]float32{}, outs: map[int][][]float32{}, probs: make([]float32, 8)}
	logits, err := m.Forward(context.Background(), st, prompt, rec, false)
	if err != nil {
		t.Fatal(err)
	}
	dir := filepath.Join(golden, "tensors/tiny-qwen3moe-F32/p0_fox__ref")
	dump := loadDump(t, dir)
	for l := 0; l < 4; l++ {
		topk := readF32(t, filepath.Join(dir, dump[fmt.Sprintf("ffn_moe_topk-%d", l)].File)) // int32 bits
		wn := readF32(t, filepath.Join(dir, dump[fmt.Sprintf("ffn_moe_weights_norm-%d", l)].File))
		mo := readF32(t, filepath.Join(dir, dump[fmt.Sprintf("ffn_moe_out-%d", l)].File))
		nTok := len(topk) / 2
		for tk := 0; tk < nTok; tk++ {
			// in the last layer llama.cpp keeps only the last position after attention
			our := tk
			if nTok == 1 {
				our = len(prompt) - 1
			}
			for r := 0; r < 2; r++ {
				want := int(math.Float32bits(topk[tk*2+r]))
				if got := rec.ids[l][our][r]; got != want {
					t.Fatalf("layer %d token %d rank %d: expert %d, llama.cpp %d", l, our, r, got, want)
				}
				if d := math.Abs(float64(rec.ws[l][our][r] - wn[tk*2+r])); d > 1e-6 {
					t.Fatalf("layer %d token %d rank %d: weight %v, llama.cpp %v", l, our, r, rec.ws[l][our][r], wn[tk*2+r])
				}
			}
			E := 256
			var worst float64
			for i := 0; i < E; i++ {
				worst = math.Max(worst, math.Abs(float64(rec.outs[l][our][i]-mo[tk*E+i])))
			}
			if worst > 1e-5 {
				t.Fatalf("layer %d token %d: MoE output differs by %g", l, our, worst)
			}
		}
	}
	want := readF32(t, filepath.Join(dir, dump["result_output"].File))
	for i, w := range want {
		if d := math.Abs(float64(logits[0][i] - w)); d > 1e-5 {
			t.Fatalf("logit %d: %v, llama.cpp %v", i, logits[0][i], w)
		}
	}
}
