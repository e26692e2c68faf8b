package router

import (
	"fmt"
	"math"

	"github.com/pipe-engine/pipe/metrics"
	"github.com/pipe-engine/pipe/model"
)

// Lossy are the cache-aware lossy routing modes, each off at zero (the zero
// value is lossless: Apply is then never called). They follow BigMoeOnEdge's
// definitions (github.com/Helldez/BigMoeOnEdge: --drop-cold-experts,
// docs/expert-dropping.md; --expert-substitute, pull request 171):
//
//   - Drop F (--moe-drop, 0 < F ≤ 1): a routed expert that is not in the
//     cache and whose weight is below F × the routing's uniform share
//     (Σw ÷ k) is not read. The top-weighted expert is never dropped, and
//     the kept weights are scaled so the routing keeps its total (the peer's
//     default drop_renorm).
//   - Substitute λ (--moe-substitute, λ > 0): every cached expert's router
//     logit is raised by λ × the token's logit range (max − min) and the top
//     k are taken again, so a cached expert takes the slot of a missed one
//     when the router scored it within that margin; the chosen experts get
//     the router's own weights, computed from the true logits by the
//     layer's gating (the cache-conditional routing of arXiv:2412.00099).
//   - DynamicK P (--moe-dynamic-k, 0 < P < 1): per token and layer, the
//     fewest experts in weight order whose weights reach P of the routing's
//     total (at least one, at most k) are kept; the kept weights are scaled
//     to the total, as a drop's are.
//
// Substitution re-ranks, dynamic k trims, drop skips; Apply runs them in that
// order. A skipped slot gets id −1 and weight 0: the FFN computes and reads
// nothing for it.
type Lossy struct {
	Drop, Substitute, DynamicK float32
}

// ErrLossy: a lossy mode's value is out of range.
var ErrLossy = fmt.Errorf("router: bad lossy mode")

// On reports whether any mode is on.
func (l Lossy) On() bool { return l.Drop != 0 || l.Substitute != 0 || l.DynamicK != 0 }

// NeedsCache reports whether a mode asks which experts are cached.
func (l Lossy) NeedsCache() bool { return l.Drop != 0 || l.Substitute != 0 }

// Validate checks every mode's range, naming the flag.
func (l Lossy) Validate() error {
	bad := func(v float32) bool { return math.IsNaN(float64(v)) || math.IsInf(float64(v), 0) }
	switch {
	case bad(l.Drop) || l.Drop < 0 || l.Drop > 1:
		return fmt.Errorf("%w: --moe-drop %v must be in 0..1 (a fraction of the uniform share 1/k; above 1 the top expert could go)", ErrLossy, l.Drop)
	case bad(l.Substitute) || l.Substitute < 0:
		return fmt.Errorf("%w: --moe-substitute %v must be >= 0", ErrLossy, l.Substitute)
	case bad(l.DynamicK) || l.DynamicK < 0 || l.DynamicK >= 1:
		return fmt.Errorf("%w: --moe-dynamic-k %v must be in 0..1 (0 = off; 1 would keep every expert)", ErrLossy, l.DynamicK)
	}
	return nil
}

// String names the modes that are on ("off" when none), for the CSV and the
// summary: e.g. "drop=0.75,dynamic-k=0.9".
func (l Lossy) String() string {
	s := ""
	for _, m := range []struct {
		name string
		v    float32
	}{{"drop", l.Drop}, {"substitute", l.Substitute}, {"dynamic-k", l.DynamicK}} {
		if m.v != 0 {
			if s != "" {
				s += ","
			}
			s += fmt.Sprintf("%s=%g", m.name, m.v)
		}
	}
	if s == "" {
		return "off"
	}
	return s
}

// Selector applies Lossy to routings; it keeps scratch between calls and is
// used by one goroutine.
type Selector struct {
	Lossy
	scores []float32
	ids    []int
	kept   []bool
	Skips  metrics.Skips // every change since the Selector was made
}

// Apply adjusts one token's routing — ids and w in rank order as Route left
// them from logits — by the modes that are on. cached reports whether an
// expert of the routing's layer is in the cache (drop and substitute ask
// it). probs is Route's scratch (len(logits) floats).
func (s *Selector) Apply(spec model.RouterSpec, logits []float32, ids []int, w []float32, probs []float32, cached func(expert int) bool) error {
	k := len(ids)
	if len(w) != k || k == 0 || len(probs) < len(logits) {
		return fmt.Errorf("router: lossy routing of %d ids, %d weights, %d scratch for %d logits", k, len(w), len(probs), len(logits))
	}
	s.Skips.Routed += int64(k)
	if s.Substitute > 0 {
		s.Skips.Substituted += int64(s.substitute(spec, logits, ids, w, probs, cached))
	}
	if s.DynamicK > 0 {
		s.Skips.Trimmed += int64(s.trim(w, ids))
	}
	if s.Drop > 0 {
		s.Skips.Dropped += int64(drop(w, ids, s.Drop, spec.K, cached))
	}
	return nil
}

