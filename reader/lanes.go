package reader

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"sync/atomic"
	"time"

	"github.com/sourcegraph/conc"
)

// Request is one read job for the lanes: all of Ranges into Buf (layout as in
// the package comment). Done is called exactly once, from the lane goroutine,
// with nil or the first error; it must not block for long (it holds up the
// lane).
type Request struct {
	Buf    []byte
	Ranges []Range
	Label  string // names the read in errors, e.g. "layer 3 expert 17"
	Done   func(err error)
	// Speculative requests (prefetch) wait in their own queue, which lanes
	// serve only when no demand request is queued.
	Speculative bool
	// AnyLane lets every lane serve a speculative or background request,
	// outside the SpecLanes bound (which keeps guesses from taking the
	// device from demand reads during decode): a prompt pass's guesses,
	// right nearly always, and the warm start's reads, which fill free
	// slots mostly before there is any demand, at the disk's full rate.
	AnyLane bool
	// Background requests (offered only, with Offer; the warm start's and
	// the cache fill's) wait in a third queue, which a lane serves only when
	// neither a demand nor a speculative request is queued, within the
	// SpecLanes bound unless AnyLane is set too.
	Background bool
}

// LaneStats are one lane's cumulative counters.
type LaneStats struct {
	Busy    time.Duration // time spent serving requests (wall time per lane)
	Bytes   int64         // bytes transferred from the files (widened with O_DIRECT)
	Payload int64         // bytes the requests asked for (sum of range lengths)
	Reads   int64         // requests served (including failed ones)
}

// Stats are the cumulative counters of all lanes; take deltas per token.
type Stats struct {
	LaneStats             // sums over lanes (Busy summed: can exceed wall time)
	Lanes     []LaneStats // per lane

	// Speculative requests (Offer): withdrawn before they started, promoted
	// to demand priority, refused because their queue was full.
	Withdrawn, Promoted, Refused int64
}

type laneCounters struct {
	busy, bytes, payload, reads atomic.Int64
	_                           [32]byte // keep lanes off one cache line
}

// Lanes is the pool of reader goroutines (--io-threads). A lane serves one
// request at a time — N lanes keep N experts in flight — and reads the
// request's pieces (one per range, large ranges cut in 4 MiB pieces) with up
// to PieceParallelism preads at once, so an expert's gate, up and down slices
// travel together, as one large read would: N lanes put about as many bytes
// in flight as fio --numjobs=N with one expert-sized block per job.
type Lanes struct {
	files *Files
	ctx   context.Context
	q     chan *task // accepted demand requests, bounded
	qs    chan *task // accepted speculative requests, bounded
	qb    chan *task // accepted background requests, bounded
	// specSem holds a token per lane serving (or waiting to serve) a
	// speculative request: at most SpecLanes at once.
	specSem chan struct{}
	wg      conc.WaitGroup

	mu         sync.Mutex
	closed     bool
	submitters sync.WaitGroup
	stopOnce   sync.Once
	closeOnce  sync.Once
	closing    chan struct{}

	counters []laneCounters
	lanes    []lane

	freeMu sync.Mutex
	free   []*task // served demand tasks, reissued by Submit (no allocation per read)

	withdrawn, promoted, refused atomic.Int64
}

// lane is one lane's state for the request it serves: its piece helpers
// (PieceParallelism-1 goroutines that live as long as the lane) take pieces
// of cur from next alongside the lane goroutine.
type lane struct {
	l     *Lanes
	c     *laneCounters
	cur   *task
	next  atomic.Int32
	mu    sync.Mutex
	first error
	start chan struct{} // one token per helper asked to join on cur; closed when the lane exits
	busy  sync.WaitGroup
}

// PieceParallelism is the most preads one lane issues at once for one request.
const PieceParallelism = 4

// task is an accepted request. A task may sit in both queues (a promoted
// speculative request); whoever claims it first — a lane, or Withdraw —
// owns it, and every other copy is skipped.
type task struct {
	Request
	pieces  []piece
	claimed atomic.Bool
	reuse   bool // a Submit task: back to the free list once served
}

func (t *task) claim() bool { return t.claimed.CompareAndSwap(false, true) }

// ErrWithdrawn is the error a withdrawn request's Done receives.
var ErrWithdrawn = errors.New("reader: request withdrawn before it started")

