package reader

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"math/rand/v2"
	"sync"
	"sync/atomic"
	"testing"
	"time"
)

func TestLanesReadEverything(t *testing.T) {
	dir := t.TempDir()
	p0, d0 := writeFile(t, dir, "a.gguf", 2<<20+333, 7)
	p1, d1 := writeFile(t, dir, "b.gguf", 1<<20+5, 8)
	data := [][]byte{d0, d1}
	f, err := Open([]string{p0, p1}, Options{})
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	for _, lanes := range []int{1, 2, 4, 8} {
		t.Run(fmt.Sprint(lanes), func(t *testing.T) {
			l, err := Start(context.Background(), f, LaneOptions{Lanes: lanes, Queue: 4})
			if err != nil {
				t.Fatal(err)
			}
			rng := rand.New(rand.NewPCG(uint64(lanes), 9))
			const nreq = 64
			type job struct {
				rs   []Range
				buf  []byte
				done atomic.Int32
				err  error
			}
			jobs := make([]*job, nreq)
			var wg sync.WaitGroup
			var payload int64
			for i := range jobs {
				j := &job{}
				for range 1 + rng.IntN(3) {
					s := rng.IntN(2)
					n := int64(len(data[s]))
					off := rng.Int64N(n)
					j.rs = append(j.rs, Range{Shard: s, Off: off, Len: rng.Int64N(min(n-off, 300000) + 1)})
					payload += j.rs[len(j.rs)-1].Len
				}
				j.buf = alloc(t, SpanBytes(j.rs))
				jobs[i] = j
				wg.Add(1)
				err := l.Submit(context.Background(), Request{Buf: j.buf, Ranges: j.rs, Label: fmt.Sprint("job ", i),
					Done: func(err error) { j.err = err; j.done.Add(1); wg.Done() }})
				if err != nil {
					t.Fatal(err)
				}
			}
			wg.Wait()
			l.Close()
			for i, j := range jobs {
				if j.done.Load() != 1 || j.err != nil {
					t.Fatalf("job %d: done %d times, err %v", i, j.done.Load(), j.err)
				}
				v, _ := Views(nil, j.buf, j.rs)
				for k, r := range j.rs {
					if !bytes.Equal(v[k], data[r.Shard][r.Off:r.Off+r.Len]) {
						t.Fatalf("job %d range %d: wrong bytes", i, k)
					}
				}
			}
			st := l.Stats()
			if st.Reads != nreq || st.Payload != payload || len(st.Lanes) != lanes || st.Bytes < payload {
				t.Errorf("stats %+v: want %d reads, payload %d", st.LaneStats, nreq, payload)
			}
			if err := l.Submit(context.Background(), Request{Done: func(error) {}}); !errors.Is(err, ErrClosed) {
				t.Errorf("Submit after Close: %v, want ErrClosed", err)
			}
		})
	}
}

// blockingFile blocks every read until release is closed.
type blockingFile struct {
	started chan struct{}
	release chan struct{}
}

func (b *blockingFile) ReadAt(p []byte, off int64) (int, error) {
	select {
	case b.started <- struct{}{}:
	default:
	}
	<-b.release
	return len(p), nil
}
func (b *blockingFile) Close() error { return nil }

func blockingFiles(t *testing.T) (*Files, *blockingFile) {
	bf := &blockingFile{started: make(chan struct{}, 1), release: make(chan struct{})}
	f, err := Open([]string{"blocking"}, Options{Open: func(string, bool) (File, error) { return bf, nil }})
	if err != nil {
		t.Fatal(err)
	}
	return f, bf
}

