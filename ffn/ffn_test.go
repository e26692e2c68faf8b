package ffn

import (
	"context"
	"errors"
	"math"
	"math/rand/v2"
	"slices"
	"sync/atomic"
	"testing"
	"time"

	"github.com/pipe-engine/pipe/expert"
	"github.com/pipe-engine/pipe/model"
)

// fakeFFN: expert e maps x to x·(e+1) + e, element-wise, so outputs are
// distinct per expert and token.
type fakeFFN struct {
	nEmbd int
	fail  int // expert whose compute fails (-1: none)
}

var errBoom = errors.New("boom")

func (f *fakeFFN) ComputeExpert(l, e int, parts [][]byte, n int, x, out []float32, s *model.Scratch) error {
	if e == f.fail {
		return errBoom
	}
	for i := 0; i < n*f.nEmbd; i++ {
		out[i] = x[i]*float32(e+1) + float32(e) + float32(len(parts[0]))
	}
	return nil
}

func makeJob(rng *rand.Rand, n, k, nExp, E int) *Job {
	j := &Job{Layer: 1, K: k}
	for t := 0; t < n; t++ {
		x := make([]float32, E)
		for i := range x {
			x[i] = rng.Float32()*2 - 1
		}
		perm := rng.Perm(nExp)[:k]
		w := make([]float32, k)
		for r := range w {
			w[r] = rng.Float32()
		}
		j.X = append(j.X, x)
		j.IDs = append(j.IDs, perm)
		j.W = append(j.W, w)
		j.Out = append(j.Out, make([]float32, E))
	}
	j.Plan()
	return j
}

// run feeds the job's experts in the given order and returns the outputs.
func run(t *testing.T, j *Job, order []int, overlap bool, f *fakeFFN) ([][]float32, int, error) {
	t.Helper()
	s := New(f, f.nEmbd, nil)
	s.Begin(j)
	ch := make(chan expert.Ready, len(order))
	released := 0
	for _, e := range order {
		ch <- expert.Ready{Expert: e, Parts: [][]byte{make([]byte, 3)}, Lease: leaseFunc(func() { released++ })}
	}
	var st Stats
	err := s.Consume(context.Background(), context.Background(), j, ch, len(order), overlap, &st)
	if err == nil {
		s.Finish(j, &st)
	}
	out := make([][]float32, len(j.Out))
	for i := range j.Out {
		out[i] = append([]float32(nil), j.Out[i]...)
	}
	return out, released, err
}

// TestArrivalOrderInvariance: any arrival order, with or without overlap,
// gives the same bits, equal to the rank-order weighted sum.
func TestArrivalOrderInvariance(t *testing.T) {
	rng := rand.New(rand.NewPCG(1, 2))
	const E = 16
	f := &fakeFFN{nEmbd: E, fail: -1}
	for trial := 0; trial < 20; trial++ {
		n, k := 1+rng.IntN(6), 1+rng.IntN(4)
		j := makeJob(rng, n, k, 8, E)
		base, rel, err := run(t, j, j.Order, true, f)
		if err != nil {
			t.Fatal(err)
		}
		if rel != len(j.Order) {
			t.Fatalf("released %d of %d", rel, len(j.Order))
		}
		// reference: Σ_rank w·y in rank order
		for tk := 0; tk < n; tk++ {
			for i := 0; i < E; i++ {
				var acc float32
				for r := 0; r < k; r++ {
					e := j.IDs[tk][r]
					y := j.X[tk][i]*float32(e+1) + float32(e) + 3
					p := y * j.W[tk][r]
					if r == 0 {
						acc = p
					} else {
						acc += p
					}
				}
				if math.Float32bits(acc) != math.Float32bits(base[tk][i]) {
					t.Fatalf("token %d elem %d: %v, want %v", tk, i, base[tk][i], acc)
				}
			}
		}
		for p := 0; p < 5; p++ {
			order := append([]int(nil), j.Order...)
			rng.Shuffle(len(order), func(a, b int) { order[a], order[b] = order[b], order[a] })
			for _, ov := range []bool{true, false} {
				got, _, err := run(t, j, order, ov, f)
				if err != nil {
					t.Fatal(err)
				}
				for tk := range got {
					for i := range got[tk] {
						if math.Float32bits(got[tk][i]) != math.Float32bits(base[tk][i]) {
							t.Fatalf("order %v overlap %v: outputs differ", order, ov)
						}
					}
				}
			}
		}
	}
}