// substitute re-ranks with cached experts raised by λ × the logit range and
// gives the new set the router's weights (Route's gating: the same scores,
// renormalisation and scale); it returns how many experts were
// replaced. When the set does not change, ids and w are left as they are.
func (s *Selector) substitute(spec model.RouterSpec, logits []float32, ids []int, w []float32, probs []float32, cached func(int) bool) int {
	n, k := len(logits), len(ids)
	lo, hi := float32(math.Inf(1)), float32(math.Inf(-1))
	for _, v := range logits {
		if !math.IsNaN(float64(v)) {
			lo, hi = min(lo, v), max(hi, v)
		}
	}
	if !(hi > lo) {
		return 0
	}
	bias := float32(s.Substitute * (hi - lo))
	if cap(s.scores) < n {
		s.scores = make([]float32, n)
	}
	sc := s.scores[:n]
	for i, v := range logits {
		sc[i] = v
		if cached(i) {
			sc[i] += bias
		}
	}
	if cap(s.ids) < k {
		s.ids = make([]int, k)
	}
	nid := s.ids[:k]
	topK(sc, nid)
	replaced := 0
	for _, x := range nid {
		if !contains(ids, x) {
			replaced++
		}
	}
	if replaced == 0 {
		return 0
	}
	if spec.Gating != model.TopKSoftmax && score(spec, logits, probs[:n]) != nil {
		return 0 // Route refused this spec already; the routing is left as it is
	}
	copy(ids, nid)
	weigh(spec, logits, probs[:n], ids, w)
	return replaced
}

func contains(ids []int, x int) bool {
	for _, y := range ids {
		if y == x {
			return true
		}
	}
	return false
}

// top is the slot of the largest weight among the kept ones (the first on
// ties).
func top(w []float32, ids []int) int {
	t := -1
	for r, v := range w {
		if ids[r] >= 0 && (t < 0 || v > w[t]) {
			t = r
		}
	}
	return t
}

// total is Σ of the kept weights, in float64.
func total(w []float32, ids []int) float64 {
	var s float64
	for r, v := range w {
		if ids[r] >= 0 {
			s += float64(v)
		}
	}
	return s
}

// rescale scales the kept weights so they sum to want again.
func rescale(w []float32, ids []int, want float64) {
	kept := total(w, ids)
	if kept <= 0 {
		return
	}
	f := float32(want / kept)
	for r := range w {
		if ids[r] >= 0 {
			w[r] *= f
		}
	}
}

// trim keeps the fewest slots, largest weight first, whose weights reach
// DynamicK of the total, and returns how many it cut.
func (s *Selector) trim(w []float32, ids []int) int {
	sum := total(w, ids)
	if sum <= 0 {
		return 0
	}
	want := float64(s.DynamicK) * sum
	var acc float64
	cut := 0
	// Select by repeated maximum (k is small): slots in weight order, ties
	// by rank.
	if cap(s.kept) < len(w) {
		s.kept = make([]bool, len(w))
	}
	kept := s.kept[:len(w)]
	clear(kept)
	for acc < want {
		b := -1
		for r, v := range w {
			if ids[r] >= 0 && !kept[r] && (b < 0 || v > w[b]) {
				b = r
			}
		}
		if b < 0 {
			break
		}
		kept[b] = true
		acc += float64(w[b])
	}
	for r := range w {
		if ids[r] >= 0 && !kept[r] {
			ids[r], w[r] = -1, 0
			cut++
		}
	}
	if cut > 0 {
		rescale(w, ids, sum)
	}
	return cut
}

// drop skips the missed experts weighted below f × the uniform share of a
// routing of k, never the top one, and returns how many it skipped.
func drop(w []float32, ids []int, f float32, k int, cached func(int) bool) int {
	sum := total(w, ids)
	t := top(w, ids)
	thr := float64(f) * sum / float64(k)
	n := 0
	for r, x := range ids {
		if x < 0 || r == t || float64(w[r]) >= thr || cached(x) {
			continue
		}
		ids[r], w[r] = -1, 0
		n++
	}
	if n > 0 {
		rescale(w, ids, sum)
	}
	return n
}
