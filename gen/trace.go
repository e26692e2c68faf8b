package gen

import (
	"bufio"
	"errors"
	"fmt"
	"io"
	"sort"
	"strconv"
	"strings"
)

// ErrTrace reports a malformed route_trace v1 file.
var ErrTrace = errors.New("route trace")

// RouteTrace is a route_trace v1 file (BigMoeOnEdge's --route-trace format,
// also written by `pipe run --route-trace`): the preamble and every routed
// (token, layer).
type RouteTrace struct {
	Model       string
	Arch        string
	NLayer      int
	NExpert     int
	NExpertUsed int
	Layers      []TraceLayer // from the "# layer=" preamble lines
	Steps       []RouteStep  // sorted by turn, phase, step, layer
}

// TraceLayer is one "# layer=L expert_bytes=B dense_bytes=D" preamble line.
type TraceLayer struct {
	Layer       int
	ExpertBytes int64
	DenseBytes  int64
}

// RouteStep is the routing of one token at one layer: the chosen experts in
// slot (rank) order.
type RouteStep struct {
	Turn, Phase, Step, Layer int
	Experts                  []int
}

// Phases of a route trace.
const (
	PhasePrefill = 0
	PhaseDecode  = 1
	PhaseAll     = -1
)

// ReadRouteTrace parses a route_trace v1 file.
func ReadRouteTrace(r io.Reader) (*RouteTrace, error) {
	sc := bufio.NewScanner(r)
	sc.Buffer(make([]byte, 64<<10), 1<<20)
	t := &RouteTrace{}
	type key struct{ turn, phase, step, layer int }
	steps := map[key]*RouteStep{}
	var cols map[string]int
	line := 0
	bad := func(format string, args ...any) error {
		return fmt.Errorf("%w: line %d: %s", ErrTrace, line, fmt.Sprintf(format, args...))
	}
	for sc.Scan() {
		line++
		s := strings.TrimSpace(sc.Text())
		if s == "" {
			continue
		}
		if strings.HasPrefix(s, "#") {
			s = strings.TrimSpace(strings.TrimPrefix(s, "#"))
			if line == 1 {
				if s != "route_trace v1" {
					return nil, bad("not a route_trace v1 file (%q)", s)
				}
				continue
			}
			kv := map[string]string{}
			for _, f := range strings.Fields(s) {
				if k, v, ok := strings.Cut(f, "="); ok {
					kv[k] = v
				}
			}
			if l, ok := kv["layer"]; ok {
				var tl TraceLayer
				var err1, err2, err3 error
				tl.Layer, err1 = strconv.Atoi(l)
				tl.ExpertBytes, err2 = strconv.ParseInt(kv["expert_bytes"], 10, 64)
				tl.DenseBytes, err3 = strconv.ParseInt(kv["dense_bytes"], 10, 64)
				if err := errors.Join(err1, err2, err3); err != nil {
					return nil, bad("layer line: %v", err)
				}
				t.Layers = append(t.Layers, tl)
				continue
			}
			if m, ok := kv["model"]; ok {
				t.Model, t.Arch = m, kv["arch"]
				var err1, err2, err3 error
				t.NLayer, err1 = strconv.Atoi(kv["n_layer"])
				t.NExpert, err2 = strconv.Atoi(kv["n_expert"])
				t.NExpertUsed, err3 = strconv.Atoi(kv["n_expert_used"])
				if err := errors.Join(err1, err2, err3); err != nil {
					return nil, bad("model line: %v", err)
				}
			}
			continue
		}
		f := strings.Split(s, ",")
		if cols == nil {
			if line == 1 {
				return nil, bad("missing '# route_trace v1' header")
			}
			cols = map[string]int{}
			for i, c := range f {
				cols[c] = i
			}
			for _, c := range []string{"turn", "phase", "step", "layer", "slot", "expert"} {
				if _, ok := cols[c]; !ok {
					return nil, bad("header has no %q column", c)
				}
			}
			continue
		}
		get := func(c string) (int, error) {
			i := cols[c]
			if i >= len(f) {
				return 0, bad("%d fields, no %s", len(f), c)
			}
			v, err := strconv.Atoi(f[i])
			if err != nil {
				return 0, bad("%s: %v", c, err)
			}
			return v, nil
		}
		var vals [6]int
		for i, c := range []string{"turn", "phase", "step", "layer", "slot", "expert"} {
			v, err := get(c)
			if err != nil {
				return nil, err
			}
			vals[i] = v
		}
		if vals[5] < 0 || (t.NExpert > 0 && vals[5] >= t.NExpert) {
			return nil, bad("expert %d out of range", vals[5])
		}
		k := key{vals[0], vals[1], vals[2], vals[3]}
		st := steps[k]
		if st == nil {
			st = &RouteStep{Turn: k.turn, Phase: k.phase, Step: k.step, Layer: k.layer}
			steps[k] = st
		}
		slot := vals[4]
		if slot < 0 || slot > 1024 {
			return nil, bad("slot %d out of range", slot)
		}
		for len(st.Experts) <= slot {
			st.Experts = append(st.Experts, -1)
		}
		st.Experts[slot] = vals[5]
	}
	if err := sc.Err(); err != nil {
		return nil, fmt.Errorf("%w: %w", ErrTrace, err)
	}
	if line == 0 {
		return nil, fmt.Errorf("%w: empty file", ErrTrace)
	}
	for _, st := range steps {
		for slot, e := range st.Experts {
			if e < 0 {
				return nil, fmt.Errorf("%w: turn %d phase %d step %d layer %d has no slot %d", ErrTrace, st.Turn, st.Phase, st.Step, st.Layer, slot)
			}
		}
		t.Steps = append(t.Steps, *st)
	}
	sort.Slice(t.Steps, func(i, j int) bool {
		a, b := t.Steps[i], t.Steps[j]
		if a.Turn != b.Turn {
			return a.Turn < b.Turn
		}
		if a.Phase != b.Phase {
			return a.Phase < b.Phase
		}
		if a.Step != b.Step {
			return a.Step < b.Step
		}
		return a.Layer < b.Layer
	})
	return t, nil
}