// TestLanesCancel: cancelling the lanes' context fails queued requests with
// the context error at once, and Close returns as soon as the read in
// progress ends; no goroutine is left (goleak in TestMain).
func TestLanesCancel(t *testing.T) {
	f, bf := blockingFiles(t)
	defer f.Close()
	ctx, cancel := context.WithCancel(context.Background())
	l, err := Start(ctx, f, LaneOptions{Lanes: 1, Queue: 8})
	if err != nil {
		t.Fatal(err)
	}
	buf := alloc(t, BlockSize)
	results := make(chan error, 8)
	for range 5 {
		if err := l.Submit(context.Background(), Request{Buf: buf, Ranges: []Range{{Shard: 0, Off: 0, Len: 10}},
			Done: func(err error) { results <- err }}); err != nil {
			t.Fatal(err)
		}
	}
	<-bf.started // the lane is inside the first read
	cancel()
	close(bf.release)
	var ok, cancelled int
	for range 5 {
		switch err := <-results; {
		case err == nil:
			ok++
		case errors.Is(err, context.Canceled):
			cancelled++
		default:
			t.Errorf("unexpected error %v", err)
		}
	}
	if ok != 1 || cancelled != 4 {
		t.Errorf("%d ok and %d cancelled, want 1 and 4", ok, cancelled)
	}
	if err := l.Submit(context.Background(), Request{Buf: buf, Ranges: []Range{{Shard: 0, Off: 0, Len: 10}}, Done: func(error) {}}); !errors.Is(err, ErrClosed) {
		t.Errorf("Submit after cancellation: %v, want ErrClosed", err)
	}
	// The lanes exit on cancellation alone, before Close.
	exited := make(chan struct{})
	go func() { l.wg.Wait(); close(exited) }()
	select {
	case <-exited:
	case <-time.After(time.Minute):
		t.Fatal("lanes still running after cancellation")
	}
	done := make(chan struct{})
	go func() { l.Close(); close(done) }()
	select {
	case <-done:
	case <-time.After(time.Minute):
		t.Fatal("Close hung after cancellation")
	}
}

// TestLanesBackpressure: Submit blocks on a full queue (never drops) and gives
// up with the submitter's context error.
func TestLanesBackpressure(t *testing.T) {
	f, bf := blockingFiles(t)
	defer f.Close()
	l, err := Start(context.Background(), f, LaneOptions{Lanes: 1, Queue: 1})
	if err != nil {
		t.Fatal(err)
	}
	buf := alloc(t, BlockSize)
	var done atomic.Int32
	req := Request{Buf: buf, Ranges: []Range{{Shard: 0, Off: 0, Len: 10}}, Done: func(error) { done.Add(1) }}
	if err := l.Submit(context.Background(), req); err != nil { // taken by the lane
		t.Fatal(err)
	}
	<-bf.started
	if err := l.Submit(context.Background(), req); err != nil { // fills the queue
		t.Fatal(err)
	}
	// ctx is cancelled once the Submit blocks on it
	ctx, cancel := context.WithCancel(context.Background())
	if err := l.Submit(&cancelOnWait{Context: ctx, cancel: cancel}, req); !errors.Is(err, context.Canceled) {
		t.Fatalf("Submit on a full queue: %v, want Canceled", err)
	}
	// A Submit blocked while Close starts still gets in and is served.
	spy := &doneSpy{Context: context.Background(), asked: make(chan struct{})}
	blocked := make(chan error, 1)
	go func() { blocked <- l.Submit(spy, req) }()
	select {
	case <-spy.asked: // Submit is in its blocking select
	case <-time.After(hangGuard):
		t.Fatalf("Submit never blocked on the full queue (%v)", hangGuard)
	}
	closed := make(chan struct{})
	go func() { l.Close(); close(closed) }()
	close(bf.release)
	if err := <-blocked; err != nil {
		t.Fatalf("blocked Submit: %v", err)
	}
	<-closed
	if done.Load() != 3 {
		t.Errorf("Done called %d times, want 3", done.Load())
	}
}

// hangGuard bounds the tests' waits for an event: reaching it fails the
// test loudly instead of hanging; it is no timing claim.
const hangGuard = 60 * time.Second

