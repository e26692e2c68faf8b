package cache

import (
	"errors"
	"math"
	"strings"
	"testing"
)

func k(l, e int) Key { return Key{Layer: l, Expert: e} }

func all(Key) bool { return true }

func except(keys ...Key) func(Key) bool {
	return func(x Key) bool {
		for _, y := range keys {
			if x == y {
				return false
			}
		}
		return true
	}
}

func newPol(t *testing.T, name string, o PolicyOptions) Policy {
	t.Helper()
	p, err := NewPolicy(name, o)
	if err != nil {
		t.Fatal(err)
	}
	if p.Name() != name {
		t.Errorf("Name() = %q, want %q", p.Name(), name)
	}
	return p
}

func TestNewPolicyErrors(t *testing.T) {
	_, err := NewPolicy("fifo", PolicyOptions{})
	if !errors.Is(err, ErrUnknownPolicy) {
		t.Fatalf("err = %v, want ErrUnknownPolicy", err)
	}
	for _, n := range []string{"lru", "lfu", "random", "layer", "layer-lrfu", "layer-lru", "belady"} {
		if !strings.Contains(err.Error(), n) {
			t.Errorf("error %q does not list %q", err, n)
		}
	}
	if _, err := NewPolicy("belady", PolicyOptions{}); !errors.Is(err, ErrPolicyOptions) {
		t.Errorf("belady without Future: err = %v, want ErrPolicyOptions", err)
	}
	if p, err := NewPolicy(" LRU ", PolicyOptions{}); err != nil || p.Name() != "lru" {
		t.Errorf("NewPolicy(\" LRU \") = %v, %v", p, err)
	}
}

// TestEmptyAndUnknown: every policy answers "nothing" when empty and ignores
// notifications about keys it does not hold.
func TestEmptyAndUnknown(t *testing.T) {
	for _, n := range PolicyNames() {
		p := newPol(t, n, PolicyOptions{Future: []Key{}})
		if _, ok := p.Victim(all); ok {
			t.Errorf("%s: victim from an empty policy", n)
		}
		p.Batch(0, 0)
		p.OnHit(k(0, 1))
		p.OnEvict(k(0, 1))
		p.OnAdmit(k(0, 2), 10)
		p.OnAdmit(k(0, 2), 10) // double admit acts as a hit
		if _, ok := p.Victim(except(k(0, 2))); ok {
			t.Errorf("%s: victim although the only key is ineligible", n)
		}
		if v, ok := p.Victim(all); !ok || v != k(0, 2) {
			t.Errorf("%s: victim %v %v, want L0/E2", n, v, ok)
		}
		p.OnEvict(k(0, 2))
		if _, ok := p.Victim(all); ok {
			t.Errorf("%s: victim after the last eviction", n)
		}
	}
}

// drive admits the keys one batch each (layer of the key), then returns the
// victims in order (evicting each) with the given eligibility.
func drainOrder(p Policy, elig func(Key) bool, n int) []Key {
	var out []Key
	for range n {
		v, ok := p.Victim(elig)
		if !ok {
			break
		}
		out = append(out, v)
		p.OnEvict(v)
	}
	return out
}

func eq(a, b []Key) bool {
	if len(a) != len(b) {
		return false
	}
	for i := range a {
		if a[i] != b[i] {
			return false
		}
	}
	return true
}

func TestLRUOrder(t *testing.T) {
	p := NewLRU()
	for _, x := range []Key{k(0, 1), k(0, 2), k(1, 3), k(1, 4)} {
		p.OnAdmit(x, 1)
	}
	p.OnHit(k(0, 1)) // order, oldest first: 0/2 1/3 1/4 0/1
	got := drainOrder(p, except(k(1, 3)), 4)
	if want := []Key{k(0, 2), k(1, 4), k(0, 1)}; !eq(got, want) {
		t.Errorf("victims %v, want %v", got, want)
	}
}

