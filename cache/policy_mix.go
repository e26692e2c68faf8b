package cache

import (
	"container/heap"
	"math"
)

// LayerMix is the "layer" policy: per-layer time, two time scales, victims
// by expected next use.
//
// Time is counted per layer, as in Layered: an entry ages by one each time
// *its* layer is visited (Batch), so the fixed layer cycle of decoding does
// not make the experts of the next layer look oldest (LRU's cliff below one
// token's working set).
//
// Each entry estimates the probability p that its layer's next visit routes
// to it, as a mix of a fast and a slow exponentially decayed use count:
//
//	p = w·(1−2^−λf)·Σ 2^(−λf·age) + (1−w)·(1−2^−λs)·Σ 2^(−λs·age)
//
// (each normalised sum is the steady-state p of a Bernoulli stream). The fast
// one follows the previous tokens' experts (temporal locality), the slow one
// the layer's popular experts. With history, evicted keys keep their counts
// (at most layers × experts of them), so a popular expert that was pushed
// out regains its rank at once.
//
// The victim is the eligible entry expected to be used last: its next use is
// estimated at batch lastVisit(layer) + L/p, so a key of the layer that just
// ran waits a whole cycle even if it is certain, a key of the next layer only
// one batch. Ties go to the layer visited most recently, then to the least
// recently used entry, then to the smaller key (a total order: the victim
// depends on the call history alone).
//
// Costs: Batch, OnHit, OnAdmit and OnEvict are O(1) plus O(log L) for L
// layers; they mark the layer dirty. Victim rescans each dirty layer once,
// O(entries of that layer) — bounded by the model's experts per layer, not by
// the cache size — then finds the best layer in O(log L), plus a rescan of a
// layer whose best entry is ineligible.
type LayerMix struct {
	name          string
	fast, slow, w float64
	nfast, nslow  float64     // (1−2^−λ) normalisers
	fastPow       [64]float64 // 2^(−fast·d) for small d
	slowPow       [64]float64
	history       bool
	admit         bool // Admit compares the candidate with the victim (else admits all)
	batch, clock  int64
	layers        []mixLayer
	ent           map[Key]*mixEntry
	ghost         map[Key]mixEntry
	lh            mixLayersHeap
	dirty         []int
	popped        []int
	spare         []*mixEntry // evicted entries, reused by OnAdmit
}

type mixEntry struct {
	key     Key
	f, s    float64 // decayed counts as of visit stamp
	stamp   int64
	lastUse int64
	idx     int // index in its layer's entries
}

type mixLayer struct {
	visits, lastBatch int64
	entries           []*mixEntry
	best              *mixEntry // entry with the smallest rank, ignoring eligibility
	bestR             rank
	pos               int // index in lh, -1 when absent
	dirty             bool
}

type mixLayersHeap struct {
	p *LayerMix
	l []int
}

func (h *mixLayersHeap) Len() int { return len(h.l) }
func (h *mixLayersHeap) Less(i, j int) bool {
	return h.p.layers[h.l[i]].bestR.less(h.p.layers[h.l[j]].bestR)
}
func (h *mixLayersHeap) Swap(i, j int) {
	h.l[i], h.l[j] = h.l[j], h.l[i]
	h.p.layers[h.l[i]].pos = i
	h.p.layers[h.l[j]].pos = j
}
func (h *mixLayersHeap) Push(x any) {
	m := x.(int)
	h.p.layers[m].pos = len(h.l)
	h.l = append(h.l, m)
}
func (h *mixLayersHeap) Pop() any {
	m := h.l[len(h.l)-1]
	h.l = h.l[:len(h.l)-1]
	h.p.layers[m].pos = -1
	return m
}

