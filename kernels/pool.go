package kernels

import (
	"fmt"
	"runtime"
	"runtime/debug"
	"sync"
	"sync/atomic"
	"time"

	"github.com/pipe-engine/pipe/quant"
)

// Pool runs products on a fixed set of persistent worker goroutines (the
// calling goroutine is one of the threads; Threads()-1 helpers live as long
// as the Pool, no goroutine is started per call). After a job a helper spins
// for spinWait (decode issues products back to back) and then parks on its
// channel; the caller likewise spins briefly before blocking on the helpers.
// A product's rows are cut into chunks; each thread starts with a
// contiguous share of them and steals the back half of another's share when
// its own runs out (split.go). A helper that has not claimed the call by the
// time the caller has run out of units is not waited for: the caller takes
// the job back (a helper still waking on a virtual machine's idle vCPU, or
// waiting for a processor a reader lane's pread holds, would otherwise cost
// the call its whole delay). Every output element is computed by the same
// single-row kernel whatever the split, so results are identical for any
// thread count. Calls are
// serialized by a mutex, so a Pool is safe for concurrent use; Close stops
// the helpers. A panic on any thread of a call (helpers run with
// debug.SetPanicOnFault, so a fault on a mapped file that shrank is one) is
// re-raised on the calling goroutine after every helper is done with the
// call, leaving the pool usable.
type Pool struct {
	threads int

	mu      sync.Mutex // held for a whole call
	closed  bool
	helpers []*helper
	done    sync.WaitGroup // helpers still running the current job
	exited  sync.WaitGroup // helpers still alive

	job    job
	act    Activation     // MatVec's quantized x
	single [1]*Activation // the one activation of MatVec/MatVecQ
	batch  []*Activation  // MatMul's quantized x, grown on demand
	bat    batchState     // MatVecs' products and chunks

	// retracted counts jobs taken back from a helper that had not claimed
	// them by the time the caller ran out of units (TestUnclaimedJob).
	retracted atomic.Int64
}

// job is one product; its fields are written by the caller before helpers are
// woken (the channel send publishes them) and only read afterwards.
type job struct {
	fn    func(i int)    // Parallel's body; nil for products
	fnT   func(t, i int) // ParallelWith's body
	dot   dotFunc
	rowsF rowsFunc
	w     []byte
	rb    int
	rows  int
	acts  []*Activation
	y     []float32
	chunk int
	// spans are the threads' shares of the job's units (split.go); the
	// first active are in use.
	spans  []span
	active int
	shared bool // every thread takes from spans[0] (ParallelWith)
	// pending counts helpers still on this job (spun on by the caller
	// before it blocks on Pool.done).
	pending atomic.Int32
	gemm    gemmJob // multi-token tiles and packed activations, if used
	// fault is the first panic a helper caught on this job (a memory fault
	// on a mapped file that shrank, with SetPanicOnFault); the caller
	// re-raises it on its own goroutine once every helper is done.
	fault atomic.Pointer[caught]
}

// caught boxes a recovered panic value.
type caught struct{ v any }

// runCaught runs the job and returns the panic it raised, if any, instead of
// unwinding (so the caller can wait for its helpers first).
func (j *job) runCaught(self int) (c *caught) {
	defer func() {
		if r := recover(); r != nil {
			c = &caught{r}
		}
	}()
	j.run(self)
	return nil
}

// finish re-raises, on the calling goroutine, a panic the caller or a helper
// caught while running the job; every helper is done with it.
func (j *job) finish(c *caught) {
	if h := j.fault.Swap(nil); c == nil {
		c = h
	}
	if c != nil {
		panic(c.v)
	}
}

// helper states
const (
	parked   = 0 // blocked on wake
	spinning = 1 // polling state for work
	working  = 2 // handed a job it has not claimed yet
	running  = 3 // running the job (claimed: the caller waits for it)
)

type helper struct {
	id    int // thread index (the caller is 0)
	state atomic.Int32
	wake  chan struct{} // capacity 1: a wake-up never blocks the caller
}

// spinWait bounds the busy-waiting of helpers between jobs and of the caller
// for the last helper.
const spinWait = 30 * time.Microsecond

// spin polls cond until it is true (returns true) or spinWait passes.
func spin(cond func() bool) bool {
	start := time.Now()
	for i := 1; ; i++ {
		if cond() {
			return true
		}
		if i%64 == 0 {
			if time.Since(start) > spinWait {
				return false
			}
			runtime.Gosched()
		}
	}
}

// parallelMinBytes: below this many weight bytes × vectors a product runs on
// the calling goroutine only (waking helpers would cost more than it saves).
// A variable so tests can force tiny products onto every thread.
var parallelMinBytes = 64 << 10