// Ticket names an accepted speculative request (see [Lanes.Offer]) so its
// submitter can withdraw it or raise it to demand priority while it waits.
// Its methods are safe for concurrent use with the lanes.
type Ticket struct {
	l *Lanes
	t *task
}

// Withdraw takes the request back if no lane has started it: Done is called
// with ErrWithdrawn, in the caller's goroutine, before Withdraw returns true.
// It returns false when the read has started (or finished): Done is then
// called by the lane as usual.
func (tk *Ticket) Withdraw() bool {
	if !tk.t.claim() {
		return false
	}
	tk.l.withdrawn.Add(1)
	tk.t.Done(ErrWithdrawn)
	return true
}

// Promote moves a request that no lane has started yet to the demand queue
// (it is served in turn with demand reads, ahead of every speculative one).
// It blocks while the demand queue is full, like Submit, and returns false
// when the read has already started, the lanes are closed or ctx ended.
func (tk *Ticket) Promote(ctx context.Context) bool {
	if tk.t.claimed.Load() {
		return false
	}
	if tk.l.enqueue(ctx, tk.l.q, tk.t, true) != nil {
		return false
	}
	tk.l.promoted.Add(1)
	return true
}

// DefaultQueue is the queue length Start uses when LaneOptions.Queue <= 0:
// enough for a layer's worth of misses of a top-8 model at any lane count.
const DefaultQueue = 64

// LaneOptions configure Start.
type LaneOptions struct {
	Lanes int // lane goroutines (--io-threads), > 0
	// Queue bounds the accepted-but-unstarted requests of each kind, demand
	// and speculative (<= 0: DefaultQueue).
	Queue int
	// SpecLanes bounds how many lanes serve speculative requests at once
	// (<= 0 or >= Lanes: no bound). Reads in flight share the device, so a
	// bound keeps guesses from taking bandwidth from the demand reads the
	// FFN is waiting for; one lane already saturates many disks.
	SpecLanes int
}

// Start starts the lane goroutines. When ctx is cancelled the lanes stop
// reading and exit: pieces not yet started complete with ctx.Err() (preads in
// progress finish first) and Submit returns ErrClosed. The caller must still
// call Close, which waits for the lanes.
func Start(ctx context.Context, files *Files, o LaneOptions) (*Lanes, error) {
	n, queue := o.Lanes, o.Queue
	if n <= 0 {
		return nil, fmt.Errorf("reader: --io-threads must be positive, got %d", n)
	}
	if files == nil {
		return nil, errors.New("reader: Start: nil files")
	}
	if queue <= 0 {
		queue = DefaultQueue
	}
	spec := o.SpecLanes
	if spec <= 0 || spec > n {
		spec = n
	}
	l := &Lanes{
		files:    files,
		ctx:      ctx,
		q:        make(chan *task, queue),
		qs:       make(chan *task, queue),
		qb:       make(chan *task, queue),
		specSem:  make(chan struct{}, spec),
		counters: make([]laneCounters, n),
		lanes:    make([]lane, n),
		closing:  make(chan struct{}),
	}
	for i := range n {
		ln := &l.lanes[i]
		ln.l, ln.c, ln.start = l, &l.counters[i], make(chan struct{}, PieceParallelism-1)
		for range PieceParallelism - 1 {
			l.wg.Go(ln.help)
		}
		l.wg.Go(ln.run)
	}
	l.wg.Go(func() {
		select {
		case <-ctx.Done():
			l.stop() // the lanes fail what is queued and exit
		case <-l.closing:
		}
	})
	return l, nil
}

// N returns the number of lanes.
func (l *Lanes) N() int { return len(l.counters) }

func (ln *lane) run() {
	defer close(ln.start) // the helpers exit
	l := ln.l
	for {
		t, ok, spec := l.next()
		if !ok {
			// stop closed both queues (q first): serve what is left and exit.
			for t := range l.q {
				ln.serve(t)
			}
			for t := range l.qs {
				ln.serve(t)
			}
			for t := range l.qb {
				ln.serve(t)
			}
			return
		}
		ln.serve(t)
		if spec {
			<-l.specSem
		}
	}
}