func TestLFUOrder(t *testing.T) {
	p := NewLFU()
	for _, x := range []Key{k(0, 1), k(0, 2), k(0, 3), k(0, 4)} {
		p.OnAdmit(x, 1)
	}
	// counts: 1→3, 2→1, 3→2, 4→1 (4 used after 2)
	p.OnHit(k(0, 1))
	p.OnHit(k(0, 3))
	p.OnHit(k(0, 1))
	got := drainOrder(p, all, 4)
	if want := []Key{k(0, 2), k(0, 4), k(0, 3), k(0, 1)}; !eq(got, want) {
		t.Errorf("victims %v, want %v", got, want)
	}
	// Skipping: the lowest bucket entirely ineligible.
	p = NewLFU()
	p.OnAdmit(k(0, 1), 1)
	p.OnAdmit(k(0, 2), 1)
	p.OnHit(k(0, 2))
	if v, _ := p.Victim(except(k(0, 1))); v != k(0, 2) {
		t.Errorf("victim %v, want L0/E2", v)
	}
}

func TestBeladyOrder(t *testing.T) {
	// Future: a b c | a c | b ...
	a, b, c := k(0, 1), k(0, 2), k(0, 3)
	p := NewBelady([]Key{a, b, c, a, c, b})
	p.OnAdmit(a, 1)
	p.OnAdmit(b, 1)
	p.OnAdmit(c, 1)
	// next uses: a@3, b@5, c@4 → b, then c, then a.
	if got := drainOrder(p, all, 3); !eq(got, []Key{b, c, a}) {
		t.Errorf("victims %v, want [b c a]", got)
	}
	p = NewBelady([]Key{a, b, c, a, c, b})
	p.OnAdmit(a, 1)
	p.OnAdmit(b, 1)
	p.OnAdmit(c, 1)
	if v, _ := p.Victim(except(b)); v != c {
		t.Errorf("victim with b pinned = %v, want c", v)
	}
	p.OnHit(a) // cursor 3: a never used again
	if v, _ := p.Victim(all); v != a {
		t.Errorf("victim = %v, want a (no next use)", v)
	}
	// A diverging sequence still works (binary search fallback).
	p.OnHit(b) // expected c here
	if v, _ := p.Victim(all); v != a {
		t.Errorf("victim after divergence = %v, want a", v)
	}
}

func TestRandomDeterministic(t *testing.T) {
	seq := func(seed int64) []Key {
		p := NewRandom(seed)
		for e := range 50 {
			p.OnAdmit(k(e%3, e), 1)
		}
		return drainOrder(p, all, 50)
	}
	a, b, c := seq(7), seq(7), seq(8)
	if !eq(a, b) {
		t.Error("same seed, different victims")
	}
	if eq(a, c) {
		t.Error("seeds 7 and 8 gave the same 50-victim order")
	}
	if len(a) != 50 {
		t.Errorf("%d victims, want 50", len(a))
	}
	// Mostly ineligible: falls back to a scan and still finds the one key.
	p := NewRandom(1)
	for e := range 100 {
		p.OnAdmit(k(0, e), 1)
	}
	only := k(0, 57)
	if v, ok := p.Victim(func(x Key) bool { return x == only }); !ok || v != only {
		t.Errorf("victim %v %v, want %v", v, ok, only)
	}
	// Roughly uniform first victims over many seeds.
	counts := map[Key]int{}
	for s := range int64(4000) {
		p := NewRandom(s)
		for e := range 4 {
			p.OnAdmit(k(0, e), 1)
		}
		v, _ := p.Victim(all)
		counts[v]++
	}
	for e := range 4 {
		if c := counts[k(0, e)]; c < 850 || c > 1150 {
			t.Errorf("expert %d chosen %d/4000 times, want ≈1000", e, c)
		}
	}
}