// chunkBytes is the target amount of weight bytes per work unit.
const chunkBytes = 32 << 10

// rowGroup is how many rows the multi-row dot kernels take at once.
const rowGroup = 4

// groupChunk rounds a chunk of more than one row group down to whole
// groups, so that only a product's last chunk leaves rows to the
// single-row kernel. Results do not depend on it: every row's dot is
// bit-identical whichever kernel computes it.
func groupChunk(chunk int) int {
	if chunk > rowGroup {
		chunk -= chunk % rowGroup
	}
	return chunk
}

// NewPool starts a pool of threads threads (values < 1 mean 1).
func NewPool(threads int) *Pool {
	if threads < 1 {
		threads = 1
	}
	p := &Pool{threads: threads}
	p.bat.run = p.bat.runChunk
	p.job.spans = make([]span, threads)
	for i := 1; i < threads; i++ {
		h := &helper{id: i, wake: make(chan struct{}, 1)}
		h.state.Store(spinning)
		p.helpers = append(p.helpers, h)
		p.exited.Add(1)
		go p.loop(h)
	}
	return p
}

func (p *Pool) loop(h *helper) {
	defer p.exited.Done()
	// A fault reading a mapped model that shrank under the run panics
	// (recovered below and re-raised on the caller) instead of killing the
	// process.
	debug.SetPanicOnFault(true)
	// Only this loop moves spinning→parked and working→running. A parked
	// helper waits for start's wake token (a wake that finds the state
	// still parked is not for a job: a guard, start sends one token per
	// park). A failed claim means the caller took the job back before this
	// helper got to it (retract): it had run every unit itself.
	for {
		if !spin(func() bool { return h.state.Load() == working }) && h.state.CompareAndSwap(spinning, parked) {
			for {
				if _, ok := <-h.wake; !ok {
					return // closed
				}
				if h.state.Load() != parked {
					break
				}
			}
		}
		if !h.state.CompareAndSwap(working, running) {
			continue
		}
		if c := p.job.runCaught(h.id); c != nil {
			p.job.fault.CompareAndSwap(nil, c)
		}
		h.state.Store(spinning)
		p.job.pending.Add(-1)
		p.done.Done()
	}
}

// start hands the current job to h.
func (h *helper) start() {
	if h.state.CompareAndSwap(spinning, working) {
		return
	}
	h.state.Store(working) // parked (or parking): wake it
	select {
	case h.wake <- struct{}{}:
	default: // a token is already there (a guard): it wakes h
	}
}

// retract takes the job back from h if h has not claimed it, reporting
// whether it did: the caller has run out of units, so a helper that has not
// started (parked, or waiting for a processor) is not waited for.
func (h *helper) retract() bool { return h.state.CompareAndSwap(working, spinning) }

// Threads is the number of threads products run on.
func (p *Pool) Threads() int { return p.threads }

// Close stops the helper goroutines and waits for them. Calls after Close
// fail with ErrClosed. Close is idempotent.
func (p *Pool) Close() {
	p.mu.Lock()
	defer p.mu.Unlock()
	if p.closed {
		return
	}
	p.closed = true
	for _, h := range p.helpers {
		close(h.wake)
	}
	p.exited.Wait()
}

// unit runs work unit u on thread self: one index of Parallel or
// ParallelWith, or the rows [u·chunk, (u+1)·chunk) of a product.
func (j *job) unit(self, u int) {
	if j.fn != nil {
		j.fn(u)
		return
	}
	if j.fnT != nil {
		j.fnT(self, u)
		return
	}
	r0 := u * j.chunk
	r1 := min(r0+j.chunk, j.rows)
	if len(j.acts) == 1 {
		a := j.acts[0]
		y := j.y
		if j.rowsF != nil {
			j.rowsF(j.w[r0*j.rb:r1*j.rb], j.rb, a, y[r0:r1])
			return
		}
		for r := r0; r < r1; r++ {
			y[r] = j.dot(j.w[r*j.rb:(r+1)*j.rb], a)
		}
		return
	}
	if j.gemm.on() {
		j.runGEMM(r0, r1)
		return
	}
	if j.rowsF != nil {
		// The chunk's rows (≈ chunkBytes/n) stay in cache while each
		// vector runs the same multi-row kernel MatVec uses, so every
		// output equals MatVec's bit for bit and memory reads them once.
		for v, a := range j.acts {
			j.rowsF(j.w[r0*j.rb:r1*j.rb], j.rb, a, j.y[v*j.rows+r0:v*j.rows+r1])
		}
		return
	}
	for r := r0; r < r1; r++ {
		row := j.w[r*j.rb : (r+1)*j.rb]
		for v, a := range j.acts {
			j.y[v*j.rows+r] = j.dot(row, a)
		}
	}
}