// RoutingStats are the two locality figures of BigMoeOnEdge's analysis.
type RoutingStats struct {
	K          int     // experts per token (largest slot count seen)
	Tokens     int     // (token, layer) pairs analysed
	PrevHit    float64 // mean fraction of a token's experts the previous token (same layer, turn, phase) also chose
	PopularHit float64 // mean fraction of a token's experts inside the layer's fixed popular set (its K most chosen experts over the analysed steps)
	Uniform    float64 // what both would be with uniform random routing: K / n_expert
	PerLayer   []LayerStats
}

// LayerStats are RoutingStats for one layer.
type LayerStats struct {
	Layer               int
	PrevHit, PopularHit float64
	Popular             []int // the layer's popular set, most chosen first
}

// Stats computes RoutingStats over the steps of phase (PhaseDecode,
// PhasePrefill or PhaseAll).
func (t *RouteTrace) Stats(phase int) RoutingStats {
	var st RoutingStats
	type lkey = int
	counts := map[lkey]map[int]int{}
	var sel []RouteStep
	for _, s := range t.Steps {
		if phase != PhaseAll && s.Phase != phase {
			continue
		}
		sel = append(sel, s)
		st.K = max(st.K, len(s.Experts))
		c := counts[s.Layer]
		if c == nil {
			c = map[int]int{}
			counts[s.Layer] = c
		}
		for _, e := range s.Experts {
			if e >= 0 {
				c[e]++
			}
		}
	}
	if st.K == 0 {
		return st
	}
	popular := map[int]map[int]bool{}
	var layers []int
	for l, c := range counts {
		layers = append(layers, l)
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
		st.PerLayer = append(st.PerLayer, LayerStats{Layer: l, Popular: es})
	}
	sort.Ints(layers)
	sort.Slice(st.PerLayer, func(i, j int) bool { return st.PerLayer[i].Layer < st.PerLayer[j].Layer })
	layerIdx := map[int]int{}
	for i, ls := range st.PerLayer {
		layerIdx[ls.Layer] = i
	}

	type pkey struct{ turn, phase, step, layer int }
	byKey := make(map[pkey][]int, len(sel))
	for _, s := range sel {
		byKey[pkey{s.Turn, s.Phase, s.Step, s.Layer}] = s.Experts
	}
	var prevSum, popSum float64
	var prevN, popN int
	lPrev := make([]float64, len(layers))
	lPrevN := make([]int, len(layers))
	lPop := make([]float64, len(layers))
	lPopN := make([]int, len(layers))
	for _, s := range sel {
		li := layerIdx[s.Layer]
		in := 0
		for _, e := range s.Experts {
			if popular[s.Layer][e] {
				in++
			}
		}
		f := float64(in) / float64(st.K)
		popSum += f
		popN++
		lPop[li] += f
		lPopN[li]++
		if prev, ok := byKey[pkey{s.Turn, s.Phase, s.Step - 1, s.Layer}]; ok {
			set := map[int]bool{}
			for _, e := range prev {
				set[e] = true
			}
			in := 0
			for _, e := range s.Experts {
				if e >= 0 && set[e] {
					in++
				}
			}
			f := float64(in) / float64(st.K)
			prevSum += f
			prevN++
			lPrev[li] += f
			lPrevN[li]++
		}
	}
	st.Tokens = popN
	if prevN > 0 {
		st.PrevHit = prevSum / float64(prevN)
	}
	if popN > 0 {
		st.PopularHit = popSum / float64(popN)
	}
	if t.NExpert > 0 {
		st.Uniform = float64(st.K) / float64(t.NExpert)
	}
	for i := range st.PerLayer {
		if lPrevN[i] > 0 {
			st.PerLayer[i].PrevHit = lPrev[i] / float64(lPrevN[i])
		}
		if lPopN[i] > 0 {
			st.PerLayer[i].PopularHit = lPop[i] / float64(lPopN[i])
		}
	}
	return st
}

// WriteRouteTrace writes t in route_trace v1 format (weights, residency and
// expert bytes are written as 0 when unknown).
func WriteRouteTrace(w io.Writer, t *RouteTrace) error {
	bw := bufio.NewWriter(w)
	fmt.Fprintf(bw, "# route_trace v1\n# model=%s arch=%s n_layer=%d n_expert=%d n_expert_used=%d\n", t.Model, t.Arch, t.NLayer, t.NExpert, t.NExpertUsed)
	eb := map[int]int64{}
	for _, l := range t.Layers {
		fmt.Fprintf(bw, "# layer=%d expert_bytes=%d dense_bytes=%d\n", l.Layer, l.ExpertBytes, l.DenseBytes)
		eb[l.Layer] = l.ExpertBytes
	}
	fmt.Fprintln(bw, "turn,phase,step,layer,slot,expert,weight,residency,expert_bytes")
	for _, s := range t.Steps {
		for slot, e := range s.Experts {
			fmt.Fprintf(bw, "%d,%d,%d,%d,%d,%d,0,0,%d\n", s.Turn, s.Phase, s.Step, s.Layer, slot, e, eb[s.Layer])
		}
	}
	return bw.Flush()
}