// doneSpy is a context that reports when its Done is first asked for: a
// Submit asks only in its blocking select, once it is past the closed check
// and counted as a submitter.
type doneSpy struct {
	context.Context
	once  sync.Once
	asked chan struct{}
}

func (c *doneSpy) Done() <-chan struct{} {
	c.once.Do(func() { close(c.asked) })
	return c.Context.Done()
}

// cancelOnWait is a context cancelled as soon as a waiter asks for its
// Done channel: a call that must block until its context ends returns when
// it blocks, without a timeout to pick.
type cancelOnWait struct {
	context.Context
	cancel context.CancelFunc
}

func (c *cancelOnWait) Done() <-chan struct{} {
	c.cancel()
	return c.Context.Done()
}

func TestStartErrors(t *testing.T) {
	if _, err := Start(context.Background(), nil, LaneOptions{Lanes: 1, Queue: 1}); err == nil {
		t.Error("nil files accepted")
	}
	f, _ := blockingFiles(t)
	defer f.Close()
	if _, err := Start(context.Background(), f, LaneOptions{Lanes: 0, Queue: 1}); err == nil {
		t.Error("0 lanes accepted")
	}
	l, err := Start(context.Background(), f, LaneOptions{Lanes: 1, Queue: 0})
	if err != nil {
		t.Fatal(err)
	}
	defer l.Close()
	if err := l.Submit(context.Background(), Request{}); err == nil {
		t.Error("request without Done accepted")
	}
}

// gateFile lets reads through only when `want` of them run at once (or when
// the test gives up), recording the largest number seen concurrently.
type gateFile struct {
	mu      sync.Mutex
	cur, mx int
	want    int
	all     chan struct{} // closed when want reads run at once
	giveUp  chan struct{} // closed by the test's hang guard
}

func (g *gateFile) ReadAt(p []byte, off int64) (int, error) {
	g.mu.Lock()
	g.cur++
	g.mx = max(g.mx, g.cur)
	if g.cur == g.want {
		close(g.all)
	}
	g.mu.Unlock()
	select {
	case <-g.all:
	case <-g.giveUp:
	}
	g.mu.Lock()
	g.cur--
	g.mu.Unlock()
	return len(p), nil
}
func (g *gateFile) Close() error { return nil }

// TestLanesSplitRequest: one request's three ranges are read at once, even
// with a single lane: each piece's read waits until all three run, so
// reading them one after another never completes (the hang guard fails it).
func TestLanesSplitRequest(t *testing.T) {
	g := &gateFile{want: 3, all: make(chan struct{}), giveUp: make(chan struct{})}
	f, err := Open([]string{"gate"}, Options{Open: func(string, bool) (File, error) { return g, nil }})
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	l, err := Start(context.Background(), f, LaneOptions{Lanes: 1, Queue: 0})
	if err != nil {
		t.Fatal(err)
	}
	defer l.Close()
	rs := []Range{{Shard: 0, Off: 0, Len: 884736}, {Shard: 0, Off: 1 << 30, Len: 884736}, {Shard: 0, Off: 2 << 30, Len: 1290240}}
	buf := alloc(t, SpanBytes(rs))
	done := make(chan error, 1)
	if err := l.Submit(context.Background(), Request{Buf: buf, Ranges: rs, Done: func(err error) { done <- err }}); err != nil {
		t.Fatal(err)
	}
	select {
	case err := <-done:
		if err != nil {
			t.Fatal(err)
		}
	case <-time.After(hangGuard):
		close(g.giveUp)
		<-done
		g.mu.Lock()
		defer g.mu.Unlock()
		t.Fatalf("the three pieces were not read at once within %v (at most %d at a time)", hangGuard, g.mx)
	}
	if g.mx != 3 {
		t.Errorf("%d pieces read at once, want 3", g.mx)
	}
	if s := l.Stats(); s.Reads != 1 || s.Payload != 884736*2+1290240 {
		t.Errorf("stats %+v", s.LaneStats)
	}
}

