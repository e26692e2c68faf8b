// Package ffn is the compute stage of a MoE layer: it takes a layer's routed
// experts as their bytes become ready (cache hits at once, misses as the
// reader lanes finish them), runs each expert over the tokens routed to it
// into that expert's own output buffers, and finally sums every token's
// expert outputs in top-k rank order. Single-token experts that are ready
// together (all the hits of a decode layer) are computed in one call when
// the architecture implements model.BatchExpertFFN, so their projections
// share one pool dispatch. Multi-token experts (prefill) run whole, one per
// pool thread at a time, largest first (kernels.Pool.ParallelWith, each
// thread with its own model.Scratch and kernels.Local), except one holding
// more than an equal share of the batch's tokens, whose products split their
// rows over the threads. When a multi-token job's experts are still
// arriving (a streamed prefill's misses land one at a time), each pool
// thread instead takes the next expert from the hand-off channel as soon as
// it is free and computes it whole (stream.go), so no thread waits for
// another's expert and none runs an expert alone with its rows split.
// Each expert's output is the same whichever way it ran. A job may carry
// side work (Job.Side: a shared expert, a dense MLP beside the experts),
// which a Consume with overlap runs once, the first time it would wait for
// an expert's bytes, so that compute is off the serial path after the last
// expert, when the disk would wait for it.
//
// The rank-order sum is the engine's bit-exactness invariant: arrival order
// decides only when an expert is computed, never how its result is combined,
// so the output is identical for any number of reader lanes, cache budget,
// overlap setting or prefetch policy.
//
// Ownership: a Stage owns its scratch buffers (one set per pool thread for
// experts run whole) and is used by one goroutine at a time (the decode
// loop); the pool's threads use them only inside the stage's calls. Ready
// values (package expert) lend expert bytes to the stage until it calls
// their Release, which it does as soon as the expert is computed — and,
// once a wave has failed or its request was cancelled, as soon as a value
// arrives, so the stage never holds a cache slot the producer needs to
// deliver the rest of the wave. Every receive selects on the receive
// context: no pool thread waits on the hand-off channel after the
// producer's lifetime ends. A Job may be reused layer after layer: Plan
// resets it, keeping its buffers, so steady decode allocates nothing here.
package ffn

import (
	"context"
	"errors"
	"fmt"
	"runtime"
	"slices"
	"time"

	"github.com/pipe-engine/pipe/expert"
	"github.com/pipe-engine/pipe/internal/buf"
	"github.com/pipe-engine/pipe/internal/clock"
	"github.com/pipe-engine/pipe/kernels"
	"github.com/pipe-engine/pipe/model"
)

// Job is one layer's MoE work for a batch of tokens.
type Job struct {
	Layer int
	K     int         // experts per token
	X     [][]float32 // normalised input per token (n_embd)
	IDs   [][]int     // [token][rank] expert ids; −1: a slot a lossy mode skipped (never every slot of a token)
	W     [][]float32 // [token][rank] weights
	Out   [][]float32 // [token] output (n_embd), overwritten
	Order []int       // distinct experts, first-appearance order (token-major, rank order)
	// Side, if set, is the layer's work that does not depend on its
	// experts (model.SideWork): a Consume with overlap calls it once, the
	// first time it would wait for an expert's bytes. Its error ends the
	// layer as a compute error does.
	Side  func() error
	users [][]use // [expert] (token, rank) pairs; non-empty exactly for the experts in Order
}

type use struct{ t, r int }

// Plan fills j.Order and the expert→token index from j.IDs (skipped slots,
// id −1, are nobody's), reusing the buffers of the job's previous plan.
func (j *Job) Plan() {
	for _, e := range j.Order {
		if e < len(j.users) {
			j.users[e] = j.users[e][:0]
		}
	}
	j.Order = j.Order[:0]
	for t, ids := range j.IDs {
		for r, e := range ids[:j.K] {
			if e < 0 {
				continue
			}
			if e >= len(j.users) {
				j.users = append(j.users, make([][]use, e+1-len(j.users))...)
			}
			if len(j.users[e]) == 0 {
				j.Order = append(j.Order, e)
			}
			j.users[e] = append(j.users[e], use{t, r})
		}
	}
}

// usersOf returns the (token, rank) pairs routed to expert e.
func (j *Job) usersOf(e int) ([]use, bool) {
	if e < 0 || e >= len(j.users) || len(j.users[e]) == 0 {
		return nil, false
	}
	return j.users[e], true
}

