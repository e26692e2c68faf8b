package anon

import (
	"sync"
	"sync/atomic"

	"github.com/sourcegraph/conc"
)

// PrefaultStep is how much a Prefaulter faults in per system call, so that
// Close waits for at most one step.
const PrefaultStep = 32 << 20

// A Prefaulter faults a mapping's pages in on a goroutine of its own, ahead
// of the point its owner uses the mapping up to (Use), so that the first write
// into a page does not pay for the fault. That matters for O_DIRECT reads:
// when their destination pages are not yet present, the read faults them in
// page by page inside the system call, and several reader lanes faulting the
// same mapping at once serialize in the kernel (docs/measurements.md,
// "Figures from code comments", has the development VM's numbers).
//
// Faulting uses MADV_POPULATE_WRITE, which never changes a page's contents,
// so it is safe while other goroutines (or the device) write the pages it
// covers. It is best effort: where the kernel lacks it (non-Linux, Linux
// before 5.14) or refuses it, the Prefaulter stops (GaveUp, and GivenUp is
// closed) and pages are faulted by
// their first write, as without it. It never faults beyond the mapping nor
// more than Ahead bytes past the highest Use, so memory is committed only
// shortly before it is needed.
//
// Use, Faulted and Progress are safe for concurrent use and never block;
// Close stops and waits for the goroutine and must be called before the
// mapping is unmapped.
type Prefaulter struct {
	mem   []byte
	ahead int64
	want  atomic.Int64  // bytes to have faulted in
	done  atomic.Int64  // bytes faulted in
	quit  chan struct{} // closed when the kernel refused a populate: the Prefaulter stopped for good
	kick  chan struct{}
	stop  chan struct{}
	wg    conc.WaitGroup

	mu       sync.Mutex
	progress chan struct{} // closed (and replaced) when done grows; closed for good when run returns
	ended    bool          // run returned: Progress hands out a closed channel
}

// NewPrefaulter starts a Prefaulter over mem (a mapping from Map, or a page
// aligned part of one) that keeps ahead bytes faulted in past the highest
// Use.
func NewPrefaulter(mem []byte, ahead int64) *Prefaulter {
	p := &Prefaulter{mem: mem, ahead: ahead, quit: make(chan struct{}), kick: make(chan struct{}, 1), stop: make(chan struct{}),
		progress: make(chan struct{})}
	p.wg.Go(p.run)
	return p
}

// Use says the mapping's first n bytes are in use or about to be: the
// Prefaulter faults in up to n+Ahead bytes.
func (p *Prefaulter) Use(n int64) {
	w := min(n+p.ahead, int64(len(p.mem)))
	for {
		cur := p.want.Load()
		if w <= cur {
			return
		}
		if p.want.CompareAndSwap(cur, w) {
			break
		}
	}
	select {
	case p.kick <- struct{}{}:
	default:
	}
}

// Faulted returns how many bytes from the mapping's start have been faulted
// in.
func (p *Prefaulter) Faulted() int64 { return p.done.Load() }

// GaveUp reports whether the Prefaulter stopped because the kernel lacks or
// refused MADV_POPULATE_WRITE: Faulted will not grow any more, and pages
// are faulted in by their first write.
func (p *Prefaulter) GaveUp() bool {
	select {
	case <-p.quit:
		return true
	default:
		return false
	}
}

// Progress returns a channel that is closed the next time Faulted grows,
// or at once when it never will again: the whole mapping is faulted in, or
// the Prefaulter gave up or was closed. A caller waiting for pages takes
// the channel before it checks Faulted, so that no advance is missed.
func (p *Prefaulter) Progress() <-chan struct{} {
	p.mu.Lock()
	defer p.mu.Unlock()
	if p.ended || p.done.Load() >= int64(len(p.mem)) {
		return closedChan
	}
	return p.progress
}

// advanced stores how far the mapping is faulted in and wakes the waiters
// of Progress.
func (p *Prefaulter) advanced(at int64) {
	p.done.Store(at)
	p.mu.Lock()
	close(p.progress)
	p.progress = make(chan struct{})
	p.mu.Unlock()
}

// finish wakes the waiters of Progress for good: run has returned.
func (p *Prefaulter) finish() {
	p.mu.Lock()
	p.ended = true
	close(p.progress)
	p.mu.Unlock()
}

var closedChan = func() chan struct{} {
	c := make(chan struct{})
	close(c)
	return c
}()

// GivenUp returns a channel that is closed when the Prefaulter gives up
// (GaveUp turns true); it stays open while the Prefaulter works or after
// Close.
func (p *Prefaulter) GivenUp() <-chan struct{} { return p.quit }

// Close stops the Prefaulter and waits for its goroutine. Call it once.
func (p *Prefaulter) Close() {
	close(p.stop)
	p.wg.Wait()
}

func (p *Prefaulter) run() {
	yieldCPU() // faulting waits for idle CPU time rather than slowing compute
	defer p.finish()
	var at int64
	for {
		select {
		case <-p.stop:
			return
		case <-p.kick:
		}
		for at < p.want.Load() {
			select {
			case <-p.stop:
				return
			default:
			}
			end := min(at+PrefaultStep, p.want.Load())
			end = min((end+PageSize-1)&^(PageSize-1), int64(len(p.mem)))
			if populate(p.mem[at:end]) != nil {
				close(p.quit)
				return // unsupported or refused: first writes fault the rest
			}
			at = end
			p.advanced(at)
		}
	}
}