// TestLanesDemandFirst: queued demand requests are served before queued
// speculative ones, whatever the submission order.
func TestLanesDemandFirst(t *testing.T) {
	f, bf := blockingFiles(t)
	defer f.Close()
	l, err := Start(context.Background(), f, LaneOptions{Lanes: 1, Queue: 8})
	if err != nil {
		t.Fatal(err)
	}
	buf := alloc(t, BlockSize)
	var mu sync.Mutex
	var order []string
	submit := func(name string, spec bool) {
		err := l.Submit(context.Background(), Request{Buf: buf, Ranges: []Range{{Shard: 0, Off: 0, Len: 10}}, Speculative: spec,
			Done: func(error) { mu.Lock(); order = append(order, name); mu.Unlock() }})
		if err != nil {
			t.Fatal(err)
		}
	}
	submit("first", false)
	<-bf.started // the lane is busy with "first"
	submit("spec1", true)
	submit("spec2", true)
	submit("demand1", false)
	submit("demand2", false)
	close(bf.release)
	l.Close()
	if got := fmt.Sprint(order); got != "[first demand1 demand2 spec1 spec2]" {
		t.Errorf("served %s", got)
	}
}

// TestLanesBackgroundLast: queued background requests (the cache fill's)
// are served after every queued demand and speculative request, whatever
// the order they were offered in, and a promoted one joins the demand
// requests: a demand read never waits in a queue behind a fill read.
func TestLanesBackgroundLast(t *testing.T) {
	f, bf := blockingFiles(t)
	defer f.Close()
	l, err := Start(context.Background(), f, LaneOptions{Lanes: 1, Queue: 8, SpecLanes: 1})
	if err != nil {
		t.Fatal(err)
	}
	buf := alloc(t, BlockSize)
	var mu sync.Mutex
	var order []string
	req := func(name string) Request {
		return Request{Buf: buf, Ranges: []Range{{Shard: 0, Off: 0, Len: 10}},
			Done: func(error) { mu.Lock(); order = append(order, name); mu.Unlock() }}
	}
	offer := func(name string, background bool) *Ticket {
		r := req(name)
		r.Background, r.AnyLane = background, background
		tk, err := l.Offer(r)
		if err != nil || tk == nil {
			t.Fatalf("Offer %s: %v, %v", name, tk, err)
		}
		return tk
	}
	if err := l.Submit(context.Background(), req("first")); err != nil {
		t.Fatal(err)
	}
	<-bf.started // the lane is busy with "first"
	offer("fill1", true)
	offer("fill2", true)
	promoted := offer("fill3", true)
	offer("spec1", false)
	if err := l.Submit(context.Background(), req("demand1")); err != nil {
		t.Fatal(err)
	}
	if !promoted.Promote(context.Background()) {
		t.Fatal("Promote of a waiting background request failed")
	}
	close(bf.release)
	l.Close()
	if got := fmt.Sprint(order); got != "[first demand1 fill3 spec1 fill1 fill2]" {
		t.Errorf("served %s, want [first demand1 fill3 spec1 fill1 fill2]", got)
	}
}

// offFile sends every read's offset on started and holds it until release
// is closed.
type offFile struct {
	started chan int64
	release chan struct{}
}

func (g *offFile) ReadAt(p []byte, off int64) (int, error) {
	g.started <- off
	<-g.release
	return len(p), nil
}
func (g *offFile) Close() error { return nil }