// Stats are the stage's timings for one job.
type Stats struct {
	Stall   time.Duration // waiting for an expert with nothing to compute
	Compute time.Duration // computing experts and the weighted sum
	Experts int
}

// Stage computes MoE layers with an architecture's expert math.
type Stage struct {
	// Clock is what Stats' Stall and Compute are read from; nil is the
	// wall clock. Set it before the first Consume or Compute.
	Clock clock.Clock
	// onWait, if set, is called on the waiting goroutine as each wait for
	// an expert begins: this package's tests advance their fake Clock
	// there, a wait whose length they know.
	onWait func()

	fn            model.ExpertFFN
	nEmbd         int
	pool          *kernels.Pool
	scratch       model.Scratch
	threads       []threadScratch // per pool thread, for experts computed whole
	ys            []float32       // [token][rank] outputs
	xs, os        []float32       // gathered inputs / outputs of the multi-token experts
	group         []expert.Ready  // values received together, reused
	ready         []expert.Ready  // of those, the ones to compute now
	pending       []expert.Ready  // held back until the layer's wave is complete (no overlap)
	single, multi []model.ExpertWork
	each          []model.ExpertWork // computeMulti's experts run whole, one per thread
	eachLayer     int
	eachFn        func(t, i int) // computeOne, bound once
	errs          []error        // per expert of each, or per value of a streaming Consume
	stream        streamed       // a streaming Consume's state (stream.go)
	takeFn        func(t, i int) // takeOne, bound once
}

// threadScratch is one pool thread's scratch for an expert computed whole
// on that thread.
type threadScratch struct {
	scratch model.Scratch
	local   kernels.Local
	xs, os  []float32 // gathered inputs / outputs of a streamed expert
	wait    time.Duration
	experts int
}

// New returns a stage for an architecture whose hidden size is nEmbd and
// whose products run on pool (nil: the stage never runs experts whole on
// separate threads, as with a one-thread pool).
func New(fn model.ExpertFFN, nEmbd int, pool *kernels.Pool) *Stage {
	s := &Stage{fn: fn, nEmbd: nEmbd, pool: pool}
	if pool != nil && pool.Threads() > 1 {
		s.threads = make([]threadScratch, pool.Threads())
		for i := range s.threads {
			s.threads[i].scratch.Local = &s.threads[i].local
		}
	}
	s.eachFn = s.computeOne
	s.takeFn = s.takeOne
	return s
}

// Begin prepares the per-(token, rank) buffers for job.
func (s *Stage) Begin(j *Job) {
	n := len(j.X) * j.K * s.nEmbd
	if cap(s.ys) < n {
		s.ys = make([]float32, n)
	}
	s.ys = s.ys[:n]
}

// Consume takes want Ready values from ch and computes them. With overlap,
// each expert is computed as soon as it arrives (the values already there
// together; a prefill's still arriving ones one per pool thread, see
// streams); without, the stage first waits until all want experts are ready
// (the serial A/B baseline). Every received value is released, also on
// error.
//
// Two contexts bound it. recv bounds the receives: the producer's lifetime,
// while which it delivers every value of the wave (a value left in ch would
// stay pinned). ctx bounds the compute: once it is done (a cancelled
// request), no more expert is computed, the wave's remaining values are
// received and released as they arrive, and Consume returns ctx's error.
func (s *Stage) Consume(recv, ctx context.Context, j *Job, ch <-chan expert.Ready, want int, overlap bool, st *Stats) error {
	if s.streams(j, ch, want, overlap) {
		return s.consumeStream(recv, ctx, j, ch, want, st)
	}
	pending := s.pending[:0]
	defer func() {
		release(pending) // on an early return; empty after the last compute
		s.pending = pending[:0]
	}()
	var firstErr error
	side := j.Side
	if !overlap {
		side = nil // the serial baseline overlaps nothing
	}
	for got := 0; got < want; {
		if side != nil && len(ch) == 0 && firstErr == nil {
			// about to wait: run the layer's side work first
			err := side()
			side = nil
			if err != nil {
				firstErr, pending = err, release(pending)
			}
		}
		t0 := s.Clock.Now()
		s.waiting()
		r, err := receive(recv, ch)
		if err != nil {
			return err
		}
		st.Stall += s.Clock.Since(t0)
		// take whatever else is already there: ready experts are computed
		// together (one pool dispatch per projection for all of them)
		group := append(s.group[:0], r)
		for got++; got < want; got++ {
			select {
			case r = <-ch:
				group = append(group, r)
				continue
			default:
			}
			break
		}
		ready := s.ready[:0]
		for _, r := range group {
			switch {
			case r.Err != nil:
				r.Release()
				if firstErr == nil {
					firstErr, pending = r.Err, release(pending)
				}
			case firstErr != nil:
				// nothing more is computed: hold no slot the producer
				// may need for the wave's remaining values
				r.Release()
			case !overlap:
				pending = append(pending, r)
			default:
				ready = append(ready, r)
			}
		}
		clear(group)
		s.group = group[:0]
		err = s.computeBounded(ctx, j, ready, st)
		release(ready)
		s.ready = ready[:0]
		if err != nil && firstErr == nil {
			firstErr, pending = err, release(pending)
		}
	}
	if firstErr != nil {
		return firstErr
	}
	err := s.computeBounded(ctx, j, pending, st)
	pending = release(pending)
	return err
}

