package grammar

import (
	"slices"
	"unsafe"
)

// machine interns a grammar's stacks and sets of stacks and memoizes each
// set's transition by a code point. A stack is an id: node 0 is the empty
// stack, any other is a grammar position on top of a parent stack. A set
// is an id too; dead (-1) is the empty set.
type machine struct {
	g      *Grammar
	nodes  []stackNode
	nodeID map[stackNode]int32
	sets   [][]int32 // set id -> its stacks, ascending
	setID  map[string]int32
	ascii  [][]int32 // set id -> next set by code point < 128 (unknown: -2), allocated on use
	// other: set id -> next set by which of its stacks match a code point
	// >= 128 (a bit per stack, sets of up to 64 stacks); beyond that, by
	// code point in wide.
	other [][]maskNext
	wide  []map[uint32]int32
	done  []bool  // set id -> holds the empty stack
	todo  []int32 // advance's scratch
	seen  []int32
}

type stackNode struct{ pos, parent int32 }

type maskNext struct {
	mask uint64
	next int32
}

const (
	dead    = -1
	unknown = -2
)

func newMachine(g *Grammar) *machine {
	return &machine{g: g, nodes: []stackNode{{-1, -1}}, nodeID: map[stackNode]int32{}, setID: map[string]int32{}}
}

func (m *machine) push(parent, pos int32) int32 {
	n := stackNode{pos, parent}
	if id, ok := m.nodeID[n]; ok {
		return id
	}
	id := int32(len(m.nodes))
	m.nodes = append(m.nodes, n)
	m.nodeID[n] = id
	return id
}

// intern returns the id of the set of stacks (sorted and deduplicated in
// place), dead for none.
func (m *machine) intern(stacks []int32) int32 {
	if len(stacks) == 0 {
		return dead
	}
	slices.Sort(stacks)
	stacks = slices.Compact(stacks)
	key := unsafe.String((*byte)(unsafe.Pointer(&stacks[0])), len(stacks)*4)
	if id, ok := m.setID[key]; ok {
		return id
	}
	id := int32(len(m.sets))
	own := slices.Clone(stacks)
	m.sets = append(m.sets, own)
	m.setID[string([]byte(key))] = id
	m.ascii = append(m.ascii, nil)
	m.other = append(m.other, nil)
	m.wide = append(m.wide, nil)
	m.done = append(m.done, own[0] == 0)
	return id
}

// start is the set of stacks at the beginning of the root rule.
func (m *machine) start() int32 {
	var out []int32
	g := m.g
	pos := g.start[g.root]
	for {
		st := int32(0)
		if !endOfSeq(g.elems[pos]) {
			st = m.push(0, pos)
		}
		out = m.advance(st, out)
		for !endOfSeq(g.elems[pos]) {
			pos++
		}
		if g.elems[pos].k != kAlt {
			break
		}
		pos++
	}
	return m.intern(out)
}

// advance appends to out the stacks st expands into, each empty or with a
// character class on top (llama_grammar_advance_stack).
func (m *machine) advance(st int32, out []int32) []int32 {
	g := m.g
	todo := append(m.todo[:0], st)
	seen := m.seen[:0]
	defer func() { m.todo, m.seen = todo[:0], seen[:0] }()
	for len(todo) > 0 {
		cur := todo[len(todo)-1]
		todo = todo[:len(todo)-1]
		if slices.Contains(seen, cur) {
			continue
		}
		seen = append(seen, cur)
		if cur == 0 {
			out = append(out, cur)
			continue
		}
		n := m.nodes[cur]
		e := g.elems[n.pos]
		if e.k != kRef {
			out = append(out, cur)
			continue
		}
		sub := g.start[e.v]
		for {
			next := n.parent
			if !endOfSeq(g.elems[n.pos+1]) {
				next = m.push(next, n.pos+1)
			}
			if !endOfSeq(g.elems[sub]) {
				next = m.push(next, sub)
			}
			todo = append(todo, next)
			for !endOfSeq(g.elems[sub]) {
				sub++
			}
			if g.elems[sub].k != kAlt {
				break
			}
			sub++
		}
	}
	return out
}