// next waits for the lane's next task: a demand request if one is queued,
// else whichever kind comes first — a speculative or background one only
// while the lane holds one of the SpecLanes tokens (spec reports that it
// does; the caller returns it after serving), given back at once for an
// AnyLane request. ok is false once the queues are closed.
func (l *Lanes) next() (t *task, ok, spec bool) {
	select {
	case t, ok = <-l.q: // demand first
		return t, ok, false
	default:
	}
	select {
	case t, ok = <-l.q:
		return t, ok, false
	case l.specSem <- struct{}{}:
	}
	t, ok, demand := l.nextQueued()
	if !ok || demand || t.AnyLane {
		<-l.specSem
		return t, ok, false
	}
	return t, true, true
}

// nextQueued takes the first task by priority — demand, speculative,
// background — among those queued now, or else the first to arrive (demand
// reports that it came from the demand queue).
func (l *Lanes) nextQueued() (t *task, ok, demand bool) {
	select {
	case t, ok = <-l.q:
		return t, ok, true
	default:
	}
	select {
	case t, ok = <-l.qs:
		return t, ok, false
	default:
	}
	select {
	case t, ok = <-l.qb:
		return t, ok, false
	default:
	}
	select {
	case t, ok = <-l.q:
		return t, ok, true
	case t, ok = <-l.qs:
		return t, ok, false
	case t, ok = <-l.qb:
		return t, ok, false
	}
}

func (ln *lane) serve(t *task) {
	if !t.claim() {
		return // withdrawn, or the other copy of a promoted request
	}
	l, c := ln.l, ln.c
	t0 := time.Now()
	var err error
	if err = l.ctx.Err(); err == nil {
		err = ln.read(t)
	}
	c.busy.Add(int64(time.Since(t0)))
	c.reads.Add(1)
	t.Done(err)
	if t.reuse {
		l.putTask(t)
	}
}

// read reads every piece of t, up to PieceParallelism at once (the lane
// goroutine and its helpers), and returns the first error. The helpers are
// done with t before it returns.
func (ln *lane) read(t *task) error {
	ln.cur, ln.first = t, nil
	ln.next.Store(0)
	helpers := min(len(t.pieces), PieceParallelism) - 1
	ln.busy.Add(max(helpers, 0))
	for range helpers {
		ln.start <- struct{}{}
	}
	ln.work()
	ln.busy.Wait()
	ln.cur = nil
	return ln.first
}

// help is a piece helper's loop: join each read the lane starts.
func (ln *lane) help() {
	for range ln.start {
		ln.helpOne()
	}
}

// helpOne joins one read; it is done with it also when it panics (the
// panic goes on to the lanes' WaitGroup, re-raised by Close), so the lane
// waiting in read is not left waiting for it.
func (ln *lane) helpOne() {
	defer ln.busy.Done()
	ln.work()
}

// work reads pieces of the current task until none is left or one fails.
func (ln *lane) work() {
	l, c, t := ln.l, ln.c, ln.cur
	for {
		i := int(ln.next.Add(1)) - 1
		if i >= len(t.pieces) {
			return
		}
		err := l.ctx.Err()
		if err == nil {
			var n int64
			n, err = l.files.readPiece(t.Buf, t.pieces[i], t.Label)
			c.bytes.Add(n)
			c.payload.Add(t.pieces[i].n)
		}
		if err != nil {
			ln.mu.Lock()
			if ln.first == nil {
				ln.first = err
			}
			ln.mu.Unlock()
			ln.next.Store(int32(len(t.pieces))) // stop handing out pieces
			return
		}
	}
}

// Submit queues r, blocking while the queue is full. It returns ctx's error if
// ctx ends first, ErrClosed after Close, or the validation error of a bad
// request (no Done, a bad range, a destination too small or unaligned: the
// Files.ReadRanges errors). When Submit returns nil, r.Done will be called
// exactly once; when it returns an error, r.Done is never called.
func (l *Lanes) Submit(ctx context.Context, r Request) error {
	t, err := l.newTask(r, l.getTask())
	if err != nil {
		return err
	}
	q := l.q
	if r.Speculative {
		q = l.qs
	}
	if err := l.enqueue(ctx, q, t, true); err != nil {
		l.putTask(t)
		return err
	}
	return nil
}

// Offer queues a speculative request (a background one with
// r.Background) only if its queue has room right now; it never blocks, so a
// planner can guess without holding up demand reads. It returns a nil
// Ticket and a nil error when the queue is full (r.Done is then never
// called), and the errors of Submit otherwise.
func (l *Lanes) Offer(r Request) (*Ticket, error) {
	r.Speculative = true
	t, err := l.newTask(r, new(task)) // a Ticket may outlive the read: never reused
	if err != nil {
		return nil, err
	}
	q := l.qs
	if r.Background {
		q = l.qb
	}
	if err := l.enqueue(context.Background(), q, t, false); err != nil {
		if errors.Is(err, errFull) {
			l.refused.Add(1)
			return nil, nil
		}
		return nil, err
	}
	return &Ticket{l: l, t: t}, nil
}