// Compute computes the experts rs, all ready (a mapped file's slices), and
// releases them: the same as Consume with overlap given them at once.
func (s *Stage) Compute(ctx context.Context, j *Job, rs []expert.Ready, st *Stats) error {
	err := s.computeBounded(ctx, j, rs, st)
	release(rs)
	return err
}

// pollWait is how long Consume keeps its goroutine running, yielding to
// others, before it blocks on the hand-off channel. Hits arrive from the
// planner goroutine within tens of microseconds; blocking instead parks
// this goroutine and can leave its core idle, and on a virtual machine an
// idle core wakes slowly, several times the planner's work per layer
// (docs/measurements.md, "Figures from code comments").
const pollWait = 50 * time.Microsecond

// waiting calls onWait, if set.
func (s *Stage) waiting() {
	if s.onWait != nil {
		s.onWait()
	}
}

// poll reports whether ch has a value, yielding the processor (so the
// planner goroutine can run here) for up to pollWait since t0 (the wall
// clock's: how long to spin is not accounting).
func poll(ch <-chan expert.Ready, t0 time.Time) bool {
	for i := 0; ; i++ {
		if len(ch) > 0 {
			return true
		}
		if i%8 == 7 && time.Since(t0) > pollWait {
			return false
		}
		runtime.Gosched()
	}
}

// maxBatchProducts bounds the (token, expert) products of one batched
// compute, so a long prefill checks for cancellation every fraction of a
// second; a decode step (k products) is one batch.
const maxBatchProducts = 256

// computeBounded computes rs in batches of at most maxBatchProducts
// products, checking ctx before each. The batching does not change results:
// each expert's output depends only on its bytes and inputs.
func (s *Stage) computeBounded(ctx context.Context, j *Job, rs []expert.Ready, st *Stats) error {
	for len(rs) > 0 {
		if err := ctx.Err(); err != nil {
			return err
		}
		n, products := 0, 0
		for n < len(rs) {
			us, _ := j.usersOf(rs[n].Expert)
			if n > 0 && products+len(us) > maxBatchProducts {
				break
			}
			products += len(us)
			n++
		}
		if err := s.computeAll(j, rs[:n], st); err != nil {
			return err
		}
		rs = rs[n:]
	}
	return nil
}

// release unpins every value of rs, drops the references and returns rs
// emptied.
func release(rs []expert.Ready) []expert.Ready {
	for _, r := range rs {
		r.Release()
	}
	clear(rs)
	return rs[:0]
}

// computeAll computes the ready experts rs: their inputs gathered, the
// single-token ones through computeSingles, the multi-token ones through
// computeMulti, and every output put in its (token, rank) slot.
func (s *Stage) computeAll(j *Job, rs []expert.Ready, st *Stats) error {
	t0 := s.Clock.Now()
	defer func() { st.Compute += s.Clock.Since(t0) }()
	E := s.nEmbd
	total := 0
	for _, r := range rs {
		us, ok := j.usersOf(r.Expert)
		if !ok {
			return fmt.Errorf("%w: layer %d expert %d", ErrNotRouted, j.Layer, r.Expert)
		}
		if len(us) > 1 {
			total += len(us)
		}
	}
	if cap(s.xs) < total*E {
		s.xs = make([]float32, total*E)
		s.os = make([]float32, total*E)
	}
	single, multi := s.single[:0], s.multi[:0]
	off := 0
	for _, r := range rs {
		us, _ := j.usersOf(r.Expert)
		w := model.ExpertWork{Expert: r.Expert, Parts: r.Parts, N: len(us)}
		if len(us) == 1 {
			// one token: read its input and write its (token, rank) slot
			// in place
			u := us[0]
			w.X = j.X[u.t][:E]
			w.Out = s.ys[(u.t*j.K+u.r)*E : (u.t*j.K+u.r+1)*E]
			single = append(single, w)
			continue
		}
		w.X, w.Out = s.xs[off*E:(off+len(us))*E], s.os[off*E:(off+len(us))*E]
		for i, u := range us {
			copy(w.X[i*E:(i+1)*E], j.X[u.t])
		}
		off += len(us)
		multi = append(multi, w)
	}
	err := s.computeSingles(j.Layer, single)
	if err == nil {
		err = s.computeMulti(j.Layer, multi)
	}
	if err == nil {
		for _, w := range multi {
			us, _ := j.usersOf(w.Expert)
			for i, u := range us {
				copy(s.ys[(u.t*j.K+u.r)*E:], w.Out[i*E:(i+1)*E])
			}
		}
		st.Experts += len(rs)
	}
	clear(single)
	clear(multi)
	s.single, s.multi = single[:0], multi[:0]
	return err
}

