package qwen35moe_test

import (
	"context"
	"math"
	"path/filepath"
	"testing"

	"github.com/pipe-engine/pipe/kernels"
	"github.com/pipe-engine/pipe/model"
	"github.com/pipe-engine/pipe/model/gen"
	"github.com/pipe-engine/pipe/model/goldentest"
	_ "github.com/pipe-engine/pipe/model/qwen35moe"
	"github.com/pipe-engine/pipe/router"
)

// routing is what the recording MoE routes with: the engine's router.
var routing = goldentest.Router{Route: router.Route, ScratchLen: router.ScratchLen}

// genTiny writes qwen35moe-tiny with quant into a temporary file.
func genTiny(t *testing.T, quant string) string {
	t.Helper()
	path := filepath.Join(t.TempDir(), "tiny.gguf")
	if _, err := gen.GenerateFile(context.Background(), gen.Options{Preset: "qwen35moe-tiny", Quant: quant, Seed: 11, RoutingSkew: gen.DefaultRoutingSkew}, path); err != nil {
		t.Fatal(err)
	}
	return path
}

// load builds the model at path on a pool of threads, with a recording MoE.
func load(t *testing.T, path string, threads int) (model.Model, model.MoE) {
	t.Helper()
	pool := kernels.NewPool(threads)
	t.Cleanup(pool.Close)
	m, d, raw := goldentest.Load(t, path, model.Options{Pool: pool})
	return m, goldentest.NewRec(m, d, raw, routing)
}

var prompt = []int32{300, 32, 113, 117, 105, 278, 293, 372, 110, 287, 111, 120, 32, 106, 309, 112, 115, 265, 310, 258}

// forward feeds tokens in passes of the given sizes (the rest in the last)
// and returns the logits of every position.
func forward(t *testing.T, m model.Model, moe model.MoE, st *model.State, tokens []int32, sizes ...int) [][]float32 {
	t.Helper()
	var out [][]float32
	for len(tokens) > 0 {
		n := len(tokens)
		if len(sizes) > 0 {
			n, sizes = min(sizes[0], n), sizes[1:]
		}
		rows, err := m.Forward(context.Background(), st, tokens[:n], moe, true)
		if err != nil {
			t.Fatal(err)
		}
		for _, r := range rows {
			out = append(out, append([]float32(nil), r...))
		}
		tokens = tokens[n:]
	}
	return out
}

// TestPassesAgree: the logits of a prompt are the same bits whether it is
// fed whole, in chunks (the recurrent and KV states carried between
// passes) or token by token, on F32 and Q4_K_M and at -t 1 and 2.
func TestPassesAgree(t *testing.T) {
	for _, q := range []string{"F32", "Q4_K_M"} {
		var ref [][]float32
		path := genTiny(t, q)
		for _, threads := range []int{1, 2} {
			m, moe := load(t, path, threads)
			for _, sizes := range [][]int{{len(prompt)}, {7, 5}, {1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1}} {
				st, err := m.NewState(64, model.KVF32)
				if err != nil {
					t.Fatal(err)
				}
				got := forward(t, m, moe, st, prompt, sizes...)
				if ref == nil {
					ref = got
					continue
				}
				for p := range ref {
					for i := range ref[p] {
						if math.Float32bits(got[p][i]) != math.Float32bits(ref[p][i]) {
							t.Fatalf("%s -t %d passes %v: position %d logit %d = %v, whole prompt -t 1: %v", q, threads, sizes, p, i, got[p][i], ref[p][i])
						}
					}
				}
			}
		}
	}
}

// TestRewindStartsOver: rewinding a state with recurrent layers to an
// earlier position starts the sequence over, and feeding the prompt again
// gives the first pass's logits; rewinding to the end keeps everything.
func TestRewindStartsOver(t *testing.T) {
	m, moe := load(t, genTiny(t, "F32"), 1)
	st, err := m.NewState(64, model.KVF32)
	if err != nil {
		t.Fatal(err)
	}
	first := forward(t, m, moe, st, prompt)
	if got := st.Rewind(len(prompt)); got != len(prompt) {
		t.Fatalf("Rewind(Pos) = %d", got)
	}
	if got := st.Rewind(5); got != 0 {
		t.Fatalf("Rewind(5) = %d, want 0 (a recurrent state cannot be rolled back)", got)
	}
	again := forward(t, m, moe, st, prompt)
	for p := range first {
		for i := range first[p] {
			if first[p][i] != again[p][i] {
				t.Fatalf("position %d logit %d after Rewind: %v, first pass %v", p, i, again[p][i], first[p][i])
			}
		}
	}
}

// TestStateBytes: the state holds KV rows for the attention layers only
// and the delta-net layers' conv and recurrent states.
func TestStateBytes(t *testing.T) {
	m, _ := load(t, genTiny(t, "F32"), 1)
	st, err := m.NewState(64, model.KVF32)
	if err != nil {
		t.Fatal(err)
	}
	hp := m.Desc().HParams
	kv := int64(2) * 2 * 64 * int64(hp.NHeadKV*hp.HeadDim) * 4 // 2 attention layers
	rec := int64(2) * 4 * int64(3*(2*2*32+4*32)+4*32*32)       // 2 delta-net layers
	if got := st.Bytes(); got != kv+rec {
		t.Fatalf("Bytes = %d, want %d KV + %d recurrent", got, kv, rec)
	}
	if hp.RecurrentLayers() != 2 || hp.SSM.StateFloats() != 3*(2*2*32+4*32)+4*32*32 {
		t.Fatalf("RecurrentLayers %d StateFloats %d", hp.RecurrentLayers(), hp.SSM.StateFloats())
	}
}