// TestLanesBackgroundSpecLanes: background requests without AnyLane keep
// within SpecLanes: with one of two lanes reading a background request, the
// other lane does not take the next one but the demand request that comes
// after it.
func TestLanesBackgroundSpecLanes(t *testing.T) {
	g := &offFile{started: make(chan int64, 8), release: make(chan struct{})}
	f, err := Open([]string{"off"}, Options{Open: func(string, bool) (File, error) { return g, nil }})
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	l, err := Start(context.Background(), f, LaneOptions{Lanes: 2, SpecLanes: 1})
	if err != nil {
		t.Fatal(err)
	}
	served := make(chan struct{}, 8)
	req := func(off int64) Request {
		return Request{Buf: alloc(t, BlockSize), Ranges: []Range{{Shard: 0, Off: off, Len: 10}}, Done: func(error) { served <- struct{}{} }}
	}
	next := func() int64 {
		t.Helper()
		select {
		case off := <-g.started:
			return off
		case <-time.After(hangGuard):
			t.Fatalf("no read started in %v", hangGuard)
			return -1
		}
	}
	for _, off := range []int64{BlockSize, 2 * BlockSize} {
		r := req(off)
		r.Background = true
		if tk, err := l.Offer(r); tk == nil || err != nil {
			t.Fatal("Offer refused", err)
		}
	}
	if off := next(); off != BlockSize {
		t.Fatalf("first read at %d, want the first background request's", off)
	}
	if err := l.Submit(context.Background(), req(0)); err != nil {
		t.Fatal(err)
	}
	if off := next(); off != 0 {
		t.Errorf("second read at %d: want the demand request's (0), not a second background one", off)
	}
	close(g.release)
	waitServed(t, served, 3)
	l.Close()
}

// TestLanesTickets: a speculative request offered through a Ticket can be
// withdrawn (Done gets ErrWithdrawn once, no lane reads it) or promoted ahead
// of the other speculative requests while it waits; once started it can be
// neither; Offer never blocks and refuses when the speculative queue is full.
func TestLanesTickets(t *testing.T) {
	f, bf := blockingFiles(t)
	defer f.Close()
	l, err := Start(context.Background(), f, LaneOptions{Lanes: 1, Queue: 3})
	if err != nil {
		t.Fatal(err)
	}
	buf := alloc(t, BlockSize)
	var mu sync.Mutex
	var order []string
	errs := map[string]error{}
	req := func(name string) Request {
		return Request{Buf: buf, Ranges: []Range{{Shard: 0, Off: 0, Len: 10}},
			Done: func(err error) { mu.Lock(); order = append(order, name); errs[name] = err; mu.Unlock() }}
	}
	first, err := l.Offer(req("first"))
	if err != nil || first == nil {
		t.Fatalf("Offer on an empty queue: %v, %v", first, err)
	}
	<-bf.started // the lane is reading "first"
	if first.Withdraw() || first.Promote(context.Background()) {
		t.Error("a started request was withdrawn or promoted")
	}
	tk := map[string]*Ticket{}
	for _, name := range []string{"s1", "s2", "s3"} {
		if tk[name], err = l.Offer(req(name)); err != nil || tk[name] == nil {
			t.Fatalf("Offer %s: %v, %v", name, tk[name], err)
		}
	}
	if full, err := l.Offer(req("refused")); full != nil || err != nil {
		t.Fatalf("Offer on a full queue: %v, %v; want nil, nil", full, err)
	}
	if !tk["s2"].Withdraw() {
		t.Fatal("Withdraw of a waiting request failed")
	}
	if tk["s2"].Withdraw() || tk["s2"].Promote(context.Background()) {
		t.Error("a withdrawn request was withdrawn or promoted again")
	}
	if !tk["s3"].Promote(context.Background()) {
		t.Fatal("Promote of a waiting request failed")
	}
	close(bf.release)
	l.Close()
	if got := fmt.Sprint(order); got != "[s2 first s3 s1]" {
		t.Errorf("Done order %s, want [s2 first s3 s1]", got)
	}
	if !errors.Is(errs["s2"], ErrWithdrawn) || errs["s1"] != nil || errs["s3"] != nil {
		t.Errorf("errors %v", errs)
	}
	s := l.Stats()
	if s.Reads != 3 || s.Withdrawn != 1 || s.Promoted != 1 || s.Refused != 1 {
		t.Errorf("stats: %d reads, %d withdrawn, %d promoted, %d refused; want 3 1 1 1", s.Reads, s.Withdrawn, s.Promoted, s.Refused)
	}
}

