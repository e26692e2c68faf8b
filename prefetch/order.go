package prefetch

import "github.com/pipe-engine/pipe/cache"

// hitsFirst returns a layer's experts with the resident ones first, each
// group in router-rank order, so the FFN computes the hits while the lanes
// read the misses: Plan submits misses in order and Submit blocks while the
// demand queue is full, so in a prefill layer (up to every expert of the
// layer) a hit behind more misses than the queue holds would otherwise wait
// for reads. The result is the planner's scratch (valid until the next Plan);
// the FFN sums in rank order whatever the arrival order.
func (p *Planner) hitsFirst(layer int, experts []int) []int {
	if len(experts) < 2 {
		return experts
	}
	hits, misses := p.hitOrd[:0], p.missOrd[:0]
	for _, e := range experts {
		if p.cache.Contains(cache.Key{Layer: layer, Expert: e}) {
			hits = append(hits, e)
		} else {
			misses = append(misses, e)
		}
	}
	p.missOrd = misses
	if len(hits) == 0 || len(misses) == 0 {
		p.hitOrd = hits
		return experts
	}
	p.hitOrd = append(hits, misses...) // keeps the capacity for the next call
	return p.hitOrd
}
