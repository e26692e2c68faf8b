package bailingmoe3_test

import (
	"math"
	"math/rand/v2"
	"path/filepath"
	"testing"

	"github.com/pipe-engine/pipe/kernels"
	"github.com/pipe-engine/pipe/model"
	"github.com/pipe-engine/pipe/model/bailingmoe3"
	"github.com/pipe-engine/pipe/model/goldentest"
)

// TestClampedExperts: the batched experts give ComputeExpert's bits on a
// layer without a SwiGLU limit (2) and on the clamped one (6), at 1 and 2
// threads, for F32 and Q4_K_M; and layer 6's experts differ from what the
// unclamped SwiGLU computes (the limit is applied on the routed path).
func TestClampedExperts(t *testing.T) {
	for _, name := range []string{"tiny-bailingmoe3-F32", "tiny-bailingmoe3-Q4_K_M"} {
		d, raw := goldentest.Open(t, filepath.Join(golden, "models", name+".gguf"))
		for _, threads := range []int{1, 2} {
			pool := kernels.NewPool(threads)
			m, err := model.New(d, goldentest.FileSource(raw), model.Options{Pool: pool})
			if err != nil {
				t.Fatal(err)
			}
			E := d.HParams.NEmbd
			rng := rand.New(rand.NewPCG(7, uint64(threads)))
			x := make([]float32, 3*E)
			for i := range x {
				x[i] = float32(rng.NormFloat64())
			}
			for _, layer := range []int{2, 6} {
				parts := func(e int) [][]byte {
					var ps [][]byte
					for _, sl := range d.Experts[layer][e] {
						ps = append(ps, raw[sl.Off:sl.Off+sl.Len])
					}
					return ps
				}
				work := []model.ExpertWork{
					{Expert: 1, Parts: parts(1), N: 1, X: x[:E], Out: make([]float32, E)},
					{Expert: 9, Parts: parts(9), N: 3, X: x, Out: make([]float32, 3*E)},
				}
				var s model.Scratch
				if err := m.(model.BatchExpertFFN).ComputeExperts(layer, work, &s); err != nil {
					t.Fatal(err)
				}
				for _, w := range work {
					want := make([]float32, w.N*E)
					if err := m.ComputeExpert(layer, w.Expert, w.Parts, w.N, w.X, want, &s); err != nil {
						t.Fatal(err)
					}
					for i := range want {
						if math.Float32bits(want[i]) != math.Float32bits(w.Out[i]) {
							t.Fatalf("%s t%d layer %d expert %d elem %d: batched %v, single %v", name, threads, layer, w.Expert, i, w.Out[i], want[i])
						}
					}
				}
				plain := *m.(*bailingmoe3.Model).Experts // the layers' description with the plain SwiGLU
				got := make([]float32, 3*E)
				if err := plain.ComputeExpert(layer, 9, parts(9), 3, x, got, &s); err != nil {
					t.Fatal(err)
				}
				same := true
				for i := range got {
					same = same && got[i] == work[1].Out[i]
				}
				if same != (layer == 2) {
					t.Errorf("%s layer %d: the unclamped SwiGLU gives the same experts: %v", name, layer, same)
				}
			}
			pool.Close()
		}
	}
}
