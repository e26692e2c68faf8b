package router

import (
	"math"
	"slices"
	"strings"
	"testing"

	"github.com/pipe-engine/pipe/metrics"
	"github.com/pipe-engine/pipe/model"
)

func set(xs ...int) func(int) bool { return func(x int) bool { return slices.Contains(xs, x) } }

func near(a, b float32) bool { return math.Abs(float64(a-b)) < 1e-6 }

func sum(w []float32) float32 {
	var s float32
	for _, v := range w {
		s += v
	}
	return s
}

// TestDropSkipsMissedLightExperts: with F = 1 the threshold is the uniform
// share 1/k; a missed expert below it is skipped, a cached one below it and
// a missed one above it are kept, and the kept weights sum to the total.
func TestDropSkipsMissedLightExperts(t *testing.T) {
	ids := []int{10, 11, 12, 13, 14}
	w := []float32{0.5, 0.2, 0.15, 0.1, 0.05}
	s := &Selector{Lossy: Lossy{Drop: 1}}
	spec := model.RouterSpec{Gating: model.SoftmaxTopK, NExpert: 16, K: 5, Normalize: true}
	// 13 is cached; 11 sits exactly at the threshold 0.2 (kept: below means below).
	if err := s.Apply(spec, make([]float32, 16), ids, w, make([]float32, 16), set(13)); err != nil {
		t.Fatal(err)
	}
	if !slices.Equal(ids, []int{10, 11, -1, 13, -1}) || w[2] != 0 || w[4] != 0 {
		t.Fatalf("ids %v w %v: want 12 and 14 dropped", ids, w)
	}
	if !near(w[0], 0.5/0.8) || !near(w[3], 0.1/0.8) || !near(sum(w), 1) {
		t.Fatalf("weights %v: want the kept ones scaled by 1/0.8", w)
	}
	if s.Skips != (metrics.Skips{Routed: 5, Dropped: 2}) {
		t.Fatalf("skips %+v", s.Skips)
	}
	// F below every weight's share: nothing is dropped, nothing changes.
	ids, w = []int{1, 2, 3}, []float32{0.5, 0.3, 0.2}
	s = &Selector{Lossy: Lossy{Drop: 0.1}}
	_ = s.Apply(spec, make([]float32, 16), ids, w, make([]float32, 16), set())
	if !slices.Equal(ids, []int{1, 2, 3}) || !slices.Equal(w, []float32{0.5, 0.3, 0.2}) || s.Skips.Dropped != 0 {
		t.Fatalf("a low threshold changed the routing: %v %v %+v", ids, w, s.Skips)
	}
}

// TestDropNeverTheTopExpert: the top-weighted expert stays even when it is
// missed and below the threshold (possible only when the weights do not sum
// to the routing's share, e.g. after a trim).
func TestDropNeverTheTopExpert(t *testing.T) {
	ids, w := []int{4, 5}, []float32{0.3, 0.2}
	if n := drop(w, ids, 1, 1, set()); n != 1 || ids[0] != 4 || ids[1] != -1 || !near(w[0], 0.5) {
		t.Fatalf("dropped %d: ids %v w %v", n, ids, w)
	}
}

// TestSubstituteTakesCachedNearTies: a cached expert scored within λ × the
// logit range of the k-th takes its slot, with the router's own weight from
// the true logits; a cached expert further away does not; when nothing
// changes the routing keeps its bits.
func TestSubstituteTakesCachedNearTies(t *testing.T) {
	logits := []float32{4, 3, 2.9, 0, 2.5, -4} // range 8
	for _, g := range []model.Gating{model.SoftmaxTopK, model.TopKSoftmax} {
		spec := model.RouterSpec{Gating: g, NExpert: 6, K: 2, Normalize: true}
		ids, w, probs := make([]int, 2), make([]float32, 2), make([]float32, 6)
		if err := Route(spec, logits, ids, w, probs); err != nil {
			t.Fatal(err)
		}
		orig := slices.Clone(w)
		// λ = 0.05: bias 0.4; expert 4 (2.5, cached) reaches 2.9 < 3: no change.
		s := &Selector{Lossy: Lossy{Substitute: 0.05}}
		_ = s.Apply(spec, logits, ids, w, probs, set(4))
		if !slices.Equal(ids, []int{0, 1}) || !slices.Equal(w, orig) || s.Skips.Substituted != 0 {
			t.Fatalf("%v: λ 0.05 changed %v %v", g, ids, w)
		}
		// λ = 0.1: bias 0.8; expert 2 (2.9, cached) reaches 3.7 > 3 and
		// takes expert 1's slot; 4 (cached) reaches 3.3, also above 3 but
		// below 3.7: only one slot is free.
		s = &Selector{Lossy: Lossy{Substitute: 0.1}}
		_ = s.Apply(spec, logits, ids, w, probs, set(2, 4))
		if !slices.Equal(ids, []int{0, 2}) || s.Skips.Substituted != 1 {
			t.Fatalf("%v: λ 0.1: ids %v, skips %+v", g, ids, s.Skips)
		}
		// The weights are the gating's over {0, 2} with the true logits.
		e0, e2 := math.Exp(4), math.Exp(2.9)
		if !near(w[0], float32(e0/(e0+e2))) || !near(w[1], float32(e2/(e0+e2))) {
			t.Fatalf("%v: weights %v, want the router's own", g, w)
		}
		// The top expert is displaced too when cached ones are near enough:
		// λ 1.5, bias 12: 4 → 14.5, 5 → 8, both above 0's 4.
		ids, w = []int{0, 1}, slices.Clone(orig)
		s = &Selector{Lossy: Lossy{Substitute: 1.5}}
		_ = s.Apply(spec, logits, ids, w, probs, set(4, 5))
		if !slices.Equal(ids, []int{4, 5}) || s.Skips.Substituted != 2 {
			t.Fatalf("%v: λ 1: ids %v", g, ids)
		}
	}
}

