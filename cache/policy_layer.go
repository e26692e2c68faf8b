package cache

import (
	"container/heap"
	"math"
)

// Layered is the cliff-free online policy family ("layer", "layer-lru").
//
// A decode pass visits the layers in a fixed cycle, so global recency (LRU)
// ranks every expert of the layer about to run as the oldest: below one
// token's working set LRU evicts exactly what is needed next and hits 0 %.
// Layered measures time per layer instead: an entry's age is the number of
// visits to *its* layer since it was used, so entries of different layers
// compare fairly whatever the position in the cycle.
//
// Each entry carries a combined recency-frequency value (LRFU): every use at
// visit v of its layer adds 2^(λ·v); its value now is Σ 2^(-λ·(V-v)) with V
// the layer's current visit count. λ = 0 is frequency, λ = +Inf is pure
// recency in layer time (value = −visits missed). With history, an evicted
// key's value is kept (one float per key ever seen, at most layers × experts)
// and restored when it is admitted again, so popular experts regain their
// rank at once.
//
// Victim order. Without expectedNext: smallest value first; ties go to the
// layer visited most recently (its next visit is the farthest away in the
// cycle), then to the smaller raw value (logS), then to the least recently
// used entry, then to the smaller key. With expectedNext (the
// "layer" policy): the value becomes a per-visit use probability
// p = value·(1−2^−λ) (the steady state of a Bernoulli(p) stream), and the
// entry expected to be used last goes first, its next use estimated at batch
// lastVisit(layer) + L/p for L layers: a key of the layer that just ran waits
// a whole cycle even if it is certain to be used, a key of the next layer
// only one batch. Same ties.
//
// Costs: Batch, OnHit, OnAdmit and OnEvict are O(log n + log L) (a heap per
// layer plus a heap of layers keyed by their best victim, whose order only
// changes when that layer is visited or its entries change); Victim is
// O(log L) when the best candidate is eligible, plus O(log n) per ineligible
// key skipped.
type Layered struct {
	name    string
	lambda  float64
	history bool
	eta     bool // rank by expected next use instead of value

	batch     int64
	visits    []int64 // per layer: Batch calls so far
	lastBatch []int64 // per layer: batch number of its last visit
	heaps     []layerHeap
	ent       map[Key]*layerEntry
	ghost     map[Key]float64
	clock     int64
	stash     []*layerEntry

	lh     layersHeap // layers with entries, best victim first
	lkey   []rank     // per layer: rank of its heap top
	lpos   []int      // per layer: index in lh, -1 when absent
	popped []int
}

// rank orders victims: smaller evicts first. The order is total: the last
// field is the key, so two resident entries never tie and the victim is a
// function of the call history alone (not of map or heap layout).
type rank struct {
	keep    float64 // value, or minus the expected next-use batch
	last    int64   // minus the layer's last visit batch
	use     float64 // Layered: logS (see rankOf); LayerMix: 0
	lastUse int64
	key     Key
}

func (a rank) less(b rank) bool {
	if a.keep != b.keep {
		return a.keep < b.keep
	}
	if a.last != b.last {
		return a.last < b.last
	}
	if a.use != b.use {
		return a.use < b.use
	}
	if a.lastUse != b.lastUse {
		return a.lastUse < b.lastUse
	}
	return a.key.less(b.key)
}

type layerEntry struct {
	key     Key
	logS    float64 // log2 Σ 2^(λ·v_i), or the last use's visit when λ = +Inf
	lastUse int64   // access clock of the last use
	idx     int     // index in its layer heap
}

// layerHeap orders one layer's entries by (logS, lastUse, key), which is
// their rank order at every moment: within a layer keep is a non-decreasing
// function of logS and last is the same, and rank compares logS next.
type layerHeap []*layerEntry