var errFull = errors.New("reader: queue full")

// getTask returns a served demand task to reuse, or a new one.
func (l *Lanes) getTask() *task {
	l.freeMu.Lock()
	defer l.freeMu.Unlock()
	if n := len(l.free); n > 0 {
		t := l.free[n-1]
		l.free = l.free[:n-1]
		return t
	}
	return &task{reuse: true}
}

// putTask keeps t (served, or never queued) for a later Submit.
func (l *Lanes) putTask(t *task) {
	t.Request = Request{}
	t.pieces = t.pieces[:0]
	t.claimed.Store(false)
	l.freeMu.Lock()
	l.free = append(l.free, t)
	l.freeMu.Unlock()
}

// newTask fills t with r and its pieces; on error t goes back to the free
// list if it came from there.
func (l *Lanes) newTask(r Request, t *task) (*task, error) {
	err := l.files.check(r.Buf, r.Ranges, r.Label)
	if r.Done == nil {
		err = errors.New("reader: Submit: request without Done callback")
	}
	if err != nil {
		if t.reuse {
			l.putTask(t)
		}
		return nil, err
	}
	t.Request = r
	forPieces(r.Ranges, laneChunkBytes, func(p piece) bool {
		if p.n > 0 {
			t.pieces = append(t.pieces, p)
		}
		return true
	})
	return t, nil
}

// enqueue puts t on q; if q is full it blocks until ctx ends when block is
// set, and returns errFull at once otherwise.
func (l *Lanes) enqueue(ctx context.Context, q chan *task, t *task, block bool) error {
	l.mu.Lock()
	if l.closed {
		l.mu.Unlock()
		return ErrClosed
	}
	if err := l.ctx.Err(); err != nil {
		l.mu.Unlock()
		return fmt.Errorf("%w: %w", ErrClosed, err)
	}
	l.submitters.Add(1)
	l.mu.Unlock()
	defer l.submitters.Done()
	select {
	case q <- t:
		return nil
	default:
	}
	if !block {
		return errFull
	}
	select {
	case q <- t:
		return nil
	case <-ctx.Done():
		return ctx.Err()
	}
}

// Close stops accepting requests, lets the lanes finish (or, if their context
// is cancelled, fail) the queued ones and waits for every lane to exit. It is
// idempotent. A Submit blocked on a full queue when Close is called still gets
// its request in (the lanes keep draining), so Close cannot deadlock on it.
func (l *Lanes) Close() {
	l.closeOnce.Do(func() {
		close(l.closing)
		l.stop()
		l.wg.Wait()
	})
}

// stop closes the queue once no Submit is in progress; the lanes exit when it
// is drained. Called by Close and when the lanes' context ends.
func (l *Lanes) stop() {
	l.stopOnce.Do(func() {
		l.mu.Lock()
		l.closed = true
		l.mu.Unlock()
		l.submitters.Wait()
		close(l.q)
		close(l.qs)
		close(l.qb)
	})
}

// Stats returns the cumulative counters.
// Totals returns the busy time and bytes moved summed over the lanes, as
// Stats does, without allocating (the per-token metrics read it).
func (l *Lanes) Totals() (busy time.Duration, bytes int64) {
	for i := range l.counters {
		busy += time.Duration(l.counters[i].busy.Load())
		bytes += l.counters[i].bytes.Load()
	}
	return busy, bytes
}

func (l *Lanes) Stats() Stats {
	s := Stats{Lanes: make([]LaneStats, len(l.counters)),
		Withdrawn: l.withdrawn.Load(), Promoted: l.promoted.Load(), Refused: l.refused.Load()}
	for i := range l.counters {
		c := &l.counters[i]
		ls := LaneStats{
			Busy:    time.Duration(c.busy.Load()),
			Bytes:   c.bytes.Load(),
			Payload: c.payload.Load(),
			Reads:   c.reads.Load(),
		}
		s.Lanes[i] = ls
		s.Busy += ls.Busy
		s.Bytes += ls.Bytes
		s.Payload += ls.Payload
		s.Reads += ls.Reads
	}
	return s
}
