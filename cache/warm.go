package cache

// WarmStatus is the outcome of Warm.
type WarmStatus uint8

const (
	// WarmStarted: the caller got a Miss handle in a free resident slot.
	WarmStarted WarmStatus = iota
	// WarmPresent: the key is already resident or in flight.
	WarmPresent
	// WarmFull: no resident slot is free; a warm start never evicts.
	WarmFull
)

// Warm starts a warm-start read of key: like Prefetch it never waits, never
// takes a transient slot and is not a lookup, but it also never evicts — it
// only fills a free resident slot, so it can neither push out an expert a
// run has already used nor exceed the budget. The entry is protected until
// the pipeline has passed its layer (see warmGuard): a miss evicts it only
// when nothing else can go. With WarmStarted the caller
// owns the Miss handle (fill, Complete and Release it, typically in the
// read's Done callback; Release without Complete abandons it and frees the
// slot).
func (c *Cache) Warm(key Key, size int64) (*Handle, WarmStatus, error) {
	return c.startRead(key, size, false)
}

// warmGuard keeps warm-start entries until the pipeline has passed their
// layer once. A prefill walks the layers in order and a prompt can route to
// more experts than the cache holds, so its misses need slots while the warm
// start's experts of the layers ahead wait for their turn; a policy that
// ranks an expert by its uses would evict those (admitted, never used yet)
// first, and the prompt would read them again a few layers later. So a
// warm entry is protected — a victim only when no unprotected entry is
// eligible — until the batches move from its layer to another (the lookups
// of its layer have been made, all waves of them): then it is an ordinary
// entry, used or not.
type warmGuard struct {
	elig    func(Key) bool // eligible and not protected
	byLayer [][]Key        // protected keys by layer (an evicted one may linger; it is skipped)
	n       int            // keys in byLayer
	cur     struct{ step, layer int }
	started bool
}

// protectLocked protects a warm entry until the pipeline passes its layer.
func (g *warmGuard) protectLocked(e *entry) {
	l := e.key.Layer
	if l < 0 {
		return
	}
	for len(g.byLayer) <= l {
		g.byLayer = append(g.byLayer, nil)
	}
	e.protected = true
	g.byLayer[l] = append(g.byLayer[l], e.key)
	g.n++
}

// advanceLocked is called by Batch: when the batches leave a (step, layer),
// that layer's warm entries lose their protection.
func (g *warmGuard) advanceLocked(c *Cache, step, layer int) {
	if g.started && g.cur.step == step && g.cur.layer == layer {
		return // another wave of the same layer's lookups
	}
	if g.started && g.cur.layer >= 0 && g.cur.layer < len(g.byLayer) {
		keys := g.byLayer[g.cur.layer]
		for _, k := range keys {
			if e := c.entries[k]; e != nil {
				e.protected = false
			}
		}
		g.n -= len(keys)
		g.byLayer[g.cur.layer] = keys[:0]
	}
	g.started = true
	g.cur.step, g.cur.layer = step, layer
}

// victimLocked asks the policy for a victim among the eligible entries,
// sparing protected warm entries while any other is eligible.
func (c *Cache) victimLocked() (Key, bool) {
	if c.guard.n > 0 {
		if k, ok := c.policy.Victim(c.guard.elig); ok && c.guard.elig(k) {
			return k, true
		}
	}
	if k, ok := c.policy.Victim(c.elig); ok && c.eligible(k) {
		return k, true
	}
	return Key{}, false
}

func (c *Cache) eligibleUnprotected(k Key) bool {
	return c.eligible(k) && !c.entries[k].protected
}