// computeSingles computes single-token experts: together through the
// architecture's BatchExpertFFN when it has one, else one by one, each
// product's rows split over the pool's threads.
func (s *Stage) computeSingles(l int, ws []model.ExpertWork) error {
	if bf, ok := s.fn.(model.BatchExpertFFN); ok && len(ws) >= 2 {
		return bf.ComputeExperts(l, ws, &s.scratch)
	}
	for _, w := range ws {
		if err := s.fn.ComputeExpert(l, w.Expert, w.Parts, w.N, w.X, w.Out, &s.scratch); err != nil {
			return err
		}
	}
	return nil
}

// computeMulti computes multi-token experts (prefill), largest first. An
// expert larger than an equal share of the remaining tokens runs alone with
// its rows split over the pool's threads; the rest run whole, one expert per
// thread at a time (kernels.Pool.ParallelWith), so the per-expert serial
// work — quantizing and packing the inputs, the activation function — runs
// on every thread instead of between barriers. Either way the same kernels
// compute every output element.
func (s *Stage) computeMulti(l int, ws []model.ExpertWork) error {
	slices.SortStableFunc(ws, func(a, b model.ExpertWork) int { return b.N - a.N })
	threads := len(s.threads)
	left := 0
	for _, w := range ws {
		left += w.N
	}
	for len(ws) > 0 && (threads < 2 || len(ws) < 2 || ws[0].N*threads > left) {
		w := ws[0]
		if err := s.fn.ComputeExpert(l, w.Expert, w.Parts, w.N, w.X, w.Out, &s.scratch); err != nil {
			return err
		}
		left -= w.N
		ws = ws[1:]
	}
	if len(ws) == 0 {
		return nil
	}
	s.each, s.eachLayer = ws, l
	s.errs = buf.Grow(s.errs, len(ws))
	err := s.pool.ParallelWith(len(ws), s.eachFn)
	s.each = nil
	for i, e := range s.errs {
		if err == nil {
			err = e
		}
		s.errs[i] = nil
	}
	return err
}

// computeOne is ParallelWith's body: expert i of s.each on thread t.
func (s *Stage) computeOne(t, i int) {
	w := &s.each[i]
	s.errs[i] = s.fn.ComputeExpert(s.eachLayer, w.Expert, w.Parts, w.N, w.X, w.Out, &s.threads[t].scratch)
}

// Finish writes each token's output: Σ_rank w·y in rank order (ggml's
// weighted MUL then chained ADDs), skipped slots left out.
func (s *Stage) Finish(j *Job, st *Stats) {
	t0 := s.Clock.Now()
	E := s.nEmbd
	for t, out := range j.Out {
		ids := j.IDs[t]
		r0 := 0
		for r0 < j.K-1 && ids[r0] < 0 {
			r0++
		}
		y0 := s.ys[(t*j.K+r0)*E:]
		w0 := j.W[t][r0]
		kernels.MulScalar(out[:E], y0, w0)
		for r := r0 + 1; r < j.K; r++ {
			if ids[r] < 0 {
				continue
			}
			y := s.ys[(t*j.K+r)*E:]
			w := j.W[t][r]
			kernels.AddMulScalar(out[:E], y, w) // the product rounds before the addition
		}
	}
	st.Compute += s.Clock.Since(t0)
}

// ErrNotRouted is returned when a ready expert was never requested.
var ErrNotRouted = errors.New("ffn: expert not routed")
