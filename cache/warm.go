package cache

import "github.com/pipe-engine/pipe/warmstart"

// WarmStatus is the outcome of Warm.
type WarmStatus uint8

const (
	// WarmStarted: the caller got a Miss handle in a free resident slot.
	WarmStarted WarmStatus = iota
	// WarmPresent: the key is already resident or in flight.
	WarmPresent
	// WarmFull: no resident slot is free; a warm start never evicts.
	WarmFull
	// WarmNotFaulted: the free slots' pages are still being faulted in by
	// the arena's Prefaulter (after PrefaultAll); a read into one would
	// fault them inside the read, at a fraction of the disk's rate on a
	// virtual machine. Offer the key again once Faulting's channel closes.
	WarmNotFaulted
)

// Warm starts a warm-start read of key: like Prefetch it never waits, never
// takes a transient slot and is not a lookup, but it also never evicts — it
// only fills a free resident slot, so it can neither push out an expert a
// run has already used nor exceed the budget. The entry is protected until
// the pipeline has passed its layer (warmstart.Guard): a miss evicts it only
// when nothing else can go. Nor does it take a slot whose pages the
// Prefaulter has yet to reach (WarmNotFaulted): a warm start or cache fill
// grows the resident set at the Prefaulter's pace, reading at the disk's
// rate, while the demand reads of a prompt pass get the slots they need.
// With WarmStarted the caller owns the Miss handle (fill, Complete and
// Release it, typically in the read's Done callback; Release without
// Complete abandons it and frees the slot).
func (c *Cache) Warm(key Key, size int64) (*Handle, WarmStatus, error) {
	return c.startRead(key, size, false)
}

// protectLocked protects a warm entry until the pipeline passes its layer
// (warmstart.Guard).
func (c *Cache) protectLocked(e *entry) {
	if c.guard.Protect(warmstart.Key(e.key)) {
		e.protected = true
	}
}

// passLocked is called by Batch: when the batches leave a (step, layer),
// that layer's warm entries lose their protection.
func (c *Cache) passLocked(step, layer int) {
	for _, k := range c.guard.Pass(step, layer) {
		if e := c.entries[Key(k)]; e != nil {
			e.protected = false
		}
	}
}

// victimLocked asks the policy for a victim among the eligible entries,
// sparing protected warm entries while any other is eligible.
func (c *Cache) victimLocked() (Key, bool) {
	if c.guard.Active() {
		if k, ok := c.policy.Victim(c.eligUnprotected); ok && c.eligUnprotected(k) {
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

// Faulting returns a channel that is closed when the resident arena's
// Prefaulter next advances, or at once when it never will again: after
// WarmNotFaulted, wait on it (or a context) and offer the key again. Take
// it before the Warm call it follows up, so that no advance is missed.
func (c *Cache) Faulting() <-chan struct{} {
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.res == nil || c.closed {
		return closedDone
	}
	return c.res.faulting()
}
