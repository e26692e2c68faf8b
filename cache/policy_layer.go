package cache

import (
	"container/heap"
	"math"
)

// Layered is the cliff-free online policy family. A decode pass visits the
// layers in a fixed cycle, so global recency (LRU) ranks every expert of the
// layer about to run as the oldest: below one token's working set LRU evicts
// exactly what is needed next and hits 0 %. Layered measures time per layer
// instead: an entry's age is the number of visits to *its* layer since it was
// used, so entries of different layers compare fairly whatever the position
// in the cycle.
//
// Each entry carries a combined recency-frequency value (LRFU): every use at
// visit v of its layer adds 2^(λ·v); the entry's value now is
// Σ 2^(-λ·(V-v)) with V the layer's current visit count. λ = 0 is
// frequency (LFU per layer-time), large λ is recency. The victim is the
// eligible entry with the smallest value; ties go to the layer visited most
// recently (its next visit is the farthest away in the cycle), then to the
// least recently used entry. With History, an evicted key's value is kept
// (one float per key ever seen, bounded by layers × experts) and restored
// when it is admitted again, so popular experts recover their rank at once.
//
// Costs: OnHit/OnAdmit/OnEvict are O(log n) (a heap per layer); Victim is
// O(L + log n) for L layers, plus O(log n) per ineligible key skipped.
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
	ghost     map[Key]ghostValue
	clock     int64
	stash     []*layerEntry
}

type layerEntry struct {
	key     Key
	logS    float64 // log2 Σ 2^(λ·v_i)
	lastUse int64   // global access clock of the last use
	idx     int     // index in its layer heap
}

type ghostValue struct {
	logS float64
}

type layerHeap []*layerEntry

func (h layerHeap) Len() int { return len(h) }
func (h layerHeap) Less(i, j int) bool {
	if h[i].logS != h[j].logS {
		return h[i].logS < h[j].logS
	}
	return h[i].lastUse < h[j].lastUse
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

// NewLayered returns a layer-time LRFU policy with decay lambda (≥ 0, per
// visit of the entry's layer, in powers of two) named name. layers may be 0
// (learned from Batch and the keys).
func NewLayered(name string, lambda float64, history, expectedNext bool, layers int) *Layered {
	p := &Layered{name: name, lambda: lambda, history: history, eta: expectedNext, ent: make(map[Key]*layerEntry)}
	if history {
		p.ghost = make(map[Key]ghostValue)
	}
	p.grow(layers - 1)
	return p
}

func (p *Layered) grow(layer int) {
	for len(p.visits) <= layer {
		p.visits = append(p.visits, 0)
		p.lastBatch = append(p.lastBatch, 0)
		p.heaps = append(p.heaps, nil)
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
}

// addUse returns log2(2^logS + 2^(λ·v)) without overflow.
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
	e.logS = addUse(e.logS, float64(p.lambda*float64(p.visits[e.key.Layer])))
}

// OnHit implements Policy.
func (p *Layered) OnHit(k Key) {
	e, ok := p.ent[k]
	if !ok {
		return
	}
	p.use(e)
	heap.Fix(&p.heaps[k.Layer], e.idx)
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
	if p.history {
		if g, ok := p.ghost[k]; ok {
			e.logS = g.logS
		}
	}
	p.use(e)
	p.ent[k] = e
	heap.Push(&p.heaps[k.Layer], e)
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
		p.ghost[k] = ghostValue{logS: e.logS}
	}
}

// value is log2 of the entry's current LRFU value.
func (p *Layered) value(e *layerEntry) float64 {
	return e.logS - float64(p.lambda*float64(p.visits[e.key.Layer]))
}

// Victim implements Policy.
func (p *Layered) Victim(eligible func(Key) bool) (Key, bool) {
	var best *layerEntry
	var bestV float64
	for l := range p.heaps {
		h := &p.heaps[l]
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
		v := p.value(cand)
		if p.eta {
			v = -p.expectedNext(cand)
		}
		if best == nil || v < bestV ||
			(v == bestV && (p.lastBatch[l] > p.lastBatch[best.key.Layer] ||
				(p.lastBatch[l] == p.lastBatch[best.key.Layer] && cand.lastUse < best.lastUse))) {
			best, bestV = cand, v
		}
	}
	if best == nil {
		return Key{}, false
	}
	return best.key, true
}

// expectedNext estimates the batches until e is used again: the distance to
// its layer's next visit plus L per expected miss-visit, with the per-visit
// use probability estimated from the LRFU value (a Bernoulli(p) stream has
// value p/(1-2^-λ) in steady state).
func (p *Layered) expectedNext(e *layerEntry) float64 {
	L := int64(len(p.visits))
	d := L - (p.batch - p.lastBatch[e.key.Layer])
	if d < 1 {
		d = 1
	}
	pr := math.Exp2(p.value(e)) * (1 - math.Exp2(-p.lambda))
	if p.lambda == 0 {
		pr = 1 - 1/(1+math.Exp2(p.value(e)))
	}
	pr = min(max(pr, 1e-9), 1)
	return float64(d) + float64(L)*(1/pr-1)
}
