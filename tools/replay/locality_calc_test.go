package replay

import (
	"slices"
	"sort"
)

// PhaseAll selects both phases in Locality.
const PhaseAll = -1

// Locality are the two locality figures of BigMoeOnEdge's routing analysis,
// over the (token, layer) lookups of one phase of a trace.
type Locality struct {
	K          int     // experts per token (largest slot count seen)
	Tokens     int     // (token, layer) pairs analysed
	PrevHit    float64 // mean fraction of a token's experts the previous token (same layer, turn, phase) also chose
	PopularHit float64 // mean fraction of a token's experts inside the layer's fixed popular set (its K most chosen experts over the analysed steps)
	Uniform    float64 // what both would be with uniform random routing: K / n_expert
	PerLayer   []LayerLocality
}

// LayerLocality is Locality for one layer.
type LayerLocality struct {
	Layer               int
	PrevHit, PopularHit float64
	Popular             []int // the layer's popular set, most chosen first
}

// routeStep is one token's experts at one layer, in slot order.
type routeStep struct {
	turn, phase, step, layer int
	experts                  []int
}

// steps groups t's rows of phase (PhaseAll: both) into one routeStep per
// (turn, phase, step, layer), in trace order.
func (t *Trace) steps(phase int) []routeStep {
	var out []routeStep
	for _, r := range t.Rows {
		if phase != PhaseAll && r.Phase != phase {
			continue
		}
		n := len(out)
		if n == 0 || out[n-1].turn != r.Turn || out[n-1].phase != r.Phase || out[n-1].step != r.Step || out[n-1].layer != r.Layer {
			out = append(out, routeStep{turn: r.Turn, phase: r.Phase, step: r.Step, layer: r.Layer})
			n++
		}
		s := &out[n-1]
		for len(s.experts) <= r.Slot {
			s.experts = append(s.experts, -1)
		}
		s.experts[r.Slot] = r.Expert
	}
	return out
}

// Locality computes the routing locality of phase (PhaseDecode,
// PhasePrefill or PhaseAll): how often a token reuses the previous token's
// experts, and how often its experts are in its layer's popular set. It is
// how gen's routing skew was calibrated against the real traces.
func (t *Trace) Locality(phase int) Locality {
	var st Locality
	sel := t.steps(phase)
	counts := map[int]map[int]int{}
	for _, s := range sel {
		st.K = max(st.K, len(s.experts))
		c := counts[s.layer]
		if c == nil {
			c = map[int]int{}
			counts[s.layer] = c
		}
		for _, e := range s.experts {
			if e >= 0 {
				c[e]++
			}
		}
	}
	if st.K == 0 {
		return st
	}
	popular := map[int]map[int]bool{}
	for l, c := range counts {
		es := make([]int, 0, len(c))
		for e := range c {
			es = append(es, e)
		}
		sort.Slice(es, func(i, j int) bool {
			if c[es[i]] != c[es[j]] {
				return c[es[i]] > c[es[j]]
			}
			return es[i] < es[j]
		})
		es = es[:min(st.K, len(es))]
		popular[l] = map[int]bool{}
		for _, e := range es {
			popular[l][e] = true
		}
		st.PerLayer = append(st.PerLayer, LayerLocality{Layer: l, Popular: es})
	}
	sort.Slice(st.PerLayer, func(i, j int) bool { return st.PerLayer[i].Layer < st.PerLayer[j].Layer })
	st.fill(sel, popular)
	if t.Header.NExpert > 0 {
		st.Uniform = float64(st.K) / float64(t.Header.NExpert)
	}
	return st
}

// fill sets the hit fractions of st (K and PerLayer's popular sets known).
func (st *Locality) fill(sel []routeStep, popular map[int]map[int]bool) {
	layerIdx := map[int]int{}
	for i, ls := range st.PerLayer {
		layerIdx[ls.Layer] = i
	}
	type pkey struct{ turn, phase, step, layer int }
	byKey := make(map[pkey][]int, len(sel))
	for _, s := range sel {
		byKey[pkey{s.turn, s.phase, s.step, s.layer}] = s.experts
	}
	nl := len(st.PerLayer)
	lPrev, lPop := make([]float64, nl), make([]float64, nl)
	lPrevN, lPopN := make([]int, nl), make([]int, nl)
	var prevSum, popSum float64
	var prevN, popN int
	for _, s := range sel {
		li := layerIdx[s.layer]
		in := 0
		for _, e := range s.experts {
			if popular[s.layer][e] {
				in++
			}
		}
		f := float64(in) / float64(st.K)
		popSum += f
		popN++
		lPop[li] += f
		lPopN[li]++
		prev, ok := byKey[pkey{s.turn, s.phase, s.step - 1, s.layer}]
		if !ok {
			continue
		}
		in = 0
		for _, e := range s.experts {
			if e >= 0 && slices.Contains(prev, e) {
				in++
			}
		}
		f = float64(in) / float64(st.K)
		prevSum += f
		prevN++
		lPrev[li] += f
		lPrevN[li]++
	}
	st.Tokens = popN
	if prevN > 0 {
		st.PrevHit = prevSum / float64(prevN)
	}
	if popN > 0 {
		st.PopularHit = popSum / float64(popN)
	}
	for i := range st.PerLayer {
		if lPrevN[i] > 0 {
			st.PerLayer[i].PrevHit = lPrev[i] / float64(lPrevN[i])
		}
		if lPopN[i] > 0 {
			st.PerLayer[i].PopularHit = lPop[i] / float64(lPopN[i])
		}
	}
}
