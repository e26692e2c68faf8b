package cache

import (
	"fmt"
	"time"
)

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
// run has already used nor exceed the budget. With WarmStarted the caller
// owns the Miss handle (fill, Complete and Release it, typically in the
// read's Done callback; Release without Complete abandons it and frees the
// slot).
func (c *Cache) Warm(key Key, size int64) (*Handle, WarmStatus, error) {
	if size <= 0 || size > c.cfg.SlotBytes {
		return nil, WarmFull, fmt.Errorf("%w: %v needs %d bytes, slots have %d", ErrSize, key, size, c.cfg.SlotBytes)
	}
	t0 := time.Now()
	c.mu.Lock()
	defer c.mu.Unlock()
	defer func() { c.st.Mgmt += time.Since(t0) }()
	if c.closed {
		return nil, WarmFull, ErrClosed
	}
	if c.entries[key] != nil {
		return nil, WarmPresent, nil
	}
	slot, ok := c.res.get()
	if !ok {
		return nil, WarmFull, nil
	}
	c.st.ResidentBytes += c.cfg.SlotBytes
	c.st.ResidentEntries++
	c.st.PeakResidentBytes = max(c.st.PeakResidentBytes, c.st.ResidentBytes)
	e := &entry{key: key, slot: slot, size: size, pins: 1, state: reading, lastBatch: c.batch, done: make(chan struct{})}
	c.entries[key] = e
	c.handles++
	c.st.Prefetches++
	c.policy.OnAdmit(key, size)
	c.st.BytesAdmitted += size
	return &Handle{c: c, e: e, owner: true}, WarmStarted, nil
}