// execute runs the prepared job on as many threads as it is worth.
func (p *Pool) execute(t quant.Type, w []byte, rb, rows int, acts []*Activation, y []float32) {
	j := &p.job
	j.prepare(t, w, rb, rows, acts, y)
	work := rb * rows * len(acts)
	helpers := 0
	if p.threads > 1 && work >= parallelMinBytes {
		// a multi-token kernel reads each chunk's rows once per tile
		// from cache, so chunks stay at chunkBytes of weights
		perRow := rb * len(acts)
		if j.gemm.on() {
			perRow = rb
		}
		chunk := max(1, chunkBytes/perRow)
		// at least 4 chunks per thread for balance when other processes
		// compete for the cores
		chunk = groupChunk(min(chunk, max(1, rows/(4*p.threads))))
		j.chunk = chunk
		nchunks := (rows + chunk - 1) / chunk
		helpers = min(p.threads-1, nchunks-1)
	} else {
		j.chunk = max(rows, 1)
	}
	c := p.dispatch((rows+j.chunk-1)/j.chunk, helpers)
	j.release()
	j.finish(c)
}

// prepare sets the job up for one product.
func (j *job) prepare(t quant.Type, w []byte, rb, rows int, acts []*Activation, y []float32) {
	j.dot = impl.dots[t]
	j.rowsF = impl.rows[t]
	j.w, j.rb, j.rows, j.acts, j.y = w, rb, rows, acts, y
	j.gemm.prepare(impl, t, acts, rows)
}

// release drops the product's borrowed weights, activations and outputs.
func (j *job) release() { j.w, j.acts, j.y = nil, nil, nil }

// dispatch deals the prepared job's n units to the caller and helpers
// helpers, runs them, and returns the panic the caller caught, if any, once
// every helper is done with the job.
func (p *Pool) dispatch(n, helpers int) *caught {
	j := &p.job
	if j.fnT != nil {
		j.queue(n, helpers+1)
	} else {
		j.deal(n, helpers+1)
	}
	p.done.Add(helpers)
	j.pending.Store(int32(helpers))
	for _, h := range p.helpers[:helpers] {
		h.start()
	}
	c := j.runCaught(0)
	if helpers > 0 {
		// Every unit is done or held by a helper that claimed the job:
		// the others are released unstarted, so a helper still waking
		// (a VM's idle vCPU, a processor a lane's pread holds) costs
		// nothing here.
		for _, h := range p.helpers[:helpers] {
			if h.retract() {
				p.retracted.Add(1)
				j.pending.Add(-1)
				p.done.Done()
			}
		}
		spin(func() bool { return j.pending.Load() == 0 })
		p.done.Wait()
	}
	return c
}

// Parallel calls fn(i) for every i in [0, n) on the pool's threads (the
// caller included) and returns when all calls have returned. Each index is
// handed to exactly one call; fn must be safe to run concurrently for
// distinct indices and must not call back into the pool. It is how work
// other than products (attention heads) shares the same persistent threads.
func (p *Pool) Parallel(n int, fn func(i int)) error {
	if n <= 0 {
		return nil
	}
	if uint64(n) > maxUnits {
		return fmt.Errorf("%w: Parallel over %d indices, at most %d", ErrShape, n, uint64(maxUnits))
	}
	p.mu.Lock()
	defer p.mu.Unlock()
	if p.closed {
		return ErrClosed
	}
	p.parallelLocked(n, p.threads, fn)
	return nil
}

// ParallelWith is Parallel for bodies that need per-thread state: fn also
// receives the index t (0 ≤ t < Threads()) of the thread running the call,
// and calls running at the same time have distinct t (so fn may use scratch
// indexed by t, such as one Local per thread to multiply with). Unlike
// Parallel, which gives each thread a contiguous share, the indices are
// handed out one at a time in increasing order to whichever thread is free:
// a caller that orders its work largest first gets a balanced finish.
func (p *Pool) ParallelWith(n int, fn func(t, i int)) error {
	if n <= 0 {
		return nil
	}
	if uint64(n) > maxUnits {
		return fmt.Errorf("%w: ParallelWith over %d indices, at most %d", ErrShape, n, uint64(maxUnits))
	}
	p.mu.Lock()
	defer p.mu.Unlock()
	if p.closed {
		return ErrClosed
	}
	j := &p.job
	j.fnT = fn
	c := p.dispatch(n, min(p.threads-1, n-1))
	j.fnT = nil
	j.finish(c)
	return nil
}

// parallelLocked runs fn(i) for i < n (n > 0) on up to threads threads; the
// caller holds p.mu.
func (p *Pool) parallelLocked(n, threads int, fn func(i int)) {
	j := &p.job
	j.fn = fn
	c := p.dispatch(n, min(threads-1, n-1))
	j.fn = nil
	j.finish(c)
}

