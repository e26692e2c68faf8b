package sink

import (
	"fmt"
	"io"
	"sync"

	"github.com/sourcegraph/conc"

	"github.com/pipe-engine/pipe/metrics"
)

// RowBuffer is the capacity of the channel from Token to the writer
// goroutine: a slow disk or terminal delays decode only once this many rows
// wait; then Token blocks (rows are never dropped).
const RowBuffer = 256

// writer is the sink's stage goroutine: it formats and writes CSV rows and
// redraws the status line, in Token order, from a bounded channel. It owns
// its buffer; the first write error is kept for Token and Close to report.
type writer struct {
	in   chan rowItem
	w    io.Writer // nil: no CSV
	name string
	prog *Progress
	buf  []byte
	wg   conc.WaitGroup

	mu  sync.Mutex
	err error
}

func newWriter(w io.Writer, name string, prog *Progress) *writer {
	wr := &writer{in: make(chan rowItem, RowBuffer), w: w, name: name, prog: prog}
	wr.wg.Go(wr.run)
	return wr
}

// rowItem is a row to write, or (flushed non-nil) a marker closed once every
// row before it is written.
type rowItem struct {
	m       metrics.Token
	flushed chan struct{}
}

func (wr *writer) run() {
	for it := range wr.in {
		if it.flushed != nil {
			close(it.flushed)
			continue
		}
		m := it.m
		if wr.w != nil && wr.failed() == nil {
			wr.buf = appendRow(wr.buf[:0], &m)
			if _, err := wr.w.Write(wr.buf); err != nil {
				wr.mu.Lock()
				wr.err = fmt.Errorf("sink: --csv %s: token %d: %w", wr.name, m.Step, err)
				wr.mu.Unlock()
			}
		}
		wr.prog.Update(m)
	}
}

// flush waits until every row sent before it is written.
func (wr *writer) flush() error {
	done := make(chan struct{})
	wr.in <- rowItem{flushed: done}
	<-done
	return wr.failed()
}

// failed is the first write error so far.
func (wr *writer) failed() error {
	wr.mu.Lock()
	defer wr.mu.Unlock()
	return wr.err
}

// close lets the goroutine write every queued row, waits for it (a panic in
// it is re-raised here) and returns the first write error.
func (wr *writer) close() error {
	close(wr.in)
	wr.wg.Wait()
	return wr.failed()
}

// AsyncWriter is the log stage: Write copies each line into a bounded
// channel and a goroutine writes them to the underlying writer in order, so
// a slow or blocked stderr (a pipe nobody reads) does not stall the caller
// until lines capacity is used up; then Write blocks (nothing is dropped).
// Sync waits until every line queued before it is written (a caller that
// writes to the same destination directly, such as a chat prompt, comes
// after them). Close writes what is queued and returns the first write
// error. Safe for concurrent use; Write after Close fails with ErrClosed.
type AsyncWriter struct {
	ch chan logItem
	w  io.Writer
	wg conc.WaitGroup

	mu     sync.RWMutex // Write holds it shared while it sends; Close exclusively
	closed bool
	errMu  sync.Mutex
	err    error
}

// logItem is a queued line, or a Sync's mark (synced set, p nil).
type logItem struct {
	p      []byte
	synced chan struct{} // closed by the writer goroutine when it reaches the mark
}

// NewAsyncWriter starts the goroutine writing to w.
func NewAsyncWriter(w io.Writer, lines int) *AsyncWriter {
	a := &AsyncWriter{ch: make(chan logItem, max(lines, 1)), w: w}
	a.wg.Go(func() {
		for it := range a.ch {
			if it.synced != nil {
				close(it.synced)
				continue
			}
			if _, err := a.w.Write(it.p); err != nil {
				a.errMu.Lock()
				if a.err == nil {
					a.err = err
				}
				a.errMu.Unlock()
			}
		}
	})
	return a
}

// Write queues a copy of p.
func (a *AsyncWriter) Write(p []byte) (int, error) {
	a.mu.RLock()
	defer a.mu.RUnlock()
	if a.closed {
		return 0, ErrClosed
	}
	a.ch <- logItem{p: append([]byte(nil), p...)}
	return len(p), nil
}

// Sync returns once every line queued before the call has been written (or
// failed; Close reports the error), at once after Close. It waits for the
// destination as long as those lines do: a stderr nobody reads holds it up.
func (a *AsyncWriter) Sync() {
	a.mu.RLock()
	if a.closed {
		a.mu.RUnlock()
		return
	}
	done := make(chan struct{})
	a.ch <- logItem{synced: done}
	a.mu.RUnlock()
	<-done
}

// Close writes every queued line, stops the goroutine and returns the first
// write error. Later calls return nil.
func (a *AsyncWriter) Close() error {
	a.mu.Lock()
	if a.closed {
		a.mu.Unlock()
		return nil
	}
	a.closed = true
	close(a.ch)
	a.mu.Unlock()
	a.wg.Wait()
	a.errMu.Lock()
	defer a.errMu.Unlock()
	return a.err
}

var _ io.WriteCloser = (*AsyncWriter)(nil)
