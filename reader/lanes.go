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
// the package comment). Done is called exactly once, from the lane goroutine
// that finished the last piece, with nil or the first error; it must not block
// for long (it holds up the lane).
type Request struct {
	Buf    []byte
	Ranges []Range
	Label  string // names the read in errors, e.g. "layer 3 expert 17"
	Done   func(err error)
}

// LaneStats are one lane's cumulative counters.
type LaneStats struct {
	Busy    time.Duration // time spent inside reads
	Bytes   int64         // bytes transferred from the files (widened with O_DIRECT)
	Payload int64         // bytes the requests asked for (sum of range lengths)
	Reads   int64         // requests served (including failed ones)
}

// Stats are the cumulative counters of all lanes; take deltas per token.
type Stats struct {
	LaneStats             // sums over lanes (Busy summed: can exceed wall time)
	Lanes     []LaneStats // per lane
}

type laneCounters struct {
	busy, bytes, payload, reads atomic.Int64
	_                           [32]byte // keep lanes off one cache line
}

// Lanes is the pool of reader goroutines (--io-threads). N lanes keep up to N
// preads in flight: a lane that takes a request hands the request's other
// pieces (one per range, large ranges cut in 4 MiB pieces) to idle lanes, so
// even a single expert's gate, up and down slices are read in parallel when
// the lanes are not saturated; when all lanes are busy each reads its own
// requests' pieces back to back.
type Lanes struct {
	files *Files
	ctx   context.Context
	q     chan *task   // accepted requests, bounded
	sub   chan job     // pieces handed between lanes
	idle  atomic.Int32 // lanes waiting for work
	wg    conc.WaitGroup

	mu         sync.Mutex
	closed     bool
	submitters sync.WaitGroup
	stopOnce   sync.Once
	closeOnce  sync.Once
	closing    chan struct{}

	counters []laneCounters
}

// task is an accepted request being read.
type task struct {
	Request
	pieces    []piece
	remaining atomic.Int32
	mu        sync.Mutex
	err       error
}

type job struct {
	t *task
	p int
}

// DefaultQueue is the queue length StartLanes uses when queue <= 0: enough for
// a layer's worth of misses of a top-8 model at any lane count.
const DefaultQueue = 64

// StartLanes starts n lane goroutines reading from files. queue bounds the
// number of accepted-but-unstarted requests (<= 0: DefaultQueue). When ctx is
// cancelled the lanes stop reading and exit: pieces not yet started complete
// with ctx.Err() (preads in progress finish first) and Submit returns
// ErrClosed. The caller must still call Close, which waits for the lanes.
func StartLanes(ctx context.Context, files *Files, n, queue int) (*Lanes, error) {
	if n <= 0 {
		return nil, fmt.Errorf("reader: --io-threads must be positive, got %d", n)
	}
	if files == nil {
		return nil, errors.New("reader: StartLanes: nil files")
	}
	if queue <= 0 {
		queue = DefaultQueue
	}
	l := &Lanes{
		files:    files,
		ctx:      ctx,
		q:        make(chan *task, queue),
		sub:      make(chan job, handOff*n),
		counters: make([]laneCounters, n),
		closing:  make(chan struct{}),
	}
	for i := range n {
		c := &l.counters[i]
		l.wg.Go(func() { l.run(c) })
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

// Files returns the files the lanes read.
func (l *Lanes) Files() *Files { return l.files }

func (l *Lanes) run(c *laneCounters) {
	var own []int // pieces this lane could not hand out
	for {
		var j job
		select {
		case j = <-l.sub: // pieces already started take priority
		default:
			l.idle.Add(1)
			select {
			case j = <-l.sub:
				l.idle.Add(-1)
			case t, ok := <-l.q:
				l.idle.Add(-1)
				if !ok {
					// Closed and drained. Pieces this lane handed out may still
					// be queued: finish them before leaving.
					for {
						select {
						case j := <-l.sub:
							l.do(c, j)
						default:
							return
						}
					}
				}
				if len(t.pieces) == 0 {
					c.reads.Add(1)
					t.Done(nil)
					continue
				}
				// Hand pieces to idle lanes only: when every lane is busy the
				// hand-off would add wake-ups and no parallelism.
				own = own[:0]
				idle := l.idle.Load()
				for p := 1; p < len(t.pieces); p++ {
					if idle > 0 {
						select {
						case l.sub <- job{t, p}:
							idle--
							continue
						default:
						}
					}
					own = append(own, p)
				}
				j = job{t, 0}
				l.do(c, j)
				for _, p := range own {
					l.do(c, job{t, p})
				}
				continue
			}
		}
		l.do(c, j)
	}
}

// do reads one piece and completes the request if it was the last one.
func (l *Lanes) do(c *laneCounters, j job) {
	t := j.t
	p := t.pieces[j.p]
	err := l.ctx.Err()
	if err == nil {
		t0 := time.Now()
		var n int64
		n, err = l.files.readPiece(t.Buf, p, t.Label)
		c.busy.Add(int64(time.Since(t0)))
		c.bytes.Add(n)
		c.payload.Add(p.n)
	}
	if err != nil {
		t.mu.Lock()
		if t.err == nil {
			t.err = err
		}
		t.mu.Unlock()
	}
	if t.remaining.Add(-1) == 0 {
		c.reads.Add(1)
		t.mu.Lock()
		err := t.err
		t.mu.Unlock()
		t.Done(err)
	}
}

// Submit queues r, blocking while the queue is full. It returns ctx's error if
// ctx ends first, ErrClosed after Close, or the validation error of a bad
// request (no Done, a bad range, a destination too small or unaligned: the
// Files.ReadRanges errors). When Submit returns nil, r.Done will be called
// exactly once; when it returns an error, r.Done is never called.
func (l *Lanes) Submit(ctx context.Context, r Request) error {
	if r.Done == nil {
		return errors.New("reader: Submit: request without Done callback")
	}
	if err := l.files.check(r.Buf, r.Ranges, r.Label); err != nil {
		return err
	}
	t := &task{Request: r}
	forPieces(r.Ranges, laneChunkBytes, func(p piece) bool {
		if p.n > 0 {
			t.pieces = append(t.pieces, p)
		}
		return true
	})
	t.remaining.Store(int32(len(t.pieces)))
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
	case l.q <- t:
		return nil
	default:
	}
	select {
	case l.q <- t:
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
	})
}

// Stats returns the cumulative counters.
func (l *Lanes) Stats() Stats {
	s := Stats{Lanes: make([]LaneStats, len(l.counters))}
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

// handOff is the per-lane capacity of the piece hand-off channel (0: a lane
// reads all pieces of the requests it takes).
var handOff = 8