func (h layerHeap) Len() int { return len(h) }
func (h layerHeap) Less(i, j int) bool {
	a, b := h[i], h[j]
	if a.logS != b.logS {
		return a.logS < b.logS
	}
	if a.lastUse != b.lastUse {
		return a.lastUse < b.lastUse
	}
	return a.key.less(b.key)
}
func (h layerHeap) Swap(i, j int) {
	h[i], h[j] = h[j], h[i]
	h[i].idx = i
	h[j].idx = j
}
func (h *layerHeap) Push(x any) {
	e := x.(*layerEntry)
	e.idx = len(*h)
	*h = append(*h, e)
}
func (h *layerHeap) Pop() any {
	old := *h
	e := old[len(old)-1]
	old[len(old)-1] = nil
	*h = old[:len(old)-1]
	e.idx = -1
	return e
}

// layersHeap is a heap of layer numbers ordered by Layered.lkey.
type layersHeap struct {
	p *Layered
	l []int
}

func (h *layersHeap) Len() int           { return len(h.l) }
func (h *layersHeap) Less(i, j int) bool { return h.p.lkey[h.l[i]].less(h.p.lkey[h.l[j]]) }
func (h *layersHeap) Swap(i, j int) {
	h.l[i], h.l[j] = h.l[j], h.l[i]
	h.p.lpos[h.l[i]] = i
	h.p.lpos[h.l[j]] = j
}
func (h *layersHeap) Push(x any) {
	m := x.(int)
	h.p.lpos[m] = len(h.l)
	h.l = append(h.l, m)
}
func (h *layersHeap) Pop() any {
	m := h.l[len(h.l)-1]
	h.l = h.l[:len(h.l)-1]
	h.p.lpos[m] = -1
	return m
}

// NewLayered returns a layer-time LRFU policy named name with decay lambda
// (≥ 0, in powers of two per visit of the entry's layer; +Inf is pure
// recency in layer time). history keeps evicted keys' values; expectedNext
// ranks victims by estimated next use instead of by value (see Layered).
// layers may be 0 (learned from Batch and the keys).
func NewLayered(name string, lambda float64, history, expectedNext bool, layers int) *Layered {
	p := &Layered{name: name, lambda: lambda, history: history, eta: expectedNext, ent: make(map[Key]*layerEntry)}
	p.lh.p = p
	if history {
		p.ghost = make(map[Key]float64)
	}
	p.grow(layers - 1)
	return p
}

func (p *Layered) grow(layer int) {
	if layer < len(p.visits) {
		return
	}
	for len(p.visits) <= layer {
		p.visits = append(p.visits, 0)
		p.lastBatch = append(p.lastBatch, 0)
		p.heaps = append(p.heaps, nil)
		p.lkey = append(p.lkey, rank{})
		p.lpos = append(p.lpos, -1)
	}
	// L changed: the expected-next ranks of every layer change.
	for m := range p.heaps {
		p.refresh(m)
	}
}

// Name implements Policy.
func (p *Layered) Name() string { return p.name }

// Batch implements Policy.
func (p *Layered) Batch(step, layer int) {
	if layer < 0 {
		return
	}
	p.grow(layer)
	p.batch++
	p.visits[layer]++
	p.lastBatch[layer] = p.batch
	p.refresh(layer)
}

// addUse returns log2(2^logS + 2^x) without overflow.
func addUse(logS, x float64) float64 {
	if math.IsInf(logS, -1) {
		return x
	}
	hi, lo := logS, x
	if lo > hi {
		hi, lo = lo, hi
	}
	return hi + math.Log2(1+math.Exp2(lo-hi))
}

func (p *Layered) use(e *layerEntry) {
	p.clock++
	e.lastUse = p.clock
	v := p.visits[e.key.Layer]
	if math.IsInf(p.lambda, 1) {
		e.logS = float64(v)
		return
	}
	e.logS = addUse(e.logS, float64(p.lambda*float64(v)))
}

// value is log2 of the entry's current LRFU value; with λ = +Inf it is minus
// the visits of the entry's layer since its last use.
func (p *Layered) value(e *layerEntry) float64 {
	v := float64(p.visits[e.key.Layer])
	if math.IsInf(p.lambda, 1) {
		return e.logS - v
	}
	return e.logS - float64(p.lambda*v)
}

