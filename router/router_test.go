package router

import (
	"errors"
	"math"
	"testing"

	"github.com/pipe-engine/pipe/model"
)

func TestTopK(t *testing.T) {
	cases := []struct {
		v    []float32
		k    int
		want []int
	}{
		{[]float32{1, 5, 3, 4}, 2, []int{1, 3}},
		{[]float32{1, 1, 1, 1}, 3, []int{0, 1, 2}},
		{[]float32{-1, float32(math.NaN()), 2, 2}, 3, []int{2, 3, 0}},
		{[]float32{9}, 1, []int{0}},
		{[]float32{0, 1, 2, 3, 4, 5, 6, 7}, 8, []int{7, 6, 5, 4, 3, 2, 1, 0}},
	}
	for _, c := range cases {
		ids := make([]int, c.k)
		topK(c.v, ids)
		for i := range ids {
			if ids[i] != c.want[i] {
				t.Errorf("topK(%v,%d) = %v, want %v", c.v, c.k, ids, c.want)
				break
			}
		}
	}
}

func TestRouteSoftmaxNorm(t *testing.T) {
	logits := []float32{0, float32(math.Log(3)), float32(math.Log(2)), float32(math.Log(4) / 2)}
	ids := make([]int, 2)
	w := make([]float32, 2)
	p := make([]float32, 4)
	if err := Route(model.RouterSpec{Gating: model.SoftmaxTopK, K: 2, Normalize: true}, logits, ids, w, p); err != nil {
		t.Fatal(err)
	}
	if ids[0] != 1 || ids[1] != 2 {
		t.Fatalf("ids %v", ids)
	}
	if math.Abs(float64(w[0])-0.6) > 1e-6 || math.Abs(float64(w[1])-0.4) > 1e-6 {
		t.Fatalf("weights %v, want 0.6 0.4", w)
	}
}

func TestRouteTopKSoftmax(t *testing.T) {
	logits := []float32{3, 0, 3 + float32(math.Log(3)), -1}
	ids := make([]int, 2)
	w := make([]float32, 2)
	if err := Route(model.RouterSpec{Gating: model.TopKSoftmax, K: 2}, logits, ids, w, make([]float32, 4)); err != nil {
		t.Fatal(err)
	}
	if ids[0] != 2 || ids[1] != 0 || math.Abs(float64(w[0])-0.75) > 1e-6 {
		t.Fatalf("ids %v w %v", ids, w)
	}
}

func TestRouteBadK(t *testing.T) {
	if err := Route(model.RouterSpec{K: 5}, make([]float32, 4), make([]int, 5), make([]float32, 5), make([]float32, 4)); err == nil {
		t.Fatal("k > n accepted")
	}
}

// TestRouteSigmoidBiasScale: sigmoid gating chooses by probability plus
// bias, weights by the unbiased probability, renormalised then scaled.
func TestRouteSigmoidBiasScale(t *testing.T) {
	logits := []float32{2, 0, 1, -1}
	bias := []float32{0, 0, 0, 5} // expert 3 wins the choice, weighted by its own sigmoid
	spec := model.RouterSpec{Gating: model.SigmoidTopK, NExpert: 4, K: 2, Normalize: true, Scale: 2.5, Bias: bias}
	ids, w := make([]int, 2), make([]float32, 2)
	if err := Route(spec, logits, ids, w, make([]float32, ScratchLen(spec))); err != nil {
		t.Fatal(err)
	}
	sig := func(x float64) float64 { return 1 / (1 + math.Exp(-x)) }
	if ids[0] != 3 || ids[1] != 0 {
		t.Fatalf("ids %v, want [3 0]", ids)
	}
	s := sig(-1) + sig(2)
	for r, x := range []float64{sig(-1), sig(2)} {
		if want := 2.5 * x / s; math.Abs(float64(w[r])-want) > 1e-6 {
			t.Fatalf("weight %d = %v, want %v", r, w[r], want)
		}
	}
	if err := Route(spec, logits, ids, w, make([]float32, 4)); err == nil {
		t.Fatal("a biased choice with one float of scratch per expert accepted")
	}
}

