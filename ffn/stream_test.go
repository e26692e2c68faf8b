package ffn

import (
	"context"
	"errors"
	"math"
	"math/rand/v2"
	"sync/atomic"
	"testing"
	"time"

	"github.com/pipe-engine/pipe/expert"
	"github.com/pipe-engine/pipe/kernels"
	"github.com/pipe-engine/pipe/model"
)

// trickle sends the job's experts into an empty channel one at a time, in a
// random order, with pauses (misses landing one by one), marking value err
// (if ≥ 0) as failed; released counts the Release calls.
func trickle(rng *rand.Rand, j *Job, errAt int, released *atomic.Int32) <-chan expert.Ready {
	order := append([]int(nil), j.Order...)
	rng.Shuffle(len(order), func(a, b int) { order[a], order[b] = order[b], order[a] })
	pauses := make([]time.Duration, len(order))
	for i := range pauses {
		pauses[i] = time.Duration(rng.IntN(200)) * time.Microsecond
	}
	return feed(order, errAt, released, func(i int) bool {
		time.Sleep(pauses[i])
		return true
	}, nil)
}

// TestStreamedPrefillOnThreads: when a multi-token job's experts arrive one
// at a time, each pool thread takes the next one as soon as it is free and
// computes it whole on its own scratch — every expert, the skewed job's
// expert 0 (half the pairs, split over the threads when all are ready
// together) included; the outputs are the one-thread stage's bit for bit,
// every value is released, and the stall and compute are accounted.
func TestStreamedPrefillOnThreads(t *testing.T) {
	const E = 16
	rng := rand.New(rand.NewPCG(11, 12))
	for _, j := range []*Job{makeJob(rng, 24, 2, 8, E), skewedJob(rng, 24, E), makeJob(rng, 40, 8, 64, E)} {
		want, _, err := consumeAll(t, New(&fakeFFN{nEmbd: E, fail: -1}, E, nil), j)
		if err != nil {
			t.Fatal(err)
		}
		for threads := 2; threads <= 3; threads++ {
			p := kernels.NewPool(threads)
			f := &threadFFN{fakeFFN: fakeFFN{nEmbd: E, fail: -1}, whole: map[int]bool{}}
			s := New(f, E, p)
			s.Begin(j)
			var released atomic.Int32
			var st Stats
			err := s.Consume(context.Background(), context.Background(), j, trickle(rng, j, -1, &released), len(j.Order), true, &st)
			p.Close()
			if err != nil {
				t.Fatal(err)
			}
			s.Finish(j, &st)
			for tk := range want {
				for i := range want[tk] {
					if math.Float32bits(j.Out[tk][i]) != math.Float32bits(want[tk][i]) {
						t.Fatalf("threads %d token %d elem %d: %v, one thread %v", threads, tk, i, j.Out[tk][i], want[tk][i])
					}
				}
			}
			if n := int(released.Load()); n != len(j.Order) {
				t.Fatalf("threads %d: released %d of %d", threads, n, len(j.Order))
			}
			if f.clash.Load() {
				t.Fatalf("threads %d: two experts computed at once on one scratch", threads)
			}
			for _, e := range j.Order {
				if !f.whole[e] {
					t.Fatalf("threads %d: expert %d did not run whole on a pool thread", threads, e)
				}
			}
			if st.Experts != len(j.Order) || st.Stall <= 0 || st.Compute <= 0 {
				t.Fatalf("threads %d: stats %+v for %d experts", threads, st, len(j.Order))
			}
		}
	}
}

// TestStreamedErrors: a value carrying an error, a failing expert and a
// cancelled context each end a streaming Consume with that error, every
// received value released.
func TestStreamedErrors(t *testing.T) {
	const E = 8
	rng := rand.New(rand.NewPCG(13, 14))
	j := makeJob(rng, 16, 2, 8, E)
	p := kernels.NewPool(2)
	defer p.Close()
	for _, c := range []struct {
		name        string
		errAt, fail int
	}{{"value error", 2, -1}, {"compute error", -1, j.Order[1]}} {
		s := New(&fakeFFN{nEmbd: E, fail: c.fail}, E, p)
		s.Begin(j)
		var released atomic.Int32
		var st Stats
		err := s.Consume(context.Background(), context.Background(), j, trickle(rng, j, c.errAt, &released), len(j.Order), true, &st)
		if !errors.Is(err, errBoom) || int(released.Load()) != len(j.Order) {
			t.Fatalf("%s: err %v, released %d of %d", c.name, err, released.Load(), len(j.Order))
		}
	}
	s := New(&fakeFFN{nEmbd: E, fail: -1}, E, p)
	s.Begin(j)
	ctx, cancel := context.WithCancel(context.Background())
	ch := make(chan expert.Ready, len(j.Order))
	var released atomic.Int32
	// cancelled once the one value sent is computed and released: the
	// stage then waits for values that never come
	ch <- expert.Ready{Expert: j.Order[0], Parts: [][]byte{make([]byte, 3)}, Lease: leaseFunc(func() { released.Add(1); cancel() })}
	var st Stats
	if err := s.Consume(ctx, ctx, j, ch, len(j.Order), true, &st); !errors.Is(err, context.Canceled) || released.Load() != 1 {
		t.Fatalf("cancelled: err %v, released %d of 1", err, released.Load())
	}
}

