package cache

import "math/rand/v2"

// Random evicts a uniformly chosen eligible key, from a seeded generator: the
// same seed and the same call sequence give the same victims. All operations
// are O(1); Victim draws up to 16 times and then scans from a random start
// when most keys are ineligible.
type Random struct {
	rng  *rand.Rand
	keys []Key
	pos  map[Key]int
}

// NewRandom returns an empty random policy seeded with seed.
func NewRandom(seed int64) *Random {
	s := uint64(seed)
	return &Random{rng: rand.New(rand.NewPCG(s, s^0x9e3779b97f4a7c15)), pos: make(map[Key]int)}
}

// Name implements Policy.
func (p *Random) Name() string { return "random" }

// Batch implements Policy.
func (p *Random) Batch(step, layer int) {}

// OnHit implements Policy.
func (p *Random) OnHit(k Key) {}

// OnAdmit implements Policy.
func (p *Random) OnAdmit(k Key, bytes int64) {
	if _, ok := p.pos[k]; ok {
		return
	}
	p.pos[k] = len(p.keys)
	p.keys = append(p.keys, k)
}

// OnEvict implements Policy.
func (p *Random) OnEvict(k Key) {
	i, ok := p.pos[k]
	if !ok {
		return
	}
	last := len(p.keys) - 1
	p.keys[i] = p.keys[last]
	p.pos[p.keys[i]] = i
	p.keys = p.keys[:last]
	delete(p.pos, k)
}

// Victim implements Policy.
func (p *Random) Victim(eligible func(Key) bool) (Key, bool) {
	n := len(p.keys)
	if n == 0 {
		return Key{}, false
	}
	for range 16 {
		if k := p.keys[p.rng.IntN(n)]; eligible(k) {
			return k, true
		}
	}
	start := p.rng.IntN(n)
	for j := range n {
		if k := p.keys[(start+j)%n]; eligible(k) {
			return k, true
		}
	}
	return Key{}, false
}
