package ffn

import (
	"context"
	"math/rand/v2"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/pipe-engine/pipe/kernels"
	"github.com/pipe-engine/pipe/model"
)

// fakeClock is a Clock that moves only when advanced; safe for several
// goroutines.
type fakeClock struct {
	mu  sync.Mutex
	now time.Time
}

func (c *fakeClock) read() time.Time {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.now
}

func (c *fakeClock) advance(d time.Duration) {
	c.mu.Lock()
	c.now = c.now.Add(d)
	c.mu.Unlock()
}

// clockFFN is fakeFFN whose every expert takes cost on the fake clock.
type clockFFN struct {
	fakeFFN
	clock *fakeClock
	cost  time.Duration
	calls atomic.Int64
}

func (f *clockFFN) ComputeExpert(l, e int, parts [][]byte, n int, x, out []float32, s *model.Scratch) error {
	f.calls.Add(1)
	f.clock.advance(f.cost)
	return f.fakeFFN.ComputeExpert(l, e, parts, n, x, out, s)
}

// TestAccounting: Stats are read from the stage's Clock. On a fake clock
// that moves only by a known wait at the start of every wait for an expert
// (onWait) and by a known cost inside every expert's compute, Stall is
// exactly the waits and Compute exactly the costs — the values arriving one
// at a time from another goroutine, with and without overlap; for a
// multi-token job whose experts the pool's threads take one each
// (consumeStream), Stall is the threads' mean wait (each at least its own
// waits) and Compute the rest of the call's time, exactly.
func TestAccounting(t *testing.T) {
	const E, wait, cost = 8, 10 * time.Millisecond, 3 * time.Millisecond
	rng := rand.New(rand.NewPCG(5, 6))
	cases := []struct {
		name    string
		job     *Job
		threads int // 0: no pool
		overlap bool
	}{
		{"decode overlap", makeJob(rng, 1, 4, 16, E), 0, true},
		{"decode serial", makeJob(rng, 1, 4, 16, E), 0, false},
		{"prefill grouped", makeJob(rng, 6, 2, 8, E), 0, true},
		{"prefill streamed", makeJob(rng, 24, 2, 8, E), 2, true},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			clk := &fakeClock{now: time.Unix(1000, 0)}
			f := &clockFFN{fakeFFN: fakeFFN{nEmbd: E, fail: -1}, clock: clk, cost: cost}
			var pool *kernels.Pool
			if tc.threads > 0 {
				pool = kernels.NewPool(tc.threads)
				defer pool.Close()
			}
			s := New(f, E, pool)
			s.Clock = clk.read
			var waits atomic.Int64
			started := make(chan struct{})
			s.onWait = func() {
				if waits.Add(1) == 1 {
					close(started)
				}
				clk.advance(wait)
			}
			s.Begin(tc.job)
			var released atomic.Int32
			// The first value is sent once the stage waits: it starts on
			// an empty channel, as a stream of misses does.
			ch := feed(tc.job.Order, -1, &released, func(i int) bool {
				if i == 0 {
					<-started
				}
				return true
			}, nil)
			var st Stats
			t0 := clk.read()
			if err := s.Consume(context.Background(), context.Background(), tc.job, ch, len(tc.job.Order), tc.overlap, &st); err != nil {
				t.Fatal(err)
			}
			s.Finish(tc.job, &st)
			w, c := time.Duration(waits.Load())*wait, time.Duration(f.calls.Load())*cost
			if wall := clk.read().Sub(t0); wall != w+c {
				t.Fatalf("the fake clock moved %v, want %v of waits + %v of compute", wall, w, c)
			}
			switch {
			case tc.threads < 2 && (st.Stall != w || st.Compute != c):
				t.Fatalf("stall %v, compute %v; want %v, %v (%d waits, %d expert calls)", st.Stall, st.Compute, w, c, waits.Load(), f.calls.Load())
			// A thread's wait also holds what the other threads' waits and
			// computes advanced meanwhile: at least its own waits.
			case tc.threads > 1 && (st.Stall+st.Compute != w+c || st.Stall < w/time.Duration(tc.threads)):
				t.Fatalf("stall %v + compute %v, want %v with stall ≥ %v", st.Stall, st.Compute, w+c, w/time.Duration(tc.threads))
			}
			if st.Experts != len(tc.job.Order) || int(released.Load()) != len(tc.job.Order) {
				t.Fatalf("%d experts computed, %d released, of %d", st.Experts, released.Load(), len(tc.job.Order))
			}
		})
	}
}