// TestLayeredCycle: in layer time, an entry of the layer that just ran is
// evicted before an equally recent entry of the layer that runs next (LRU
// does the opposite: the cliff).
func TestLayeredCycle(t *testing.T) {
	for _, name := range []string{"layer", "layer-lrfu", "layer-lru"} {
		p := newPol(t, name, PolicyOptions{Layers: 4})
		lru := NewLRU()
		for l := range 4 {
			for _, q := range []Policy{p, lru} {
				q.Batch(0, l)
				q.OnAdmit(k(l, 0), 1)
			}
		}
		// Now at layer 3; next to run is layer 0. LRU evicts layer 0 first.
		if v, _ := lru.Victim(except(k(3, 0))); v != k(0, 0) {
			t.Errorf("lru victim %v, want L0 (the cliff)", v)
		}
		if got := drainOrder(p, except(k(3, 0)), 3); !eq(got, []Key{k(2, 0), k(1, 0), k(0, 0)}) {
			t.Errorf("%s victims %v, want L2, L1, L0", name, got)
		}
	}
}

// TestLayeredFrequency: "layer" keeps a frequently used expert over a
// more recent one-off of the same layer; "layer-lru" does not.
func TestLayeredFrequency(t *testing.T) {
	for _, c := range []struct {
		name string
		want Key
	}{{"layer", k(0, 2)}, {"layer-lrfu", k(0, 2)}, {"layer-lru", k(0, 1)}} {
		p := newPol(t, c.name, PolicyOptions{Layers: 1})
		p.Batch(0, 0)
		p.OnAdmit(k(0, 1), 1)
		for s := 1; s < 5; s++ {
			p.Batch(s, 0)
			p.OnHit(k(0, 1))
		}
		p.Batch(5, 0)
		p.OnAdmit(k(0, 2), 1)
		p.Batch(6, 0)
		p.OnAdmit(k(0, 3), 1)
		if v, _ := p.Victim(except(k(0, 3))); v != c.want {
			t.Errorf("%s victim %v, want %v", c.name, v, c.want)
		}
	}
}

// TestLayeredHistory: "layer" remembers an evicted key's value.
func TestLayeredHistory(t *testing.T) {
	p := NewLayered("h", 0.1, true, false, 1)
	q := NewLayered("n", 0.1, false, false, 1)
	for _, x := range []*Layered{p, q} {
		for s := range 5 {
			x.Batch(s, 0)
			if s == 0 {
				x.OnAdmit(k(0, 1), 1)
			} else {
				x.OnHit(k(0, 1))
			}
		}
		x.OnEvict(k(0, 1))
		x.Batch(5, 0)
		x.OnAdmit(k(0, 2), 1)
		x.OnAdmit(k(0, 1), 1)
	}
	if v, _ := p.Victim(all); v != k(0, 2) {
		t.Errorf("with history: victim %v, want L0/E2", v)
	}
	if v, _ := q.Victim(all); v != k(0, 2) {
		// Without history both have one use at the same visit: LRU tie-break.
		t.Errorf("without history: victim %v, want L0/E2 (older)", v)
	}
	e1, e2 := p.ent[k(0, 1)], q.ent[k(0, 1)]
	if !(p.value(e1) > q.value(e2)) {
		t.Errorf("value with history %v ≤ without %v", p.value(e1), q.value(e2))
	}
}

func TestAddUse(t *testing.T) {
	if got := addUse(math.Inf(-1), 3); got != 3 {
		t.Errorf("addUse(-Inf, 3) = %v", got)
	}
	if got := addUse(1, 1); got != 2 {
		t.Errorf("addUse(1, 1) = %v, want 2", got)
	}
	if got := addUse(1e6, 0); got != 1e6 {
		t.Errorf("addUse(1e6, 0) = %v, want 1e6 (no overflow)", got)
	}
}

