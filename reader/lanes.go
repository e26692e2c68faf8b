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

// Request is one read job for a lane: all of Ranges into Buf (layout as in the
// package comment). Done is called exactly once, from the lane goroutine, with
// nil or the error; it must not block for long (it holds up the lane).
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

// Lanes is the pool of reader goroutines (--io-threads).
type Lanes struct {
	files *Files
	ctx   context.Context
	q     chan Request
	wg    conc.WaitGroup

	mu         sync.Mutex
	closed     bool
	submitters sync.WaitGroup
	closeOnce  sync.Once

	counters []laneCounters
}

// DefaultQueue is the queue length StartLanes uses when queue <= 0: enough for
// a layer's worth of misses of a top-8 model at any lane count.
const DefaultQueue = 64

// StartLanes starts n lane goroutines reading from files. queue bounds the
// number of accepted-but-unstarted requests (<= 0: DefaultQueue). When ctx is
// cancelled the lanes stop reading: requests not yet started complete with
// ctx.Err() (a read in progress finishes first). The caller must call Close.
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
		q:        make(chan Request, queue),
		counters: make([]laneCounters, n),
	}
	for i := range n {
		c := &l.counters[i]
		l.wg.Go(func() { l.run(c) })
	}
	return l, nil
}

// N returns the number of lanes.
func (l *Lanes) N() int { return len(l.counters) }

// Files returns the files the lanes read.
func (l *Lanes) Files() *Files { return l.files }

func (l *Lanes) run(c *laneCounters) {
	for r := range l.q {
		if err := l.ctx.Err(); err != nil {
			r.Done(err)
			continue
		}
		t0 := time.Now()
		n, err := l.files.ReadRanges(r.Buf, r.Ranges, r.Label)
		c.busy.Add(int64(time.Since(t0)))
		c.bytes.Add(n)
		var p int64
		for _, rg := range r.Ranges {
			p += rg.Len
		}
		c.payload.Add(p)
		c.reads.Add(1)
		r.Done(err)
	}
}

// Submit queues r, blocking while the queue is full. It returns ctx's error if
// ctx ends first, ErrClosed after Close, or an error for a request without
// Done. When Submit returns nil, r.Done will be called exactly once; when it
// returns an error, r.Done is never called.
func (l *Lanes) Submit(ctx context.Context, r Request) error {
	if r.Done == nil {
		return errors.New("reader: Submit: request without Done callback")
	}
	l.mu.Lock()
	if l.closed {
		l.mu.Unlock()
		return ErrClosed
	}
	l.submitters.Add(1)
	l.mu.Unlock()
	defer l.submitters.Done()
	select {
	case l.q <- r:
		return nil
	default:
	}
	select {
	case l.q <- r:
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
		l.mu.Lock()
		l.closed = true
		l.mu.Unlock()
		l.submitters.Wait()
		close(l.q)
		l.wg.Wait()
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
