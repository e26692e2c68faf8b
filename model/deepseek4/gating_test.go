package deepseek4

import (
	"math"
	"testing"

	"github.com/pipe-engine/pipe/model"
	"github.com/pipe-engine/pipe/router"
)

// TestRouteSqrtSoftplus: the family's √softplus gating, routed by the
// shared router, chooses by the biased scores but weights by the unbiased
// ones, renormalised and scaled; a logit above 20 keeps its value before
// the root; a hash-routed layer's spec has no bias.
func TestRouteSqrtSoftplus(t *testing.T) {
	logits := []float32{0, 1, 25, -1}
	sp := func(x float64) float64 { return math.Sqrt(math.Log1p(math.Exp(x))) }
	ids := make([]int, 2)
	w := make([]float32, 2)
	hp := &model.HParams{NExpert: 4}
	hp.MoE.WeightsNorm, hp.MoE.WeightsScale = true, 1.5
	spec := routerSpec(hp, 2, []float32{0, 0, -10, 0.5})
	if err := router.Route(spec, logits, ids, w, make([]float32, 8)); err != nil {
		t.Fatal(err)
	}
	if ids[0] != 1 || ids[1] != 3 {
		t.Fatalf("ids %v, want [1 3] (expert 2 biased below them)", ids)
	}
	a, b := sp(1), sp(-1)
	if math.Abs(float64(w[0])-1.5*a/(a+b)) > 1e-6 || math.Abs(float64(w[1])-1.5*b/(a+b)) > 1e-6 {
		t.Fatalf("weights %v, want %v %v", w, 1.5*a/(a+b), 1.5*b/(a+b))
	}
	hp.MoE.WeightsNorm, hp.MoE.WeightsScale = false, 0
	spec = routerSpec(hp, 2, nil)
	if err := router.Route(spec, logits, ids, w, make([]float32, 8)); err != nil {
		t.Fatal(err)
	}
	if ids[0] != 2 || w[0] != float32(math.Sqrt(25)) {
		t.Fatalf("ids %v w %v, want expert 2 with √25", ids, w)
	}
}

// TestSqrtSoftplusAllocatesNothing: the score runs per token and layer on
// the decode hot path.
func TestSqrtSoftplusAllocatesNothing(t *testing.T) {
	p := make([]float32, 64)
	if n := testing.AllocsPerRun(100, func() { sqrtSoftplus(p) }); n != 0 {
		t.Fatalf("sqrtSoftplus: %v allocs/op", n)
	}
}
