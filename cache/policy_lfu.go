package cache

// LFU evicts the least frequently used eligible key; among equal counts the
// least recently used. Counts live only while a key is resident. Every
// operation is O(1) (a list of frequency buckets, each an LRU list) except
// Victim's walk past ineligible keys.
type LFU struct {
	nodes map[Key]*lfuNode
	low   *lfuBucket // lowest frequency bucket; buckets ascend via next
}

type lfuNode struct {
	key        Key
	b          *lfuBucket
	prev, next *lfuNode // prev is more recent
}

type lfuBucket struct {
	freq       int64
	head, tail *lfuNode // head most recent
	prev, next *lfuBucket
}

// NewLFU returns an empty LFU policy.
func NewLFU() *LFU { return &LFU{nodes: make(map[Key]*lfuNode)} }

// Name implements Policy.
func (p *LFU) Name() string { return "lfu" }

// Batch implements Policy.
func (p *LFU) Batch(step, layer int) {}

// OnHit implements Policy.
func (p *LFU) OnHit(k Key) {
	n, ok := p.nodes[k]
	if !ok {
		return
	}
	b := n.b
	nb := b.next
	if nb == nil || nb.freq != b.freq+1 {
		nb = &lfuBucket{freq: b.freq + 1, prev: b, next: b.next}
		if b.next != nil {
			b.next.prev = nb
		}
		b.next = nb
	}
	p.unlink(n) // may drop b; nb stays linked
	p.link(nb, n)
}

// OnAdmit implements Policy.
func (p *LFU) OnAdmit(k Key, bytes int64) {
	if _, ok := p.nodes[k]; ok {
		p.OnHit(k)
		return
	}
	n := &lfuNode{key: k}
	p.nodes[k] = n
	b := p.low
	if b == nil || b.freq != 1 {
		b = &lfuBucket{freq: 1, next: p.low}
		if p.low != nil {
			p.low.prev = b
		}
		p.low = b
	}
	p.link(b, n)
}

// OnEvict implements Policy.
func (p *LFU) OnEvict(k Key) {
	if n, ok := p.nodes[k]; ok {
		p.unlink(n)
		delete(p.nodes, k)
	}
}

// Victim implements Policy.
func (p *LFU) Victim(eligible func(Key) bool) (Key, bool) {
	for b := p.low; b != nil; b = b.next {
		for n := b.tail; n != nil; n = n.prev {
			if eligible(n.key) {
				return n.key, true
			}
		}
	}
	return Key{}, false
}

// link puts n at the front (most recent end) of bucket b.
func (p *LFU) link(b *lfuBucket, n *lfuNode) {
	n.b, n.prev, n.next = b, nil, b.head
	if b.head != nil {
		b.head.prev = n
	} else {
		b.tail = n
	}
	b.head = n
}

// unlink removes n from its bucket, dropping the bucket when it empties.
func (p *LFU) unlink(n *lfuNode) {
	b := n.b
	if n.prev != nil {
		n.prev.next = n.next
	} else {
		b.head = n.next
	}
	if n.next != nil {
		n.next.prev = n.prev
	} else {
		b.tail = n.prev
	}
	n.prev, n.next, n.b = nil, nil, nil
	if b.head == nil {
		if b.prev != nil {
			b.prev.next = b.next
		} else {
			p.low = b.next
		}
		if b.next != nil {
			b.next.prev = b.prev
		}
		b.prev, b.next = nil, nil
	}
}