// rankOf is e's victim rank now. keep is only non-decreasing in logS: the
// probability is clamped to [1e-12, 1] (an entry used several times in one
// visit, as in a prefill batch, reaches 1) and rounding merges close values.
// Ties on keep then fall to logS itself, the heap's own order; breaking them
// by recency instead let the heap miss the minimum (issue 38).
func (p *Layered) rankOf(e *layerEntry) rank {
	m := e.key.Layer
	r := rank{keep: p.value(e), last: -p.lastBatch[m], use: e.logS, lastUse: e.lastUse, key: e.key}
	if p.eta && !math.IsInf(p.lambda, 1) {
		var pr float64
		if p.lambda == 0 {
			c := math.Exp2(r.keep) // plain count: Laplace-style estimate
			pr = c / (c + 1)
		} else {
			pr = math.Exp2(r.keep) * (1 - math.Exp2(-p.lambda))
		}
		pr = min(max(pr, 1e-12), 1)
		r.keep = -(float64(p.lastBatch[m]) + float64(len(p.visits))/pr)
	}
	return r
}

// refresh recomputes layer m's place in the heap of layers.
func (p *Layered) refresh(m int) {
	h := p.heaps[m]
	if len(h) == 0 {
		if p.lpos[m] >= 0 {
			heap.Remove(&p.lh, p.lpos[m])
		}
		return
	}
	p.lkey[m] = p.rankOf(h[0])
	if p.lpos[m] >= 0 {
		heap.Fix(&p.lh, p.lpos[m])
	} else {
		heap.Push(&p.lh, m)
	}
}

// OnHit implements Policy.
func (p *Layered) OnHit(k Key) {
	e, ok := p.ent[k]
	if !ok {
		return
	}
	p.use(e)
	heap.Fix(&p.heaps[k.Layer], e.idx)
	p.refresh(k.Layer)
}

// OnAdmit implements Policy.
func (p *Layered) OnAdmit(k Key, bytes int64) {
	if _, ok := p.ent[k]; ok {
		p.OnHit(k)
		return
	}
	if k.Layer < 0 {
		return
	}
	p.grow(k.Layer)
	e := &layerEntry{key: k, logS: math.Inf(-1)}
	if g, ok := p.ghost[k]; ok {
		e.logS = g
	}
	p.use(e)
	p.ent[k] = e
	heap.Push(&p.heaps[k.Layer], e)
	p.refresh(k.Layer)
}

// OnEvict implements Policy.
func (p *Layered) OnEvict(k Key) {
	e, ok := p.ent[k]
	if !ok {
		return
	}
	heap.Remove(&p.heaps[k.Layer], e.idx)
	delete(p.ent, k)
	if p.history {
		p.ghost[k] = e.logS
	}
	p.refresh(k.Layer)
}

// Victim implements Policy. Layers come off the heap of layers best first;
// each layer's top rank bounds all its entries, so the search stops at the
// first layer that cannot beat the best eligible candidate found.
func (p *Layered) Victim(eligible func(Key) bool) (Key, bool) {
	var best *layerEntry
	var bestR rank
	for p.lh.Len() > 0 {
		m := p.lh.l[0]
		if best != nil && !p.lkey[m].less(bestR) {
			break
		}
		heap.Pop(&p.lh)
		p.popped = append(p.popped, m)
		h := &p.heaps[m]
		var cand *layerEntry
		for h.Len() > 0 {
			e := (*h)[0]
			if eligible(e.key) {
				cand = e
				break
			}
			p.stash = append(p.stash, heap.Pop(h).(*layerEntry))
		}
		for _, e := range p.stash {
			heap.Push(h, e)
		}
		p.stash = p.stash[:0]
		if cand == nil {
			continue
		}
		if r := p.rankOf(cand); best == nil || r.less(bestR) {
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
