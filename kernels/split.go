package kernels

import "sync/atomic"

// How a job's work is split over the pool's threads.
//
// A job is a sequence of n work units: the chunks of rows of a product, the
// chunks of a MatVecs batch (all of one product's before the next's), or
// the indices of Parallel. Thread t of the T threads on a job starts owning
// the contiguous units [t·n/T, (t+1)·n/T) and takes them front to back, so
// each thread streams its own contiguous run of weight memory. A thread
// whose run is exhausted steals the back half of the largest remaining run
// and goes on front to back in it, which keeps the threads balanced when
// another process takes a core away.
//
// Handing out alternate chunks of the same rows to the threads (this
// package's earlier scheme) streams far slower: two threads taking 32 KiB
// chunks in turn from one stretch of rows read 14 GB/s where two threads on
// separate halves read 26 GB/s on the development VM (docs/measurements.md,
// issue 11), the cores' prefetchers fighting over interleaved lines.
//
// ParallelWith instead queues its units in one span that every thread takes
// from in increasing order (its units are whole experts, megabytes each,
// and a caller ordering them largest first gets a balanced finish).
//
// Which thread computes a unit never changes what is computed: every output
// element comes from the same single-row (or multi-token) kernel.

// span is one thread's remaining units [lo, hi), packed into one word so
// that its owner (taking from lo) and a thief (taking from hi) agree
// through a single compare-and-swap. Each span has its own cache line.
type span struct {
	v atomic.Uint64 // lo<<32 | hi
	_ [56]byte
}

// maxUnits bounds the units of one job (both ends fit in 32 bits).
const maxUnits = 1<<32 - 1

func packSpan(lo, hi int) uint64 { return uint64(lo)<<32 | uint64(hi) }

func unpackSpan(v uint64) (lo, hi int) { return int(v >> 32), int(uint32(v)) }

// set replaces the span; only its owner calls it, and only while the span
// is empty (no other thread changes an empty span).
func (s *span) set(lo, hi int) { s.v.Store(packSpan(lo, hi)) }

// left is the number of units still in the span.
func (s *span) left() int {
	lo, hi := unpackSpan(s.v.Load())
	return max(hi-lo, 0)
}

// front takes the span's first unit (its owner).
func (s *span) front() (int, bool) {
	for {
		v := s.v.Load()
		lo, hi := unpackSpan(v)
		if lo >= hi {
			return 0, false
		}
		if s.v.CompareAndSwap(v, packSpan(lo+1, hi)) {
			return lo, true
		}
	}
}

// stealBack takes the back half of the span's units (at least one).
func (s *span) stealBack() (lo, hi int, ok bool) {
	for {
		v := s.v.Load()
		l, h := unpackSpan(v)
		if l >= h {
			return 0, 0, false
		}
		n := max(1, (h-l)/2)
		if s.v.CompareAndSwap(v, packSpan(l, h-n)) {
			return h - n, h, true
		}
	}
}

// deal gives each of the first threads threads an equal contiguous share of
// n units.
func (j *job) deal(n, threads int) {
	j.active, j.shared = threads, false
	for t := range threads {
		j.spans[t].set(t*n/threads, (t+1)*n/threads)
	}
}

// queue puts all n units in one span that the threads take from in
// increasing order (ParallelWith).
func (j *job) queue(n, threads int) {
	j.active, j.shared = threads, true
	j.spans[0].set(0, n)
	for t := 1; t < threads; t++ {
		j.spans[t].set(0, 0)
	}
}

// run processes units as thread self until no thread has any left.
func (j *job) run(self int) {
	own := &j.spans[self]
	if j.shared {
		own = &j.spans[0]
	}
	for {
		u, ok := own.front()
		if !ok {
			if j.shared || !j.steal(self) {
				return
			}
			continue
		}
		j.unit(self, u)
	}
}

// steal moves the back half of the largest other span into self's empty
// span; false when every span is empty. Units a thief holds between its
// compare-and-swap and set are in no span, so another thread may stop
// while they are still to do; the thief does them.
func (j *job) steal(self int) bool {
	for {
		best, most := -1, 0
		for t := range j.spans[:j.active] {
			if t == self {
				continue
			}
			if n := j.spans[t].left(); n > most {
				best, most = t, n
			}
		}
		if best < 0 {
			return false
		}
		if lo, hi, ok := j.spans[best].stealBack(); ok {
			j.spans[self].set(lo, hi)
			return true
		}
	}
}
