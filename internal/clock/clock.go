// Package clock is the time source the engine's stall and compute
// accounting reads (the model's sections, the FFN stage's waits and
// compute, a step's wall time). It is a leaf: production code leaves it nil,
// the wall clock; a test sets a fake one and checks the accounting exactly,
// with no bound on real time.
package clock

import "time"

// Clock returns the current time. The nil Clock is the wall clock
// (time.Now, whose monotonic reading durations are taken from).
type Clock func() time.Time

// Now reads c.
func (c Clock) Now() time.Time {
	if c == nil {
		return time.Now()
	}
	return c()
}

// Since is the time elapsed on c since t.
func (c Clock) Since(t time.Time) time.Duration {
	return c.Now().Sub(t)
}