func TestErrorsReleaseEverything(t *testing.T) {
	rng := rand.New(rand.NewPCG(3, 4))
	j := makeJob(rng, 4, 2, 8, 8)
	for _, ov := range []bool{true, false} {
		f := &fakeFFN{nEmbd: 8, fail: j.Order[0]}
		_, rel, err := run(t, j, j.Order, ov, f)
		if !errors.Is(err, errBoom) {
			t.Fatalf("overlap %v: err %v", ov, err)
		}
		if rel != len(j.Order) {
			t.Fatalf("overlap %v: released %d of %d", ov, rel, len(j.Order))
		}
	}
	// a read error is reported and every other expert still released
	f := &fakeFFN{nEmbd: 8, fail: -1}
	s := New(f, 8, nil)
	s.Begin(j)
	ch := make(chan expert.Ready, len(j.Order))
	released := 0
	readErr := errors.New("EIO")
	for i, e := range j.Order {
		r := expert.Ready{Expert: e, Parts: [][]byte{{1}}, Lease: leaseFunc(func() { released++ })}
		if i == 1 {
			r = expert.Ready{Expert: e, Err: readErr}
		}
		ch <- r
	}
	var st Stats
	if err := s.Consume(context.Background(), context.Background(), j, ch, len(j.Order), true, &st); !errors.Is(err, readErr) {
		t.Fatalf("err %v", err)
	}
	if released != len(j.Order)-1 {
		t.Fatalf("released %d of %d", released, len(j.Order)-1)
	}
	// an expert that was not routed
	s.Begin(j)
	ch <- expert.Ready{Expert: 99, Parts: [][]byte{{1}}}
	if err := s.Consume(context.Background(), context.Background(), j, ch, 1, true, &st); !errors.Is(err, ErrNotRouted) {
		t.Fatalf("err %v, want ErrNotRouted", err)
	}
}

func TestConsumeCancelled(t *testing.T) {
	rng := rand.New(rand.NewPCG(5, 6))
	j := makeJob(rng, 2, 2, 8, 8)
	s := New(&fakeFFN{nEmbd: 8, fail: -1}, 8, nil)
	s.Begin(j)
	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	var st Stats
	if err := s.Consume(ctx, ctx, j, make(chan expert.Ready), 1, true, &st); !errors.Is(err, context.Canceled) {
		t.Fatalf("err %v", err)
	}
}

// batchFFN is fakeFFN with ComputeExperts; it records the batch sizes.
type batchFFN struct {
	fakeFFN
	sizes []int
}

func (f *batchFFN) ComputeExperts(l int, work []model.ExpertWork, s *model.Scratch) error {
	f.sizes = append(f.sizes, len(work))
	for _, w := range work {
		if len(w.X) != w.N*f.nEmbd || len(w.Out) != w.N*f.nEmbd {
			return errors.New("work buffers of the wrong size")
		}
		if err := f.ComputeExpert(l, w.Expert, w.Parts, w.N, w.X, w.Out, s); err != nil {
			return err
		}
	}
	return nil
}

// TestBatchedExperts: the single-token experts already waiting in the
// channel are computed in one ComputeExperts call, with the same bits as one by one, and every
// value is released (also when the batch fails).
func TestBatchedExperts(t *testing.T) {
	rng := rand.New(rand.NewPCG(7, 8))
	const E = 16
	for trial := 0; trial < 10; trial++ {
		n, k := 1+rng.IntN(4), 2+rng.IntN(3)
		j := makeJob(rng, n, k, 8, E)
		want, _, err := run(t, j, j.Order, true, &fakeFFN{nEmbd: E, fail: -1})
		if err != nil {
			t.Fatal(err)
		}
		for _, ov := range []bool{true, false} {
			f := &batchFFN{fakeFFN: fakeFFN{nEmbd: E, fail: -1}}
			s := New(f, E, nil)
			s.Begin(j)
			ch := make(chan expert.Ready, len(j.Order))
			released := 0
			for _, e := range j.Order {
				ch <- expert.Ready{Expert: e, Parts: [][]byte{make([]byte, 3)}, Lease: leaseFunc(func() { released++ })}
			}
			var st Stats
			if err := s.Consume(context.Background(), context.Background(), j, ch, len(j.Order), ov, &st); err != nil {
				t.Fatal(err)
			}
			s.Finish(j, &st)
			if released != len(j.Order) || st.Experts != len(j.Order) {
				t.Fatalf("released %d, computed %d of %d", released, st.Experts, len(j.Order))
			}
			singles := 0
			for _, e := range j.Order {
				if us, _ := j.usersOf(e); len(us) == 1 {
					singles++
				}
			}
			if singles > 1 && (len(f.sizes) != 1 || f.sizes[0] != singles) || singles <= 1 && len(f.sizes) != 0 {
				t.Fatalf("batches %v, want one of the %d single-token experts", f.sizes, singles)
			}
			for tk := range want {
				for i := range want[tk] {
					if math.Float32bits(j.Out[tk][i]) != math.Float32bits(want[tk][i]) {
						t.Fatalf("overlap %v token %d elem %d: batched %v, single %v", ov, tk, i, j.Out[tk][i], want[tk][i])
					}
				}
			}
		}
	}
	// a failing expert inside a batch: the error is returned, all released
	j := makeJob(rng, 3, 3, 8, E)
	f := &batchFFN{fakeFFN: fakeFFN{nEmbd: E, fail: j.Order[1]}}
	s := New(f, E, nil)
	s.Begin(j)
	ch := make(chan expert.Ready, len(j.Order))
	released := 0
	for _, e := range j.Order {
		ch <- expert.Ready{Expert: e, Parts: [][]byte{make([]byte, 3)}, Lease: leaseFunc(func() { released++ })}
	}
	var st Stats
	if err := s.Consume(context.Background(), context.Background(), j, ch, len(j.Order), true, &st); !errors.Is(err, errBoom) {
		t.Fatalf("err %v", err)
	}
	if released != len(j.Order) {
		t.Fatalf("released %d of %d", released, len(j.Order))
	}
}

