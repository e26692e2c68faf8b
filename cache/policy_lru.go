package cache

// LRU evicts the least recently used eligible key. Every operation is O(1)
// except Victim, which walks from the cold end past ineligible keys.
type LRU struct {
	list  keyList
	nodes map[Key]*keyNode
	spare []*keyNode // evicted nodes, reused by OnAdmit
}

// NewLRU returns an empty LRU policy.
func NewLRU() *LRU { return &LRU{nodes: make(map[Key]*keyNode)} }

// Name implements Policy.
func (p *LRU) Name() string { return "lru" }

// Batch implements Policy.
func (p *LRU) Batch(step, layer int) {}

// OnHit implements Policy.
func (p *LRU) OnHit(k Key) {
	if n, ok := p.nodes[k]; ok {
		p.list.moveToFront(n)
	}
}

// OnAdmit implements Policy.
func (p *LRU) OnAdmit(k Key, bytes int64) {
	if n, ok := p.nodes[k]; ok {
		p.list.moveToFront(n)
		return
	}
	var n *keyNode
	if m := len(p.spare); m > 0 {
		n, p.spare = p.spare[m-1], p.spare[:m-1]
		*n = keyNode{key: k}
	} else {
		n = &keyNode{key: k}
	}
	p.nodes[k] = n
	p.list.pushFront(n)
}

// OnEvict implements Policy.
func (p *LRU) OnEvict(k Key) {
	if n, ok := p.nodes[k]; ok {
		p.list.remove(n)
		delete(p.nodes, k)
		p.spare = append(p.spare, n)
	}
}

// Victim implements Policy.
func (p *LRU) Victim(eligible func(Key) bool) (Key, bool) {
	for n := p.list.back(); n != nil; n = n.prev {
		if eligible(n.key) {
			return n.key, true
		}
	}
	return Key{}, false
}

// keyNode is an element of an intrusive doubly linked list of keys.
type keyNode struct {
	key        Key
	prev, next *keyNode
}

// keyList is a doubly linked list; front is most recent.
type keyList struct {
	head, tail *keyNode
	n          int
}

func (l *keyList) pushFront(n *keyNode) {
	n.prev, n.next = nil, l.head
	if l.head != nil {
		l.head.prev = n
	} else {
		l.tail = n
	}
	l.head = n
	l.n++
}

func (l *keyList) remove(n *keyNode) {
	if n.prev != nil {
		n.prev.next = n.next
	} else {
		l.head = n.next
	}
	if n.next != nil {
		n.next.prev = n.prev
	} else {
		l.tail = n.prev
	}
	n.prev, n.next = nil, nil
	l.n--
}

func (l *keyList) moveToFront(n *keyNode) {
	if l.head == n {
		return
	}
	l.remove(n)
	l.pushFront(n)
}

func (l *keyList) back() *keyNode { return l.tail }