// countFile records the most reads in progress at once; every read waits
// until release is closed.
type countFile struct {
	mu      sync.Mutex
	cur, mx int
	started chan struct{}
	release chan struct{}
}

func (g *countFile) ReadAt(p []byte, off int64) (int, error) {
	g.mu.Lock()
	g.cur++
	g.mx = max(g.mx, g.cur)
	g.mu.Unlock()
	g.started <- struct{}{}
	<-g.release
	g.mu.Lock()
	g.cur--
	g.mu.Unlock()
	return len(p), nil
}
func (g *countFile) Close() error { return nil }

// countLanes starts lanes over a countFile (closed with the test).
func countLanes(t *testing.T, o LaneOptions) (*countFile, *Lanes) {
	t.Helper()
	g := &countFile{started: make(chan struct{}, 16), release: make(chan struct{})}
	f, err := Open([]string{"count"}, Options{Open: func(string, bool) (File, error) { return g, nil }})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { f.Close() })
	l, err := Start(context.Background(), f, o)
	if err != nil {
		t.Fatal(err)
	}
	return g, l
}

// waitServed takes n Done calls' tokens from served; it fails the test
// after hangGuard.
func waitServed(t *testing.T, served <-chan struct{}, n int) {
	t.Helper()
	guard := time.After(hangGuard)
	for i := range n {
		select {
		case <-served:
		case <-guard:
			t.Fatalf("%d of %d requests served after %v", i, n, hangGuard)
		}
	}
}

// TestLanesSpecLanes: with SpecLanes 1 of 3 lanes, speculative reads run one
// at a time while the other lanes stay free for demand reads.
func TestLanesSpecLanes(t *testing.T) {
	g, l := countLanes(t, LaneOptions{Lanes: 3, SpecLanes: 1})
	buf := alloc(t, BlockSize)
	served := make(chan struct{}, 8) // room for every Done: it never blocks a lane
	req := Request{Buf: buf, Ranges: []Range{{Shard: 0, Off: 0, Len: 10}}, Done: func(error) { served <- struct{}{} }}
	for range 3 {
		if tk, err := l.Offer(req); tk == nil || err != nil {
			t.Fatal("Offer refused", err)
		}
	}
	<-g.started // one speculative read runs
	if err := l.Submit(context.Background(), req); err != nil {
		t.Fatal(err)
	}
	<-g.started // the demand read runs beside it
	select {
	case <-g.started:
		t.Fatal("a second speculative read started while one was in flight")
	case <-time.After(50 * time.Millisecond):
	}
	close(g.release)
	waitServed(t, served, 4)
	l.Close() // (Close drains what is left on every lane, unbounded)
	if extra := len(served); extra != 0 || g.mx != 2 {
		t.Errorf("%d served, at most %d reads at once; want 4, 2", 4+extra, g.mx)
	}
}

// TestLanesAnyLane: AnyLane speculative reads (the warm start's) run on
// every lane at once, whatever SpecLanes.
func TestLanesAnyLane(t *testing.T) {
	g, l := countLanes(t, LaneOptions{Lanes: 3, SpecLanes: 1})
	served := make(chan struct{}, 8) // room for every Done: it never blocks a lane
	req := Request{Buf: alloc(t, BlockSize), Ranges: []Range{{Shard: 0, Off: 0, Len: 10}}, Done: func(error) { served <- struct{}{} }, AnyLane: true}
	for range 4 {
		if tk, err := l.Offer(req); tk == nil || err != nil {
			t.Fatal("Offer refused", err)
		}
	}
	for i := range 3 {
		select {
		case <-g.started:
		case <-time.After(time.Minute):
			t.Fatalf("%d AnyLane reads started on 3 lanes with SpecLanes 1, want 3", i)
		}
	}
	close(g.release)
	waitServed(t, served, 4)
	l.Close()
	if extra := len(served); extra != 0 || g.mx != 3 {
		t.Errorf("%d served, at most %d reads at once; want 4, 3", 4+extra, g.mx)
	}
}

