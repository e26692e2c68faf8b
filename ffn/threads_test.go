package ffn

import (
	"context"
	"errors"
	"math"
	"math/rand/v2"
	"runtime"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/pipe-engine/pipe/expert"
	"github.com/pipe-engine/pipe/kernels"
	"github.com/pipe-engine/pipe/model"
)

// threadFFN is fakeFFN recording how each expert ran: whole on one pool
// thread (its scratch carries a Local) or on the stage's own scratch (its
// products' rows split over the pool), and failing if two calls at once
// share a scratch.
type threadFFN struct {
	fakeFFN
	mu    sync.Mutex
	whole map[int]bool
	inUse sync.Map // *model.Scratch → *atomic.Bool
	clash atomic.Bool
}

func (f *threadFFN) ComputeExpert(l, e int, parts [][]byte, n int, x, out []float32, s *model.Scratch) error {
	v, _ := f.inUse.LoadOrStore(s, new(atomic.Bool))
	busy := v.(*atomic.Bool)
	if !busy.CompareAndSwap(false, true) {
		f.clash.Store(true)
	}
	defer busy.Store(false)
	f.mu.Lock()
	f.whole[e] = s.Local != nil
	f.mu.Unlock()
	return f.fakeFFN.ComputeExpert(l, e, parts, n, x, out, s)
}

// consumeAll runs the job's experts through s and returns the outputs.
func consumeAll(t *testing.T, s *Stage, j *Job) ([][]float32, int, error) {
	t.Helper()
	s.Begin(j)
	ch := make(chan expert.Ready, len(j.Order))
	released := 0
	for _, e := range j.Order {
		ch <- expert.Ready{Expert: e, Parts: [][]byte{make([]byte, 3)}, Lease: leaseFunc(func() { released++ })}
	}
	var st Stats
	err := s.Consume(context.Background(), context.Background(), j, ch, len(j.Order), true, &st)
	if err != nil {
		return nil, released, err
	}
	s.Finish(j, &st)
	out := make([][]float32, len(j.Out))
	for i := range j.Out {
		out[i] = append([]float32(nil), j.Out[i]...)
	}
	return out, released, nil
}

// skewedJob routes every one of n tokens to expert 0 at rank 0 and to one
// of experts 1..7 at rank 1: expert 0 has n of the 2n (token, expert)
// pairs.
func skewedJob(rng *rand.Rand, n, E int) *Job {
	j := makeJob(rng, n, 2, 8, E)
	for t := range j.IDs {
		j.IDs[t][0], j.IDs[t][1] = 0, 1+rng.IntN(7)
	}
	j.Plan()
	return j
}

// TestMultiTokenExpertsOnThreads: with a pool of 2 or 3 threads the
// multi-token experts of a prefill batch run whole, one per thread at a
// time, each thread on its own scratch, except an expert holding more than
// an equal share of the tokens, which runs alone with its rows split; the
// outputs are the one-thread stage's bit for bit, and a failing expert's
// error comes back with every expert released.
func TestMultiTokenExpertsOnThreads(t *testing.T) {
	const E = 16
	rng := rand.New(rand.NewPCG(9, 10))
	spread := makeJob(rng, 24, 2, 8, E)
	skewed := skewedJob(rng, 24, E)
	for _, j := range []*Job{spread, skewed} {
		want, _, err := consumeAll(t, New(&threadFFN{fakeFFN: fakeFFN{nEmbd: E, fail: -1}, whole: map[int]bool{}}, E, nil), j)
		if err != nil {
			t.Fatal(err)
		}
		for threads := 1; threads <= 3; threads++ {
			p := kernels.NewPool(threads)
			f := &threadFFN{fakeFFN: fakeFFN{nEmbd: E, fail: -1}, whole: map[int]bool{}}
			got, released, err := consumeAll(t, New(f, E, p), j)
			p.Close()
			if err != nil {
				t.Fatal(err)
			}
			if released != len(j.Order) {
				t.Fatalf("threads %d: released %d of %d", threads, released, len(j.Order))
			}
			for tk := range want {
				for i := range want[tk] {
					if math.Float32bits(got[tk][i]) != math.Float32bits(want[tk][i]) {
						t.Fatalf("threads %d token %d elem %d: %v, one thread %v", threads, tk, i, got[tk][i], want[tk][i])
					}
				}
			}
			if f.clash.Load() {
				t.Fatalf("threads %d: two experts computed at once on one scratch", threads)
			}
			wholes := 0
			for _, w := range f.whole {
				if w {
					wholes++
				}
			}
			switch {
			case threads == 1 && wholes != 0:
				t.Fatalf("one thread: %d experts ran whole on a pool thread", wholes)
			case threads > 1 && wholes < len(j.Order)-1:
				t.Fatalf("threads %d: %d of %d experts ran whole on a pool thread", threads, wholes, len(j.Order))
			}
			// expert 0 of the skewed job holds half the pairs: whole on a
			// thread at 2 threads (an equal share), split at 3
			if j == skewed && threads > 1 && f.whole[0] != (threads == 2) {
				t.Fatalf("threads %d: expert 0 (half the tokens) ran whole: %v", threads, f.whole[0])
			}
		}
	}
	p := kernels.NewPool(2)
	defer p.Close()
	f := &threadFFN{fakeFFN: fakeFFN{nEmbd: E, fail: spread.Order[3]}, whole: map[int]bool{}}
	_, released, err := consumeAll(t, New(f, E, p), spread)
	if !errors.Is(err, errBoom) || released != len(spread.Order) {
		t.Fatalf("failing expert: err %v, released %d of %d", err, released, len(spread.Order))
	}
}

// TestPoll: poll sees a value already in the channel at once, gives up on
// an empty channel after about pollWait, and with one P sees a value that
// another goroutine sends.
func TestPoll(t *testing.T) {
	ch := make(chan expert.Ready, 1)
	ch <- expert.Ready{Expert: 1}
	if !poll(ch, time.Now()) {
		t.Fatal("a waiting value was not seen")
	}
	<-ch
	t0 := time.Now()
	if poll(ch, t0) {
		t.Fatal("an empty channel reported a value")
	}
	if d := time.Since(t0); d < pollWait {
		t.Fatalf("gave up after %v, before pollWait %v", d, pollWait)
	}
	prev := runtime.GOMAXPROCS(1)
	defer runtime.GOMAXPROCS(prev)
	go func() { ch <- expert.Ready{Expert: 2} }()
	seen := false
	for i := 0; i < 1000 && !seen; i++ {
		seen = poll(ch, time.Now())
	}
	if !seen {
		t.Fatal("a value sent while polling on one P was never seen")
	}
}
