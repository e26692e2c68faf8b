// Package expert is the hand-off between the planner (package prefetch),
// which makes a routed expert's bytes resident, and the FFN stage (package
// ffn), which computes it: a Ready value names the expert, lends its
// projections' bytes and carries the Lease that gives them back. It is a
// leaf so that neither side imports the other.
//
// Ownership: the bytes in Parts belong to whoever issued the Lease (the
// expert cache, or the whole-file mapping, which needs no lease) and stay
// valid and unchanged until Release; the receiver calls Release exactly once
// and must not touch Parts after it. Ready values travel by value through
// bounded channels, so a hand-off allocates nothing.
package expert

// Lease gives lent bytes back (a cache pin).
type Lease interface {
	Release()
}

// Ready is an expert whose bytes are available, or whose read failed.
type Ready struct {
	Expert int
	Parts  [][]byte // the expert's projections, in the architecture's order
	Err    error
	Lease  Lease // nil: nothing to give back
}

// Release gives the bytes back, if they were leased.
func (r Ready) Release() {
	if r.Lease != nil {
		r.Lease.Release()
	}
}