// NewLayerMix returns the two-time-scale policy: decay rates fast and slow
// (powers of two per visit of the entry's layer), weight w of the fast
// estimate, history as above; layers may be 0 (learned).
func NewLayerMix(name string, fast, slow, w float64, history bool, layers int) *LayerMix {
	p := &LayerMix{name: name, fast: fast, slow: slow, w: w, history: history,
		nfast: 1 - math.Exp2(-fast), nslow: 1 - math.Exp2(-slow), ent: make(map[Key]*mixEntry)}
	p.lh.p = p
	if history {
		p.ghost = make(map[Key]mixEntry)
	}
	for d := range p.fastPow {
		p.fastPow[d] = math.Exp2(-fast * float64(d))
		p.slowPow[d] = math.Exp2(-slow * float64(d))
	}
	p.grow(layers - 1)
	return p
}

func (p *LayerMix) grow(layer int) {
	if layer < len(p.layers) {
		return
	}
	for len(p.layers) <= layer {
		p.layers = append(p.layers, mixLayer{pos: -1})
	}
	for m := range p.layers { // L changed: every rank changes
		p.markDirty(m)
	}
}

func (p *LayerMix) markDirty(m int) {
	if !p.layers[m].dirty {
		p.layers[m].dirty = true
		p.dirty = append(p.dirty, m)
	}
}

// Name implements Policy.
func (p *LayerMix) Name() string { return p.name }

// Batch implements Policy.
func (p *LayerMix) Batch(step, layer int) {
	if layer < 0 {
		return
	}
	p.grow(layer)
	p.batch++
	ly := &p.layers[layer]
	ly.visits++
	ly.lastBatch = p.batch
	p.markDirty(layer)
}

// decayed returns e's counts as of its layer's current visit.
func (p *LayerMix) decayed(e *mixEntry) (f, s float64) {
	f, s = e.f, e.s
	d := p.layers[e.key.Layer].visits - e.stamp
	switch {
	case d <= 0:
	case d < int64(len(p.fastPow)):
		f *= p.fastPow[d]
		s *= p.slowPow[d]
	default:
		f = float64(f * math.Exp2(-p.fast*float64(d)))
		s = float64(s * math.Exp2(-p.slow*float64(d)))
	}
	return f, s
}

func (p *LayerMix) use(e *mixEntry) {
	e.f, e.s = p.decayed(e)
	e.stamp = p.layers[e.key.Layer].visits
	e.f++
	e.s++
	p.clock++
	e.lastUse = p.clock
	p.markDirty(e.key.Layer)
}

// prob is e's estimated per-visit use probability now.
func (p *LayerMix) prob(e *mixEntry) float64 {
	f, s := p.decayed(e)
	pr := float64(p.w*p.nfast*f) + float64((1-p.w)*p.nslow*s)
	return min(max(pr, 1e-12), 1)
}

// rankOf is e's victim rank now; it does not change e.
func (p *LayerMix) rankOf(e *mixEntry) rank {
	ly := &p.layers[e.key.Layer]
	return rank{
		keep:    -(float64(ly.lastBatch) + float64(len(p.layers))/p.prob(e)),
		last:    -ly.lastBatch,
		lastUse: e.lastUse,
		key:     e.key,
	}
}

// OnHit implements Policy.
func (p *LayerMix) OnHit(k Key) {
	if e, ok := p.ent[k]; ok {
		p.use(e)
	}
}

// OnAdmit implements Policy.
func (p *LayerMix) OnAdmit(k Key, bytes int64) {
	if e, ok := p.ent[k]; ok {
		p.use(e)
		return
	}
	if k.Layer < 0 {
		return
	}
	p.grow(k.Layer)
	var e *mixEntry
	if n := len(p.spare); n > 0 {
		e, p.spare = p.spare[n-1], p.spare[:n-1]
	} else {
		e = new(mixEntry)
	}
	*e = mixEntry{key: k, stamp: p.layers[k.Layer].visits}
	if g, ok := p.ghost[k]; ok {
		e.f, e.s, e.stamp = g.f, g.s, g.stamp
	}
	ly := &p.layers[k.Layer]
	e.idx = len(ly.entries)
	ly.entries = append(ly.entries, e)
	p.ent[k] = e
	p.use(e)
}