func BenchmarkPolicies(b *testing.B) {
	const layers, experts, k6 = 48, 128, 6
	// A skewed synthetic stream: expert e with probability ∝ 1/(e+1).
	var stream []Key
	x := uint64(1)
	for range 20000 {
		for l := range layers {
			for range k6 {
				x ^= x << 13
				x ^= x >> 7
				x ^= x << 17
				e := int((x % (experts * experts)) / experts)
				e = e * e / experts
				stream = append(stream, Key{l, e})
			}
		}
		if len(stream) > 200000 {
			break
		}
	}
	for _, name := range []string{"lru", "lfu", "random", "layer", "layer-lrfu", "layer-lru", "belady"} {
		b.Run(name, func(b *testing.B) {
			p, _ := NewPolicy(name, PolicyOptions{Layers: layers, Future: stream})
			resident := map[Key]bool{}
			const capacity = 1500
			i := 0
			for b.Loop() {
				key := stream[i%len(stream)]
				if i%k6 == 0 {
					p.Batch(i/(layers*k6), key.Layer)
				}
				if resident[key] {
					p.OnHit(key)
				} else {
					resident[key] = true
					p.OnAdmit(key, 1)
					if len(resident) > capacity {
						v, ok := p.Victim(func(x Key) bool { return x != key })
						if ok {
							delete(resident, v)
							p.OnEvict(v)
						}
					}
				}
				i++
			}
		})
	}
}

// TestLayerPoliciesMatchBruteForce drives LayerMix and Layered with random
// operations and random eligibility and checks every Victim against the
// minimum rank over all eligible entries (what the heaps must find).
func TestLayerPoliciesMatchBruteForce(t *testing.T) {
	type ranker interface {
		Policy
		brute(eligible func(Key) bool) (Key, bool)
	}
	mk := []func() ranker{
		func() ranker { return mixBrute{NewLayerMix("m", LayerFast, LayerSlow, LayerWeight, true, 0)} },
		func() ranker { return layeredBrute{NewLayered("l", 0.1, true, true, 0)} },
		func() ranker { return layeredBrute{NewLayered("r", math.Inf(1), false, false, 5)} },
		func() ranker { return layeredBrute{NewLayered("v", 0.3, false, false, 5)} },
	}
	for _, newP := range mk {
		p := newP()
		x := uint64(12345)
		rnd := func(n int) int {
			x ^= x << 13
			x ^= x >> 7
			x ^= x << 17
			return int(x % uint64(n))
		}
		resident := map[Key]bool{}
		layer := 0
		for op := range 20000 {
			switch r := rnd(10); {
			case r == 0:
				layer = (layer + 1) % 5
				p.Batch(op, layer)
			case r < 6:
				key := k(layer, rnd(12))
				if resident[key] {
					p.OnHit(key)
				} else {
					resident[key] = true
					p.OnAdmit(key, 1)
				}
			case r < 8 && len(resident) > 20:
				banned := map[Key]bool{}
				for key := range resident {
					if rnd(3) == 0 {
						banned[key] = true
					}
				}
				elig := func(key Key) bool { return !banned[key] }
				want, wok := p.brute(elig)
				got, gok := p.Victim(elig)
				if got != want || gok != wok {
					t.Fatalf("%s op %d: Victim = %v %v, brute force %v %v", p.Name(), op, got, gok, want, wok)
				}
				if gok {
					delete(resident, got)
					p.OnEvict(got)
				}
			}
		}
	}
}

type mixBrute struct{ *LayerMix }

func (p mixBrute) brute(eligible func(Key) bool) (Key, bool) {
	var best *mixEntry
	var bestR rank
	for _, e := range p.ent {
		if !eligible(e.key) {
			continue
		}
		if r := p.rankOf(e); best == nil || r.less(bestR) {
			best, bestR = e, r
		}
	}
	if best == nil {
		return Key{}, false
	}
	return best.key, true
}

type layeredBrute struct{ *Layered }

func (p layeredBrute) brute(eligible func(Key) bool) (Key, bool) {
	var best *layerEntry
	var bestR rank
	for _, e := range p.ent {
		if !eligible(e.key) {
			continue
		}
		if r := p.rankOf(e); best == nil || r.less(bestR) {
			best, bestR = e, r
		}
	}
	if best == nil {
		return Key{}, false
	}
	return best.key, true
}
