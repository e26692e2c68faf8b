package archs_test

import (
	"math"
	"math/rand/v2"
	"path/filepath"
	"testing"

	"github.com/pipe-engine/pipe/kernels"
	"github.com/pipe-engine/pipe/model"
	_ "github.com/pipe-engine/pipe/model/archs"
	"github.com/pipe-engine/pipe/model/goldentest"
)

const goldenModels = "../../testdata/golden/models"

// TestComputeExpertsEqualsComputeExpert: the batched experts (single-token
// works sharing one input, single-token works with their own inputs, and a
// multi-token work) give exactly ComputeExpert's bits, for every family
// (plain SwiGLU, gpt-oss's biased SwiGLU-OAI, gemma4's fused gate_up with
// GEGLU and output scales), several quant types and 1..3 threads.
func TestComputeExpertsEqualsComputeExpert(t *testing.T) {
	for _, q := range []string{"qwen3moe-F32", "qwen3moe-Q4_K_M", "qwen3moe-Q8_0", "qwen3moe-Q4_0", "qwen3moe-MXFP4_MOE",
		"gptoss-Q8_0", "gptoss-MXFP4_MOE", "gemma4-F32", "gemma4-Q4_K_M"} {
		path := filepath.Join(goldenModels, "tiny-"+q+".gguf")
		d, raw := goldentest.Open(t, path)
		for _, threads := range []int{1, 2, 3} {
			pool := kernels.NewPool(threads)
			m, err := model.New(d, goldentest.FileSource(raw), model.Options{Pool: pool})
			if err != nil {
				t.Fatal(err)
			}
			bf, ok := m.(model.BatchExpertFFN)
			if !ok {
				t.Fatalf("%s does not implement model.BatchExpertFFN", d.Arch)
			}
			E := d.HParams.NEmbd
			rng := rand.New(rand.NewPCG(61, uint64(threads)))
			randVec := func(n int) []float32 {
				x := make([]float32, n)
				for i := range x {
					x[i] = float32(rng.NormFloat64())
				}
				return x
			}
			shared, own, multi := randVec(E), randVec(E), randVec(3*E)
			layer := 1
			parts := func(e int) [][]byte {
				var ps [][]byte
				for _, sl := range d.Experts[layer][e] {
					ps = append(ps, raw[sl.Off:sl.Off+sl.Len])
				}
				return ps
			}
			work := []model.ExpertWork{
				{Expert: 0, Parts: parts(0), N: 1, X: shared, Out: make([]float32, E)},
				{Expert: 5, Parts: parts(5), N: 3, X: multi, Out: make([]float32, 3*E)},
				{Expert: 3, Parts: parts(3), N: 1, X: shared, Out: make([]float32, E)},
				{Expert: 7, Parts: parts(7), N: 1, X: own, Out: make([]float32, E)},
			}
			var s model.Scratch
			for round := 0; round < 2; round++ { // scratch reuse
				if err := bf.ComputeExperts(layer, work, &s); err != nil {
					t.Fatal(err)
				}
				for _, w := range work {
					want := make([]float32, w.N*E)
					var s1 model.Scratch
					if err := m.ComputeExpert(layer, w.Expert, w.Parts, w.N, w.X, want, &s1); err != nil {
						t.Fatal(err)
					}
					for i := range want {
						if math.Float32bits(want[i]) != math.Float32bits(w.Out[i]) {
							t.Fatalf("%s t%d expert %d elem %d: batched %v, single %v", q, threads, w.Expert, i, w.Out[i], want[i])
						}
					}
				}
			}
			bad := []model.ExpertWork{{Expert: 0, Parts: parts(0)[:len(parts(0))-1], N: 1, X: shared, Out: make([]float32, E)}}
			if err := bf.ComputeExperts(layer, bad, &s); err == nil {
				t.Fatalf("%s: a missing part accepted", q)
			}
			if err := bf.ComputeExperts(99, work, &s); err == nil {
				t.Fatalf("%s: layer 99 accepted", q)
			}
			pool.Close()
		}
	}
}