// TestOfferAfterClose: Offer on closed lanes is ErrClosed and never calls Done.
func TestOfferAfterClose(t *testing.T) {
	f, _ := blockingFiles(t)
	defer f.Close()
	l, err := Start(context.Background(), f, LaneOptions{Lanes: 1, Queue: 1})
	if err != nil {
		t.Fatal(err)
	}
	l.Close()
	called := false
	tk, err := l.Offer(Request{Buf: alloc(t, BlockSize), Ranges: []Range{{Shard: 0, Off: 0, Len: 10}}, Done: func(error) { called = true }})
	if tk != nil || !errors.Is(err, ErrClosed) || called {
		t.Errorf("Offer after Close: %v, %v, Done called %v; want nil, ErrClosed, false", tk, err, called)
	}
	if _, err := l.Offer(Request{}); err == nil {
		t.Error("Offer without Done accepted")
	}
}

// fastFile answers every read after a few microseconds.
type fastFile struct{}

func (fastFile) ReadAt(p []byte, off int64) (int, error) {
	time.Sleep(5 * time.Microsecond)
	return len(p), nil
}
func (fastFile) Close() error { return nil }

// TestTicketStress races Withdraw and Promote against the lanes on many
// requests, demand and speculative mixed: every accepted request gets exactly
// one Done, a withdrawn one with ErrWithdrawn and no read, and the counters
// add up. Run it with -race.
func TestTicketStress(t *testing.T) {
	f, err := Open([]string{"fast"}, Options{Open: func(string, bool) (File, error) { return fastFile{}, nil }})
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	l, err := Start(context.Background(), f, LaneOptions{Lanes: 3, Queue: 64, SpecLanes: 1})
	if err != nil {
		t.Fatal(err)
	}
	const n = 2000
	buf := alloc(t, BlockSize)
	dones := make([]atomic.Int32, n)
	var withdrawnDone, demand atomic.Int64
	tickets := make(chan *Ticket, n)
	var wg sync.WaitGroup
	wg.Go(func() { // the planner's role: withdraw or promote what it is handed
		i := 0
		for tk := range tickets {
			if i++; i%2 == 0 {
				tk.Withdraw()
			} else {
				tk.Promote(context.Background())
			}
		}
	})
	accepted := 0
	for i := range n {
		r := Request{Buf: buf, Ranges: []Range{{Shard: 0, Off: int64(i) * 16, Len: 10}}, Done: func(err error) {
			dones[i].Add(1)
			if errors.Is(err, ErrWithdrawn) {
				withdrawnDone.Add(1)
			} else if err != nil {
				t.Errorf("request %d: %v", i, err)
			}
		}}
		if i%3 == 0 {
			if err := l.Submit(context.Background(), r); err != nil {
				t.Fatal(err)
			}
			demand.Add(1)
			accepted++
			continue
		}
		tk, err := l.Offer(r)
		if err != nil {
			t.Fatal(err)
		}
		if tk == nil {
			dones[i].Add(1) // refused: Done is never called; count it as settled
			continue
		}
		accepted++
		tickets <- tk
	}
	close(tickets)
	wg.Wait()
	l.Close()
	for i := range dones {
		if d := dones[i].Load(); d != 1 {
			t.Fatalf("request %d: Done called %d times", i, d)
		}
	}
	s := l.Stats()
	if s.Withdrawn != withdrawnDone.Load() || s.Reads+s.Withdrawn != int64(accepted) {
		t.Errorf("%d reads + %d withdrawn (%d Done with ErrWithdrawn) != %d accepted", s.Reads, s.Withdrawn, withdrawnDone.Load(), accepted)
	}
	t.Logf("%d requests: %d demand, %d reads, %d withdrawn, %d promoted, %d refused", n, demand.Load(), s.Reads, s.Withdrawn, s.Promoted, s.Refused)
}
