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
// run has already used nor exceed the budget. With WarmStarted the caller
// owns the Miss handle (fill, Complete and Release it, typically in the
// read's Done callback; Release without Complete abandons it and frees the
// slot).
func (c *Cache) Warm(key Key, size int64) (*Handle, WarmStatus, error) {
	return c.startRead(key, size, false)
}