// next is the set after code point cp (memoized).
func (m *machine) next(set int32, cp uint32) int32 {
	if cp < 128 {
		t := m.ascii[set]
		if t == nil {
			t = make([]int32, 128)
			for i := range t {
				t[i] = unknown
			}
			m.ascii[set] = t
		}
		if t[cp] == unknown {
			t[cp] = m.compute(set, cp)
		}
		return t[cp]
	}
	if len(m.sets[set]) > 64 {
		return m.nextWide(set, cp)
	}
	mask := m.matching(set, cp)
	for _, e := range m.other[set] {
		if e.mask == mask {
			return e.next
		}
	}
	id := m.advanceMatched(set, mask)
	m.other[set] = append(m.other[set], maskNext{mask, id})
	return id
}

// matching is the bitmask of set's stacks whose top class matches cp: the
// next set depends on cp only through it.
func (m *machine) matching(set int32, cp uint32) uint64 {
	var mask uint64
	for i, st := range m.sets[set] {
		if st != 0 {
			if ok, _ := m.matchChar(m.nodes[st].pos, cp); ok {
				mask |= 1 << i
			}
		}
	}
	return mask
}

// advanceMatched is the set after a code point matched by the stacks in
// mask.
func (m *machine) advanceMatched(set int32, mask uint64) int32 {
	var out []int32
	for i, st := range m.sets[set] {
		if mask&(1<<i) == 0 {
			continue
		}
		n := m.nodes[st]
		_, after := m.matchChar(n.pos, 0)
		out = m.pop(n.parent, after, out)
	}
	return m.intern(out)
}

func (m *machine) nextWide(set int32, cp uint32) int32 {
	o := m.wide[set]
	if o == nil {
		o = map[uint32]int32{}
		m.wide[set] = o
	}
	id, ok := o[cp]
	if !ok {
		id = m.compute(set, cp)
		o[cp] = id
	}
	return id
}

// pop continues a stack whose top class matched: the position after it
// (after) on parent, advanced.
func (m *machine) pop(parent, after int32, out []int32) []int32 {
	if !endOfSeq(m.g.elems[after]) {
		parent = m.push(parent, after)
	}
	return m.advance(parent, out)
}

// compute is llama_grammar_accept: every stack whose top class matches cp,
// popped and advanced.
func (m *machine) compute(set int32, cp uint32) int32 {
	var out []int32
	for _, st := range m.sets[set] {
		if st == 0 {
			continue
		}
		n := m.nodes[st]
		ok, after := m.matchChar(n.pos, cp)
		if ok {
			out = m.pop(n.parent, after, out)
		}
	}
	return m.intern(out)
}

// matchChar reports whether the class at pos matches cp, and the position
// after the class.
func (m *machine) matchChar(pos int32, cp uint32) (bool, int32) {
	el := m.g.elems
	positive := el[pos].k == kChar || el[pos].k == kAny
	found := false
	for {
		switch {
		case el[pos+1].k == kRngUpper:
			found = found || el[pos].v <= cp && cp <= el[pos+1].v
			pos += 2
		case el[pos].k == kAny:
			found = true
			pos++
		default:
			found = found || el[pos].v == cp
			pos++
		}
		if el[pos].k != kCharAlt {
			return found == positive, pos
		}
	}
}

// matchPartial reports whether some completion of an incomplete UTF-8
// sequence (val, rem bytes to come) could match the class at pos
// (llama_grammar_match_partial_char).
func (m *machine) matchPartial(pos int32, val uint32, rem int) bool {
	el := m.g.elems
	positive := el[pos].k == kChar || el[pos].k == kAny
	if rem == 1 && val < 2 {
		return false
	}
	lo := val << (rem * 6)
	hi := lo | (1<<(rem*6) - 1)
	if lo == 0 {
		switch rem {
		case 2:
			lo = 1 << 11
		case 3:
			lo = 1 << 16
		}
	}
	for {
		switch {
		case el[pos+1].k == kRngUpper:
			if el[pos].v <= hi && lo <= el[pos+1].v {
				return positive
			}
			pos += 2
		case el[pos].k == kAny:
			return true
		default:
			if lo <= el[pos].v && el[pos].v <= hi {
				return positive
			}
			pos++
		}
		if el[pos].k != kCharAlt {
			return !positive
		}
	}
}

// partialOK reports whether some stack of set could go on with the
// incomplete character (val, rem).
func (m *machine) partialOK(set int32, val uint32, rem int) bool {
	for _, st := range m.sets[set] {
		if st != 0 && m.matchPartial(m.nodes[st].pos, val, rem) {
			return true
		}
	}
	return false
}
