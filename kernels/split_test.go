package kernels

import (
	"slices"
	"sync"
	"sync/atomic"
	"testing"
	"time"
)

func newSplitJob(threads int, fn func(int)) *job {
	return &job{fn: fn, spans: make([]span, threads)}
}

// TestDealContiguous: each thread starts with a contiguous share, the shares
// in thread order cover every unit once and differ in size by at most one.
func TestDealContiguous(t *testing.T) {
	for _, threads := range []int{1, 2, 3, 4} {
		for _, n := range []int{0, 1, 2, 5, 7, 1000} {
			j := newSplitJob(threads, nil)
			j.deal(n, threads)
			next, small, big := 0, n, 0
			for k := range threads {
				lo, hi := unpackSpan(j.spans[k].v.Load())
				if lo != next || hi < lo {
					t.Fatalf("threads %d n %d: thread %d has [%d, %d), want it to start at %d", threads, n, k, lo, hi, next)
				}
				next = hi
				small, big = min(small, hi-lo), max(big, hi-lo)
			}
			if next != n || big-small > 1 {
				t.Fatalf("threads %d n %d: shares end at %d, sizes %d..%d", threads, n, next, small, big)
			}
		}
	}
}

// TestLoneThreadOrder: a thread alone on a job (its helper never came)
// streams its own share front to back, then the back half of what is left
// of the other share, and so on: contiguous runs, never alternate units.
func TestLoneThreadOrder(t *testing.T) {
	var got []int
	j := newSplitJob(2, func(i int) { got = append(got, i) })
	j.deal(16, 2)
	j.run(0)
	want := []int{0, 1, 2, 3, 4, 5, 6, 7, 12, 13, 14, 15, 10, 11, 9, 8}
	if !slices.Equal(got, want) {
		t.Fatalf("order %v, want %v", got, want)
	}
}

// TestStealFromBlockedThread: thread 0 blocks in its first unit until every
// other unit is done, which only happens if the other threads take over the
// rest of its share; every unit runs exactly once.
func TestStealFromBlockedThread(t *testing.T) {
	for _, threads := range []int{2, 3} {
		const n = 300
		var hits [n]atomic.Int32
		var done atomic.Int32
		all := make(chan struct{})
		j := newSplitJob(threads, func(i int) {
			if hits[i].Add(1) != 1 {
				t.Errorf("unit %d ran twice", i)
			}
			if i == 0 {
				select {
				case <-all:
				case <-time.After(time.Minute):
					t.Errorf("threads %d: the others did not take over thread 0's share (%d of %d done)", threads, done.Load(), n-1)
				}
				return
			}
			if done.Add(1) == n-1 {
				close(all)
			}
		})
		j.deal(n, threads)
		var wg sync.WaitGroup
		for self := range threads {
			wg.Add(1)
			go func() {
				defer wg.Done()
				j.run(self)
			}()
		}
		wg.Wait()
		for i := range hits {
			if h := hits[i].Load(); h != 1 {
				t.Fatalf("threads %d: unit %d ran %d times", threads, i, h)
			}
		}
	}
}
