package cache

import (
	"container/heap"
	"math"
	"sort"
)

// Belady is the offline optimum for equal-size entries (MIN): it evicts the
// eligible key whose next use is farthest in the future, never-used-again
// keys first. It needs the complete notification sequence up front
// (PolicyOptions.Future: the key of every OnHit/OnAdmit in order) so it only
// exists for replay. Each call is O(log n) amortised: a max-heap of next-use
// positions with lazily discarded stale entries.
//
// Belady tolerates a sequence that diverges from Future (it then looks up
// the key's next position after the current cursor) but is only optimal when
// they agree. Ties (several keys never used again) go to the larger key
// (layer, then expert) so results are deterministic.
type Belady struct {
	future  []Key
	nextPos []int64         // nextPos[i]: next position of future[i]'s key after i
	pos     map[Key][]int64 // positions of each key, for a diverging sequence
	cursor  int64           // notifications seen so far
	next    map[Key]int64   // resident key -> its current next use
	h       beladyHeap
	stash   []beladyItem
}

type beladyItem struct {
	next int64
	key  Key
}

type beladyHeap []beladyItem

func (h beladyHeap) Len() int { return len(h) }
func (h beladyHeap) Less(i, j int) bool {
	if h[i].next != h[j].next {
		return h[i].next > h[j].next
	}
	if h[i].key.Layer != h[j].key.Layer {
		return h[i].key.Layer > h[j].key.Layer
	}
	return h[i].key.Expert > h[j].key.Expert
}
func (h beladyHeap) Swap(i, j int) { h[i], h[j] = h[j], h[i] }
func (h *beladyHeap) Push(x any)   { *h = append(*h, x.(beladyItem)) }
func (h *beladyHeap) Pop() any {
	old := *h
	it := old[len(old)-1]
	*h = old[:len(old)-1]
	return it
}

const never = math.MaxInt64

// NewBelady returns a Belady policy for the given future notification sequence.
func NewBelady(future []Key) *Belady {
	p := &Belady{future: future, nextPos: make([]int64, len(future)), next: make(map[Key]int64)}
	last := make(map[Key]int64)
	for i := len(future) - 1; i >= 0; i-- {
		k := future[i]
		if n, ok := last[k]; ok {
			p.nextPos[i] = n
		} else {
			p.nextPos[i] = never
		}
		last[k] = int64(i)
	}
	return p
}

// Name implements Policy.
func (p *Belady) Name() string { return "belady" }

// Batch implements Policy.
func (p *Belady) Batch(step, layer int) {}

// access consumes one notification for k and returns k's next use after it.
func (p *Belady) access(k Key) int64 {
	c := p.cursor
	p.cursor++
	if c < int64(len(p.future)) && p.future[c] == k {
		return p.nextPos[c]
	}
	// Diverged from Future: binary-search k's positions.
	if p.pos == nil {
		p.pos = make(map[Key][]int64)
		for i, f := range p.future {
			p.pos[f] = append(p.pos[f], int64(i))
		}
	}
	ps := p.pos[k]
	i := sort.Search(len(ps), func(i int) bool { return ps[i] > c })
	if i < len(ps) {
		return ps[i]
	}
	return never
}

func (p *Belady) touch(k Key) {
	n := p.access(k)
	p.next[k] = n
	heap.Push(&p.h, beladyItem{next: n, key: k})
	if len(p.h) > 4*len(p.next)+64 { // drop stale items: O(n) every ≥3n pushes
		p.h = p.h[:0]
		for k, n := range p.next {
			p.h = append(p.h, beladyItem{next: n, key: k})
		}
		heap.Init(&p.h)
	}
}

// OnHit implements Policy.
func (p *Belady) OnHit(k Key) {
	if _, ok := p.next[k]; !ok {
		p.access(k)
		return
	}
	p.touch(k)
}

// OnAdmit implements Policy.
func (p *Belady) OnAdmit(k Key, bytes int64) { p.touch(k) }

// OnEvict implements Policy.
func (p *Belady) OnEvict(k Key) { delete(p.next, k) }

// Victim implements Policy.
func (p *Belady) Victim(eligible func(Key) bool) (Key, bool) {
	defer func() {
		for _, it := range p.stash {
			heap.Push(&p.h, it)
		}
		p.stash = p.stash[:0]
	}()
	for p.h.Len() > 0 {
		it := heap.Pop(&p.h).(beladyItem)
		if n, ok := p.next[it.key]; !ok || n != it.next {
			continue // stale
		}
		p.stash = append(p.stash, it) // stays resident until OnEvict
		if eligible(it.key) {
			return it.key, true
		}
	}
	return Key{}, false
}