// TestStreamedCancelRace: threads that see the same last value waiting
// must not block on the channel after one of them took it — a cancelled
// streaming Consume returns with every thread free, however the threads
// race for the one value there is (many repetitions, each with a deadline).
func TestStreamedCancelRace(t *testing.T) {
	const E, reps = 8, 300
	rng := rand.New(rand.NewPCG(15, 16))
	j := makeJob(rng, 16, 2, 8, E)
	p := kernels.NewPool(3)
	s := New(&fakeFFN{nEmbd: E, fail: -1}, E, p)
	for rep := range reps {
		s.Begin(j)
		ctx, cancel := context.WithCancel(context.Background())
		ch := make(chan expert.Ready, len(j.Order))
		var released atomic.Int32
		ch <- expert.Ready{Expert: j.Order[0], Parts: [][]byte{make([]byte, 3)}, Lease: leaseFunc(func() { released.Add(1) })}
		stop := time.AfterFunc(200*time.Microsecond, cancel)
		done := make(chan error, 1)
		go func() {
			var st Stats
			done <- s.Consume(ctx, ctx, j, ch, len(j.Order), true, &st)
		}()
		select {
		case err := <-done:
			// the value is released if a thread took it before the
			// cancellation, else still in the channel
			if n := int(released.Load()) + len(ch); !errors.Is(err, context.Canceled) || n != 1 {
				t.Fatalf("rep %d: err %v, released %d and %d left of 1", rep, err, released.Load(), len(ch))
			}
		case <-time.After(time.Minute):
			t.Fatalf("rep %d: Consume still running a minute after its context was cancelled", rep)
		}
		stop.Stop()
		cancel()
	}
	p.Close() // not deferred: a stuck Consume holds the pool
}

// cancelFFN is fakeFFN that cancels a context when its at-th expert
// computes, counting the computes.
type cancelFFN struct {
	fakeFFN
	at     int32
	n      atomic.Int32
	cancel context.CancelFunc
}

func (f *cancelFFN) ComputeExpert(l, e int, parts [][]byte, n int, x, out []float32, s *model.Scratch) error {
	if f.n.Add(1) == f.at {
		f.cancel()
	}
	return f.fakeFFN.ComputeExpert(l, e, parts, n, x, out, s)
}

// TestCancelStopsCompute: once the compute context is cancelled mid-wave,
// no further expert is computed, yet every value of the wave is still
// received (under the receive context) and released, and Consume returns
// the cancellation — on one thread (values in ready groups) and on a pool
// (values taken one per thread).
func TestCancelStopsCompute(t *testing.T) {
	const E = 8
	rng := rand.New(rand.NewPCG(17, 18))
	j := makeJob(rng, 16, 2, 12, E)
	for _, threads := range []int{1, 2} {
		var p *kernels.Pool
		if threads > 1 {
			p = kernels.NewPool(threads)
		}
		ctx, cancel := context.WithCancel(context.Background())
		f := &cancelFFN{fakeFFN: fakeFFN{nEmbd: E, fail: -1}, at: 2, cancel: cancel}
		s := New(f, E, p)
		s.Begin(j)
		var released atomic.Int32
		// the values after the at-th arrive once the cancel has landed: the
		// wave is cut in the middle by the event, not by pauses
		ch := feed(j.Order, -1, &released, func(i int) bool {
			if i >= int(f.at) {
				<-ctx.Done()
			}
			return true
		}, nil)
		var st Stats
		err := s.Consume(context.Background(), ctx, j, ch, len(j.Order), true, &st)
		if p != nil {
			p.Close()
		}
		// a thread may be computing when the cancel lands: at most one
		// more expert per thread after the at-th
		if n := int(f.n.Load()); !errors.Is(err, context.Canceled) || n > int(f.at)+threads || int(released.Load()) != len(j.Order) {
			t.Fatalf("%d threads: err %v, %d of %d experts computed, %d released", threads, err, n, len(j.Order), released.Load())
		}
	}
}