// MatVec computes y[r] = row_r(w) · x for r < rows, where w holds rows rows
// of cols elements of type t. x is quantized once (ActivationType).
// len(x) == cols, len(y) >= rows.
func (p *Pool) MatVec(t quant.Type, w []byte, rows, cols int, x []float32, y []float32) error {
	rb, err := rowBytes(t, w, rows, cols)
	if err != nil {
		return err
	}
	if len(x) != cols {
		return fmt.Errorf("%w: x has %d elements, want %d", ErrShape, len(x), cols)
	}
	if len(y) < rows {
		return fmt.Errorf("%w: y has %d elements, want %d", ErrShape, len(y), rows)
	}
	p.mu.Lock()
	defer p.mu.Unlock()
	if p.closed {
		return ErrClosed
	}
	if err := p.act.Quantize(t, x); err != nil {
		return err
	}
	p.single[0] = &p.act
	p.execute(t, w, rb, rows, p.single[:], y)
	return nil
}

// MatVecQ is MatVec with an activation prepared by QuantizeActivation for
// rows of type t (so one quantized x can serve several matrices with the
// same cols, such as an expert's gate and up projections).
func (p *Pool) MatVecQ(t quant.Type, w []byte, rows, cols int, a *Activation, y []float32) error {
	rb, err := rowBytes(t, w, rows, cols)
	if err != nil {
		return err
	}
	if err := checkAct(t, cols, a); err != nil {
		return err
	}
	if len(y) < rows {
		return fmt.Errorf("%w: y has %d elements, want %d", ErrShape, len(y), rows)
	}
	p.mu.Lock()
	defer p.mu.Unlock()
	if p.closed {
		return ErrClosed
	}
	p.single[0] = a
	p.execute(t, w, rb, rows, p.single[:], y)
	p.single[0] = nil
	return nil
}

// MatMul computes n products at once: x is n vectors of cols elements
// (row-major, n×cols), y receives n vectors of rows elements (n×rows).
// Each weight row is read from memory once for all n vectors, and each
// output vector equals MatVec's for the same x, bit for bit.
func (p *Pool) MatMul(t quant.Type, w []byte, rows, cols int, x []float32, n int, y []float32) error {
	rb, err := checkMatMul(t, w, rows, cols, x, n, y)
	if err != nil || n == 0 {
		return err
	}
	p.mu.Lock()
	defer p.mu.Unlock()
	if p.closed {
		return ErrClosed
	}
	acts, err := quantizeBatch(&p.batch, t, x, n, cols)
	if err != nil {
		return err
	}
	p.execute(t, w, rb, rows, acts, y)
	return nil
}

// checkMatMul checks MatMul's arguments and returns the row size of w.
func checkMatMul(t quant.Type, w []byte, rows, cols int, x []float32, n int, y []float32) (int, error) {
	rb, err := rowBytes(t, w, rows, cols)
	if err != nil {
		return 0, err
	}
	if n < 0 || len(x) != n*cols {
		return 0, fmt.Errorf("%w: x has %d elements, want %d×%d", ErrShape, len(x), n, cols)
	}
	if len(y) < n*rows {
		return 0, fmt.Errorf("%w: y has %d elements, want %d×%d", ErrShape, len(y), n, rows)
	}
	return rb, nil
}

// quantizeBatch quantizes the n vectors of x (n×cols) for rows of type t
// into the first n activations of *batch, grown on demand.
func quantizeBatch(batch *[]*Activation, t quant.Type, x []float32, n, cols int) ([]*Activation, error) {
	for len(*batch) < n {
		*batch = append(*batch, new(Activation))
	}
	acts := (*batch)[:n]
	for i, a := range acts {
		if err := a.Quantize(t, x[i*cols:(i+1)*cols]); err != nil {
			return nil, err
		}
	}
	return acts, nil
}

// MatMulQ is MatMul over prepared activations (all for rows of type t and
// length cols); y is len(acts)×rows.
func (p *Pool) MatMulQ(t quant.Type, w []byte, rows, cols int, acts []*Activation, y []float32) error {
	rb, err := rowBytes(t, w, rows, cols)
	if err != nil {
		return err
	}
	for i, a := range acts {
		if err := checkAct(t, cols, a); err != nil {
			return fmt.Errorf("activation %d: %w", i, err)
		}
	}
	if len(y) < len(acts)*rows {
		return fmt.Errorf("%w: y has %d elements, want %d×%d", ErrShape, len(y), len(acts), rows)
	}
	if len(acts) == 0 {
		return nil
	}
	p.mu.Lock()
	defer p.mu.Unlock()
	if p.closed {
		return ErrClosed
	}
	p.execute(t, w, rb, rows, acts, y)
	return nil
}