// TestSubstituteWeighsAsTheGating: a substituted set gets the weights the
// spec's own gating gives it — sigmoid or a family's Score, renormalised
// and scaled as Route weighs — not a softmax of its logits.
func TestSubstituteWeighsAsTheGating(t *testing.T) {
	logits := []float32{4, 3, 2.9, 0, 2.5, -4}
	shift := func(p []float32) { // a family's score: logit + 10
		for i := range p {
			p[i] += 10
		}
	}
	sig := func(x float64) float64 { return 1 / (1 + math.Exp(-x)) }
	for name, c := range map[string]struct {
		spec   model.RouterSpec
		s0, s2 float64 // the gate scores of experts 0 and 2
	}{
		"sigmoid": {model.RouterSpec{Gating: model.SigmoidTopK, K: 2, Normalize: true, Scale: 2}, sig(4), sig(2.9)},
		"scored":  {model.RouterSpec{Gating: model.ScoredTopK, Score: shift, K: 2, Normalize: true, Scale: 2}, 14, 12.9},
	} {
		ids, w, probs := make([]int, 2), make([]float32, 2), make([]float32, 6)
		if err := Route(c.spec, logits, ids, w, probs); err != nil {
			t.Fatal(err)
		}
		s := &Selector{Lossy: Lossy{Substitute: 0.1}} // expert 2 (cached) takes expert 1's slot
		if err := s.Apply(c.spec, logits, ids, w, probs, set(2)); err != nil {
			t.Fatal(err)
		}
		if !slices.Equal(ids, []int{0, 2}) {
			t.Fatalf("%s: ids %v, want [0 2]", name, ids)
		}
		if sum := c.s0 + c.s2; !near(w[0], float32(2*c.s0/sum)) || !near(w[1], float32(2*c.s2/sum)) {
			t.Fatalf("%s: weights %v, want %v %v (the gating's, renormalised, ×2)", name, w, 2*c.s0/sum, 2*c.s2/sum)
		}
	}
}

// TestDynamicKKeepsTheFewestReachingP: the fewest experts by weight whose
// weights reach P of the total, at least one, rescaled to the total.
func TestDynamicKKeepsTheFewestReachingP(t *testing.T) {
	spec := model.RouterSpec{Gating: model.SoftmaxTopK, NExpert: 8, K: 4, Normalize: true}
	for _, c := range []struct {
		p    float32
		ids  []int
		trim int64
	}{
		{0.8, []int{7, 3, -1, -1}, 2}, // 0.6 + 0.25 = 0.85 >= 0.8
		{0.86, []int{7, 3, 5, -1}, 1},
		{0.5, []int{7, -1, -1, -1}, 3}, // the top alone
		{0.99, []int{7, 3, 5, 1}, 0},   // every one
	} {
		ids, w := []int{7, 3, 5, 1}, []float32{0.6, 0.25, 0.1, 0.05}
		s := &Selector{Lossy: Lossy{DynamicK: c.p}}
		if err := s.Apply(spec, make([]float32, 8), ids, w, make([]float32, 8), nil); err != nil {
			t.Fatal(err)
		}
		if !slices.Equal(ids, c.ids) || s.Skips.Trimmed != c.trim || !near(sum(w), 1) {
			t.Errorf("P %v: ids %v w %v skips %+v; want %v, %d trimmed, Σw 1", c.p, ids, w, s.Skips, c.ids, c.trim)
		}
	}
}

func TestLossyValidateAndString(t *testing.T) {
	if (Lossy{}).On() || (Lossy{}).String() != "off" || (Lossy{}).Validate() != nil {
		t.Fatal("the zero value is lossless")
	}
	l := Lossy{Drop: 0.75, DynamicK: 0.9}
	if !l.On() || !l.NeedsCache() || l.String() != "drop=0.75,dynamic-k=0.9" {
		t.Fatalf("%v", l)
	}
	if (Lossy{DynamicK: 0.9}).NeedsCache() {
		t.Fatal("dynamic k needs no cache")
	}
	for _, bad := range []Lossy{{Drop: 1.5}, {Drop: -1}, {Substitute: -0.1}, {DynamicK: 1}, {DynamicK: float32(math.NaN())}} {
		if err := bad.Validate(); err == nil || !strings.Contains(err.Error(), "--moe-") {
			t.Errorf("%+v: err %v", bad, err)
		}
	}
}