// TestRouteGroups: with 4 groups of 2 experts and 2 groups used, the
// experts of the groups with the best top-2 sums are the only candidates,
// though a lone expert elsewhere has the largest probability.
func TestRouteGroups(t *testing.T) {
	//                  g0        g1        g2        g3
	logits := []float32{3, -3 /**/, 1, 1 /**/, 0.5, 0.5 /**/, -2, -2}
	spec := model.RouterSpec{Gating: model.SigmoidTopK, NExpert: 8, K: 3, Groups: 4, GroupsUsed: 2}
	ids, w := make([]int, 3), make([]float32, 3)
	if err := Route(spec, logits, ids, w, make([]float32, ScratchLen(spec))); err != nil {
		t.Fatal(err)
	}
	// sums: g0 σ(3)+σ(-3) = 1, g1 2σ(1) ≈ 1.46, g2 2σ(.5) ≈ 1.25, g3 ≈ 0.24
	if want := []int{2, 3, 4}; ids[0] != want[0] || ids[1] != want[1] || ids[2] != want[2] {
		t.Fatalf("ids %v, want %v", ids, want)
	}
	spec.GroupsUsed = 5
	if err := Route(spec, logits, ids, w, make([]float32, ScratchLen(spec))); err == nil {
		t.Fatal("5 of 4 groups accepted")
	}
}

// TestRouteDefaultsUnchanged: the zero values of the new fields leave
// softmax gating as it was, bit for bit.
func TestRouteDefaultsUnchanged(t *testing.T) {
	logits := []float32{0.3, -1.2, 2.2, 0.9, 0.1, 1.7}
	p := make([]float32, 6)
	ids, w := make([]int, 3), make([]float32, 3)
	if err := Route(model.RouterSpec{Gating: model.SoftmaxTopK, K: 3, Normalize: true, Scale: 1}, logits, ids, w, p); err != nil {
		t.Fatal(err)
	}
	copy(p, logits)
	model.Softmax(p)
	want := []int{2, 5, 3}
	s := float32(float64(p[2]) + float64(p[5]) + float64(p[3]))
	for r := range want {
		if ids[r] != want[r] || w[r] != p[want[r]]/s {
			t.Fatalf("rank %d: %d %v, want %d %v", r, ids[r], w[r], want[r], p[want[r]]/s)
		}
	}
}

// TestRouteScored: a family's own score (model.ScoredTopK) replaces the
// logits before the choice, which is by the biased scores while the weights
// are the unbiased ones, renormalised and scaled; without a Score Route
// refuses the spec with ErrNoScore.
func TestRouteScored(t *testing.T) {
	logits := []float32{0, 1, 3, -1}
	square := func(p []float32) { // a score no shared gating computes
		for i, v := range p {
			p[i] = v * v
		}
	}
	ids := make([]int, 2)
	w := make([]float32, 2)
	spec := model.RouterSpec{Gating: model.ScoredTopK, Score: square, K: 2, Normalize: true, Scale: 1.5, Bias: []float32{0, 0, -10, 0.5}}
	if err := Route(spec, logits, ids, w, make([]float32, 8)); err != nil {
		t.Fatal(err)
	}
	if ids[0] != 3 || ids[1] != 1 {
		t.Fatalf("ids %v, want [3 1] (expert 2's 9 biased to -1, 3's 1 raised to 1.5)", ids)
	}
	if w[0] != 1.5*(1/float32(2)) || w[1] != 1.5*(1/float32(2)) {
		t.Fatalf("weights %v, want 0.75 0.75 (squares 1 and 1, renormalised, ×1.5)", w)
	}
	spec.Bias, spec.Normalize, spec.Scale = nil, false, 0
	if err := Route(spec, logits, ids, w, make([]float32, 8)); err != nil {
		t.Fatal(err)
	}
	if ids[0] != 2 || w[0] != 9 {
		t.Fatalf("ids %v w %v, want expert 2 with 3²", ids, w)
	}
	probs := make([]float32, 8)
	if n := testing.AllocsPerRun(100, func() { _ = Route(spec, logits, ids, w, probs) }); n != 0 {
		t.Fatalf("Route with a family's Score: %v allocs/op, want 0 (the decode hot path)", n)
	}
	spec.Score = nil
	if err := Route(spec, logits, ids, w, probs); !errors.Is(err, ErrNoScore) {
		t.Fatalf("Route without Score: %v, want ErrNoScore", err)
	}
}