// leaseFunc is a Lease that calls itself.
type leaseFunc func()

func (f leaseFunc) Release() { f() }

// TestJobReuse: a job re-planned for another layer's routing plans exactly
// as a fresh one, and the steady path — Plan, Begin, Consume, Finish on a
// reused job and stage — allocates nothing.
func TestJobReuse(t *testing.T) {
	const E, k = 8, 3
	rng := rand.New(rand.NewPCG(3, 4))
	f := &fakeFFN{nEmbd: E, fail: -1}
	a := makeJob(rng, 1, k, 16, E)
	b := makeJob(rng, 1, k, 16, E)
	reused := &Job{Layer: 1, K: k, X: a.X, IDs: a.IDs, W: a.W, Out: a.Out}
	reused.Plan()
	reused.IDs, reused.X, reused.W, reused.Out = b.IDs, b.X, b.W, b.Out
	reused.Plan()
	if !slices.Equal(reused.Order, b.Order) {
		t.Fatalf("order %v, fresh %v", reused.Order, b.Order)
	}
	for _, e := range a.Order {
		_, inB := b.usersOf(e)
		if us, ok := reused.usersOf(e); ok != inB || len(us) > 1 {
			t.Fatalf("expert %d: users %v (%v), fresh plan %v", e, us, ok, inB)
		}
	}
	s := New(f, E, nil)
	ch := make(chan expert.Ready, k)
	var st Stats
	parts := [][]byte{{1, 2, 3}}
	step := func() {
		reused.Plan()
		s.Begin(reused)
		for _, e := range reused.Order {
			ch <- expert.Ready{Expert: e, Parts: parts}
		}
		if err := s.Consume(context.Background(), context.Background(), reused, ch, len(reused.Order), true, &st); err != nil {
			t.Fatal(err)
		}
		s.Finish(reused, &st)
	}
	step()
	if n := testing.AllocsPerRun(20, step); n != 0 {
		t.Errorf("%.1f allocations per layer on a reused job", n)
	}
}

// feed sends a value for each expert of order on a new channel (buffered
// for all of them), calling before(i) ahead of the i-th send (false: stop
// sending). The value at errAt carries errBoom; releasing a value counts in
// released, then calls freed (if not nil).
func feed(order []int, errAt int, released *atomic.Int32, before func(i int) bool, freed func()) <-chan expert.Ready {
	ch := make(chan expert.Ready, len(order))
	go func() {
		for i, e := range order {
			if !before(i) {
				return
			}
			r := expert.Ready{Expert: e, Parts: [][]byte{make([]byte, 3)}, Lease: leaseFunc(func() {
				released.Add(1)
				if freed != nil {
					freed()
				}
			})}
			if i == errAt {
				r.Err = errBoom
			}
			ch <- r
		}
	}()
	return ch
}

// bounded feeds j.Order with at most slots values unreleased at any time
// (a cache with slots free slots): the next send waits until the consumer
// releases one.
func bounded(j *Job, slots, errAt int, released *atomic.Int32) <-chan expert.Ready {
	free := make(chan struct{}, slots)
	return feed(j.Order, errAt, released, func(int) bool {
		select {
		case free <- struct{}{}:
			return true
		case <-time.After(time.Minute):
			return false // the consumer holds every slot: it fails on its deadline
		}
	}, func() { <-free })
}

