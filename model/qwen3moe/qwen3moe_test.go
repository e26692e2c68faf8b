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

	"github.com/pipe-engine/pipe/model"
	"github.com/pipe-engine/pipe/model/goldentest"
	_ "github.com/pipe-engine/pipe/model/qwen3moe"
	"github.com/pipe-engine/pipe/router"
)

// routing is what the recording MoE routes with: the engine's router.
var routing = goldentest.Router{Route: router.Route, ScratchLen: router.ScratchLen}

const golden = "../../testdata/golden"

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
	rec := goldentest.NewRec(m, d, raw, routing)
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
				if got := rec.IDs[l][our][r]; got != want {
					t.Fatalf("layer %d token %d rank %d: expert %d, llama.cpp %d", l, our, r, got, want)
				}
				if d := math.Abs(float64(rec.Ws[l][our][r] - wn[tk*2+r])); d > 1e-6 {
					t.Fatalf("layer %d token %d rank %d: weight %v, llama.cpp %v", l, our, r, rec.Ws[l][our][r], wn[tk*2+r])
				}
			}
			E := 256
			var worst float64
			for i := 0; i < E; i++ {
				worst = math.Max(worst, math.Abs(float64(rec.Out[l][our][i]-mo[tk*E+i])))
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