// OnEvict implements Policy.
func (p *LayerMix) OnEvict(k Key) {
	e, ok := p.ent[k]
	if !ok {
		return
	}
	ly := &p.layers[k.Layer]
	last := len(ly.entries) - 1
	ly.entries[e.idx] = ly.entries[last]
	ly.entries[e.idx].idx = e.idx
	ly.entries[last] = nil
	ly.entries = ly.entries[:last]
	delete(p.ent, k)
	if p.history {
		p.ghost[k] = mixEntry{f: e.f, s: e.s, stamp: e.stamp}
	}
	if ly.best == e {
		ly.best = nil
	}
	p.spare = append(p.spare, e)
	p.markDirty(k.Layer)
}

// Admit implements Admitter. With admission on (and history, which keeps
// the counts of refused keys), a missed key is admitted only when its
// estimated per-visit use probability — its remembered counts decayed to
// now, plus this use — is at least the victim's: TinyLFU's frequency test
// with the policy's own estimates. (Comparing expected next-use times
// instead, the victim order, refuses too much: the candidate's layer has
// just been visited, so its next use is always a whole cycle away; that
// variant lost up to 0.7 points of hit rate in replay.)
func (p *LayerMix) Admit(k, victim Key) bool {
	if !p.admit || !p.history {
		return true
	}
	v, ok := p.ent[victim]
	if !ok || k.Layer < 0 {
		return true
	}
	c := p.candidate(k)
	return p.prob(&c) >= p.prob(v)
}

// OnRefuse implements Admitter: the refused lookup counts as a use in the
// key's remembered counts.
func (p *LayerMix) OnRefuse(k Key) {
	if !p.history || k.Layer < 0 {
		return
	}
	c := p.candidate(k)
	p.clock++
	p.ghost[k] = mixEntry{f: c.f, s: c.s, stamp: c.stamp}
}

// candidate is k, not resident, as an entry used now: its remembered counts
// (or none) decayed to its layer's current visit, plus one use.
func (p *LayerMix) candidate(k Key) mixEntry {
	p.grow(k.Layer)
	now := p.layers[k.Layer].visits
	e := mixEntry{key: k, stamp: now}
	if g, ok := p.ghost[k]; ok {
		e.f, e.s, e.stamp = g.f, g.s, g.stamp
	}
	e.f, e.s = p.decayed(&e)
	e.stamp = now
	e.f++
	e.s++
	e.lastUse = p.clock + 1
	return e
}

// scan returns layer m's smallest-rank entry among those eligible accepts
// (nil accepts all).
func (p *LayerMix) scan(m int, eligible func(Key) bool) (*mixEntry, rank) {
	var best *mixEntry
	var bestR rank
	for _, e := range p.layers[m].entries {
		if eligible != nil && !eligible(e.key) {
			continue
		}
		if r := p.rankOf(e); best == nil || r.less(bestR) {
			best, bestR = e, r
		}
	}
	return best, bestR
}

func (p *LayerMix) clean() {
	for _, m := range p.dirty {
		ly := &p.layers[m]
		ly.dirty = false
		ly.best, ly.bestR = p.scan(m, nil)
		switch {
		case ly.best == nil && ly.pos >= 0:
			heap.Remove(&p.lh, ly.pos)
		case ly.best != nil && ly.pos >= 0:
			heap.Fix(&p.lh, ly.pos)
		case ly.best != nil:
			heap.Push(&p.lh, m)
		}
	}
	p.dirty = p.dirty[:0]
}

// Victim implements Policy.
func (p *LayerMix) Victim(eligible func(Key) bool) (Key, bool) {
	p.clean()
	var best *mixEntry
	var bestR rank
	for p.lh.Len() > 0 {
		m := p.lh.l[0]
		ly := &p.layers[m]
		if best != nil && !ly.bestR.less(bestR) {
			break
		}
		heap.Pop(&p.lh)
		p.popped = append(p.popped, m)
		cand, r := ly.best, ly.bestR
		if !eligible(cand.key) {
			cand, r = p.scan(m, eligible)
		}
		if cand != nil && (best == nil || r.less(bestR)) {
			best, bestR = cand, r
		}
	}
	for _, m := range p.popped {
		heap.Push(&p.lh, m)
	}
	p.popped = p.popped[:0]
	if best == nil {
		return Key{}, false
	}
	return best.key, true
}