// TestErrorHoldsNoSlot: after a wave's first error, Consume releases each
// later value at once instead of holding it to the end. It computes nothing
// more, and a producer bounded by free cache slots (the planner acquiring
// a slot per miss) must still get to send the wave's remaining values; with
// two slots, holding them deadlocks. It checks both an error value and a
// failing compute, with and without overlap.
func TestErrorHoldsNoSlot(t *testing.T) {
	const E = 8
	rng := rand.New(rand.NewPCG(21, 22))
	j := makeJob(rng, 16, 2, 12, E)
	for _, overlap := range []bool{true, false} {
		for _, c := range []struct {
			name        string
			errAt, fail int
		}{{"value error", 1, -1}, {"compute error", -1, j.Order[0]}} {
			if !overlap && c.fail >= 0 {
				continue // without overlap nothing is computed before the wave is in
			}
			s := New(&fakeFFN{nEmbd: E, fail: c.fail}, E, nil)
			s.Begin(j)
			var released atomic.Int32
			ch := bounded(j, 2, c.errAt, &released)
			done := make(chan error, 1)
			go func() {
				var st Stats
				done <- s.Consume(context.Background(), context.Background(), j, ch, len(j.Order), overlap, &st)
			}()
			select {
			case err := <-done:
				if !errors.Is(err, errBoom) || int(released.Load()) != len(j.Order) {
					t.Fatalf("overlap %v, %s: err %v, released %d of %d", overlap, c.name, err, released.Load(), len(j.Order))
				}
			case <-time.After(time.Minute):
				t.Fatalf("overlap %v, %s: Consume still waiting after a minute: it holds the slots the producer needs", overlap, c.name)
			}
		}
	}
}

// TestSideRunsWhileWaiting: a job's side work runs once, when the stage has
// computed what was ready and would wait for the rest (not before the ready
// experts, not after the last); without overlap it is not run (the serial
// baseline); its error ends the layer with every value released; outputs do
// not change.
func TestSideRunsWhileWaiting(t *testing.T) {
	rng := rand.New(rand.NewPCG(7, 8))
	const E = 8
	f := &fakeFFN{nEmbd: E, fail: -1}
	j := makeJob(rng, 1, 4, 16, E)
	want, _, err := run(t, j, j.Order, true, f)
	if err != nil {
		t.Fatal(err)
	}
	for _, tc := range []struct {
		overlap bool
		sideErr error
	}{{true, nil}, {false, nil}, {true, errBoom}} {
		s := New(f, E, nil)
		s.Begin(j)
		ch := make(chan expert.Ready, len(j.Order))
		released := 0
		send := func(es []int) {
			for _, e := range es {
				ch <- expert.Ready{Expert: e, Parts: [][]byte{make([]byte, 3)}, Lease: leaseFunc(func() { released++ })}
			}
		}
		hits, misses := j.Order[:2], j.Order[2:]
		send(hits)
		var sideRuns, computedAtSide, waits int
		sideBeforeWait := false
		j.Side = func() error {
			sideRuns++
			computedAtSide = released // hits computed and released by now
			return tc.sideErr
		}
		s.onWait = func() {
			waits++
			if waits == 2 { // the wait for the misses: they land now
				sideBeforeWait = sideRuns == 1
				send(misses)
			}
		}
		var st Stats
		err := s.Consume(context.Background(), context.Background(), j, ch, len(j.Order), tc.overlap, &st)
		j.Side = nil
		if tc.overlap && waits < 2 {
			t.Fatalf("overlap %v: the stage waited %d times, want 2", tc.overlap, waits)
		}
		if released != len(j.Order) {
			t.Fatalf("overlap %v side error %v: released %d of %d", tc.overlap, tc.sideErr, released, len(j.Order))
		}
		if !tc.overlap {
			if err != nil || sideRuns != 0 {
				t.Fatalf("no overlap: err %v, side ran %d times, want nil, 0", err, sideRuns)
			}
			continue
		}
		if sideRuns != 1 || !sideBeforeWait || computedAtSide != len(hits) {
			t.Fatalf("side ran %d times, before the misses' wait %v, after %d experts computed; want 1, true, %d",
				sideRuns, sideBeforeWait, computedAtSide, len(hits))
		}
		if tc.sideErr != nil {
			if !errors.Is(err, tc.sideErr) {
				t.Fatalf("side error: Consume returned %v", err)
			}
			continue
		}
		if err != nil {
			t.Fatal(err)
		}
		s.Finish(j, &st)
		for i := range want[0] {
			if math.Float32bits(j.Out[0][i]) != math.Float32bits(want[0][i]) {
				t.Fatalf("element %d: %v with side work, %v without", i, j.Out[0][i], want[0][i])
			}
		}
	}
}
