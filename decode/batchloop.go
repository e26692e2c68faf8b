package decode

// batchloop.go: the Batch's scheduler goroutine — placing requests on
// slots, running passes, sampling, and ending requests.

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"time"

	"github.com/pipe-engine/pipe/metrics"
	"github.com/pipe-engine/pipe/model"
)

// sched is the scheduler goroutine's state.
type sched struct {
	b     *Batch
	slots []*slot
	queue []*request // waiting for a free slot, in arrival order
	pass  int64
	ctx   context.Context // cancelled by Close: a pass in flight stops
	seqs  []model.Seq
	who   []*slot
	// patience is until when a pass waits for the answers to the last
	// pass's tokens (gather).
	patience time.Time
	last     metrics.Counters // the engine's, after the last pass (account)
	deferred []*ctl           // slot actions waiting for their busy slots (slotfile.go)
}

// loop is the scheduler goroutine: it handles one submission or event at a
// time, and runs a pass whenever a slot has work and nothing is pending.
func (b *Batch) loop(slots []*slot) {
	defer close(b.done)
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	go func() {
		select {
		case <-b.quit:
			cancel()
		case <-ctx.Done():
		}
	}()
	s := &sched{b: b, slots: slots, ctx: ctx, last: b.Counters()}
	for {
		s.runDeferred() // before queued requests take the slots
		s.place()
		b.publish(slots)
		ready := s.ready()
		var wait <-chan time.Time // nil: no pass at a tick
		if ready {
			wait = s.gather()
		}
		if !ready || wait != nil {
			// nothing to feed (wait nil blocks), or a pass once the
			// answers are in or the patience is spent
			select {
			case q := <-b.submit:
				s.queue = append(s.queue, q)
			case e := <-b.events:
				s.answer(e)
			case c := <-b.ctl:
				s.control(c)
			case <-b.quit:
				s.stop()
				return
			case <-wait:
				s.step()
			}
			continue
		}
		select {
		case q := <-b.submit:
			s.queue = append(s.queue, q)
		case e := <-b.events:
			s.answer(e)
		case c := <-b.ctl:
			s.control(c)
		case <-b.quit:
			s.stop()
			return
		default:
			s.step()
		}
	}
}

// gather is the channel a pass waits on while slots whose tokens are with
// their callers may still answer: every token of a pass goes to its caller
// at once, and the first answer would otherwise start the next pass with
// that one slot alone (the others joining the pass after, so that each
// layer's experts are read twice where once would do). The wait ends at the
// last answer, or at the patience (an eighth of the last pass's wall time
// after it), so that a slow client holds the others back by that at most.
// nil: nothing to wait for.
func (s *sched) gather() <-chan time.Time {
	waiting := false
	for _, sl := range s.slots {
		waiting = waiting || (sl.req != nil && sl.waiting)
	}
	left := s.patience.Sub(now())
	if !waiting || left <= 0 {
		return nil
	}
	return time.After(left)
}

// ready reports whether a slot has something to feed.
func (s *sched) ready() bool {
	for _, sl := range s.slots {
		if sl.busy() {
			return true
		}
	}
	return false
}

// busy: the slot has a prompt chunk or a token to feed now.
func (sl *slot) busy() bool { return sl.req != nil && !sl.waiting && !sl.ending }

// place puts queued requests on free slots, in arrival order; a request
// waiting for its pinned slot lets the ones after it pass.
func (s *sched) place() {
	for i := 0; i < len(s.queue); {
		q := s.queue[i]
		sl := s.choose(q)
		switch {
		case sl == nil && q.r.PinSlot:
			i++
			continue
		case sl == nil:
			return
		}
		s.queue = slices.Delete(s.queue, i, i+1)
		if err := s.start(sl, q); err != nil {
			q.err = err
			q.fin <- Result{}
		}
	}
}

// choose is the free slot for q: the one whose cache shares the largest
// fraction of q's prompt when above the similarity threshold (0: the
// choice is off, as llama-server's), else the one used least recently; nil
// when none is free.
func (s *sched) choose(q *request) *slot {
	if q.r.PinSlot {
		if sl := s.slots[q.r.Slot]; sl.req == nil {
			return sl
		}
		return nil
	}
	var best, lru *slot
	bestSim := -1.0
	for _, sl := range s.slots {
		if sl.req != nil {
			continue
		}
		if lru == nil || sl.used < lru.used {
			lru = sl
		}
		if sim := float64(sl.shared(q)) / float64(len(q.r.IDs)); sim > bestSim {
			best, bestSim = sl, sim
		}
	}
	if best != nil && s.b.o.Similarity > 0 && bestSim > s.b.o.Similarity {
		return best
	}
	return lru
}

// shared is the prefix of q's prompt the slot's cache may keep for it (at
// least one prompt token is always fed).
func (sl *slot) shared(q *request) int {
	if q.r.NoCache || (q.r.MayReuse != nil && !q.r.MayReuse(sl.id, sl.hist)) {
		return 0
	}
	n := 0
	for n < len(sl.hist) && n < len(q.r.IDs)-1 && sl.hist[n] == q.r.IDs[n] {
		n++
	}
	return n
}

// start gives q the slot: the cache is rewound to the prefix q may keep,
// and the rest of the prompt is queued to feed.
func (s *sched) start(sl *slot, q *request) error {
	if q.r.Chain == nil {
		return fmt.Errorf("decode: batch request without a sampler chain")
	}
	ids, nCtx := q.r.IDs, sl.st.NCtx
	n := q.r.MaxTokens
	if n < 0 {
		n = nCtx - len(ids)
	}
	if len(ids) > nCtx || n < 0 || len(ids)+n > nCtx {
		return fmt.Errorf("%w: prompt (%d tokens) + %d to generate exceeds the slot's context of %d", model.ErrContextFull, len(ids), n, nCtx)
	}
	keep := sl.st.Rewind(sl.shared(q))
	sl.hist = sl.hist[:keep]
	*sl = slot{id: sl.id, st: sl.st, hist: sl.hist, used: sl.used, served: true, req: q, feed: ids[keep:], n: n,
		res: Result{PromptTokens: len(ids) - keep}, stream: s.b.m.tok.NewStream(false), t0: now()}
	if q.r.OnSlot != nil {
		q.r.OnSlot(sl.id)
	}
	if q.prompt != nil {
		q.prompt <- [2]int{keep, 0}
	}
	return nil
}

// reportPrompt queues sl's prompt progress for its request's OnPrompt
// after a chunk: at each Batch boundary crossed and at the prompt's end.
func (sl *slot) reportPrompt(chunk int) {
	q := sl.req
	if q.prompt == nil {
		return
	}
	fed := sl.res.PromptTokens - len(sl.feed)
	if b := q.r.Batch; len(sl.feed) > 0 && b > 0 && fed/b == (fed-chunk)/b {
		return
	}
	q.prompt <- [2]int{len(q.r.IDs) - sl.res.PromptTokens, fed}
}

// step runs one pass over every busy slot: a prompt chunk or its last
// token each.
func (s *sched) step() {
	s.fit()
	s.seqs, s.who = s.seqs[:0], s.who[:0]
	for _, sl := range s.slots {
		if !sl.busy() {
			continue
		}
		s.seqs = append(s.seqs, model.Seq{State: sl.st, Tokens: sl.toFeed(s.b.o.Ubatch)})
		s.who = append(s.who, sl)
	}
	if len(s.who) == 0 { // fit ended every busy slot
		return
	}
	s.pass++
	s.b.m.forwards.Add(1)
	t0 := now()
	rows, err := s.b.m.eng.ForwardBatch(s.ctx, s.seqs)
	if err != nil && s.ctx.Err() != nil {
		err = ErrBatchClosed
	}
	wall := since(t0)
	s.account(wall)
	s.patience = now().Add(wall / 8)
	for i, sl := range s.who {
		sl.used = s.pass
		if err != nil {
			sl.clearCache() // a failed pass may have changed the state part-way
			s.end(sl, err)
			continue
		}
		s.fed(sl, s.seqs[i].Tokens, rows[i])
	}
}

// toFeed is what a busy slot feeds in the next pass: its next prompt chunk
// of up to ubatch tokens, or its last sampled token.
func (sl *slot) toFeed(ubatch int) []int32 {
	if len(sl.feed) > 0 {
		return sl.feed[:min(len(sl.feed), ubatch)]
	}
	return []int32{sl.next}
}

// fit keeps a unified pool's positions within BatchOptions.Ctx for the next
// pass: idle slots' caches are dropped, least recently used first (as
// llama-server's try_clear_idle_slots), then the busy slot that would hold
// the most positions ends with ErrPoolFull, until the pass fits.
// (llama-server ends every busy slot there; its code's TODO asks for this.)
func (s *sched) fit() {
	if !s.b.o.Unified {
		return
	}
	for s.poolNeed() > s.b.o.Ctx {
		var idle, big *slot
		for _, sl := range s.slots {
			switch {
			case sl.req == nil && len(sl.hist) > 0 && (idle == nil || sl.used < idle.used):
				idle = sl
			case sl.busy() && (big == nil || sl.st.Pos+len(sl.toFeed(s.b.o.Ubatch)) > big.st.Pos+len(big.toFeed(s.b.o.Ubatch))):
				big = sl
			}
		}
		switch {
		case idle != nil:
			idle.clearCache()
		case big != nil:
			s.end(big, fmt.Errorf("slot %d at %d positions, the pool holds %d: %w", big.id, big.st.Pos, s.b.o.Ctx, ErrPoolFull))
			big.clearCache()
		default:
			return // only slots waiting on their callers hold the pool: nothing to feed
		}
	}
}

// poolNeed is the positions every slot holds after the next pass.
func (s *sched) poolNeed() int {
	n := 0
	for _, sl := range s.slots {
		n += sl.st.Pos
		if sl.busy() {
			n += len(sl.toFeed(s.b.o.Ubatch))
		}
	}
	return n
}

// clearCache empties the slot's cache (a growing state gives its rows back).
func (sl *slot) clearCache() {
	sl.st.Rewind(0)
	sl.hist = sl.hist[:0]
}

// fed takes in what a pass did for sl: toks are in its cache now; a
// finished prompt or a fed token means a row to sample.
func (s *sched) fed(sl *slot, toks []int32, rows [][]float32) {
	sl.hist = append(sl.hist, toks...)
	if len(sl.feed) > 0 {
		sl.feed = sl.feed[len(toks):]
		sl.reportPrompt(len(toks))
		if len(sl.feed) > 0 {
			return
		}
		sl.res.Prefill = since(sl.t0)
		q := sl.req
		q.r.Chain.AcceptPrompt(q.r.IDs[len(q.r.IDs)-sl.res.PromptTokens:])
		if sl.n == 0 {
			sl.res.Stop = StopLength
			s.end(sl, nil)
			return
		}
	}
	if len(rows) != 1 {
		s.end(sl, fmt.Errorf("decode: batch pass returned %d logit rows", len(rows)))
		return
	}
	if err := s.sample(sl, rows[0]); err != nil {
		s.end(sl, err)
	}
}

// sample draws sl's next token from its logits row and hands it to the
// request's caller; the slot waits for the answer.
func (s *sched) sample(sl *slot, row []float32) error {
	c := sl.req.r.Chain
	next, err := c.Sample(row)
	if err != nil {
		return err
	}
	if err := c.Accept(next); err != nil {
		return err
	}
	if len(sl.res.Tokens) == 0 {
		sl.first = now()
		sl.res.TTFT = sl.first.Sub(sl.req.r.Given)
	}
	sl.res.Tokens = append(sl.res.Tokens, next)
	t := Token{ID: next}
	switch {
	case s.b.m.tok.IsEOG(next) && !sl.req.r.IgnoreEOS:
		t.EOG, t.Text = true, sl.stream.Flush()
		sl.ending, sl.res.Stop = true, StopEOG
	case len(sl.res.Tokens) == sl.n:
		t.Text = sl.stream.Add(next) + sl.stream.Flush()
		sl.ending, sl.res.Stop = true, StopLength
	default:
		t.Text = sl.stream.Add(next)
	}
	sl.next, sl.waiting = next, true
	sl.req.tokens <- t // capacity 1, empty: the last token was answered
	return nil
}

// answer takes a caller's answer to its last token, or its cancellation.
func (s *sched) answer(e event) {
	for i, q := range s.queue {
		if q == e.req && e.err != nil {
			s.queue = append(s.queue[:i], s.queue[i+1:]...)
			q.err = e.err
			q.fin <- Result{}
			return
		}
	}
	var sl *slot
	for _, x := range s.slots {
		if x.req == e.req {
			sl = x
		}
	}
	switch {
	case sl == nil: // it ended already
	case errors.Is(e.err, ErrStop):
		if !sl.ending {
			sl.res.Stop = StopCallback
		}
		s.end(sl, nil)
	case e.err != nil:
		s.end(sl, e.err)
	case sl.ending:
		s.end(sl, nil)
	default:
		sl.waiting = false
	}
}

// end finishes sl's request with err and frees the slot.
func (s *sched) end(sl *slot, err error) {
	q := sl.req
	if !sl.first.IsZero() {
		sl.res.Decode = since(sl.first)
	}
	sl.io.fill(&sl.res)
	q.err = err
	q.fin <- sl.res
	sl.req, sl.waiting, sl.ending, sl.feed = nil, false, false, nil
}

// stop ends every request, running or queued, with ErrBatchClosed.
func (s *sched) stop() {
	for _, sl := range s.slots {
		if sl.req != nil {
			s.end(sl, ErrBatchClosed)
		}
	}
	for _, q := range s.queue {
		q.err = ErrBatchClosed
		q.fin <- Result{}
	}
	s.queue = nil
	for _, c := range s.deferred {
		c.done <- ErrBatchClosed
	}
	s.deferred = nil
}

// account makes the pass just run a Step (from the engine's counters since
// the last pass, so that reads its speculation started and that landed
// after it count too, and its wall time), charges each slot in it its
// share, and hands the Step to BatchOptions.OnStep.
func (s *sched) account(wall time.Duration) {
	c1 := s.b.m.eng.Metrics().Counters
	s.b.mu.Lock()
	s.b.counters = c1 // before any request of the pass ends: its caller may read them
	s.b.mu.Unlock()
	d := c1.Sub(s.last)
	s.last = c1
	st := Step{Pass: s.pass, Seqs: len(s.who), Wall: wall, Stall: d.Stall, ReadBytes: d.ReadBytes,
		Lookups: metrics.Lookups{Hits: d.Decode.Hits + d.Prompt.Hits, Joins: d.Decode.Joins + d.Prompt.Joins,
			Misses: d.Decode.Misses + d.Prompt.Misses}}
	for i, sl := range s.who {
		st.Tokens += len(s.seqs[i].Tokens)
		if len(sl.feed) > 0 {
			st.PromptTokens += len(s.seqs[i].Tokens)
		}
	}
	for i, sl := range s.who {
		sl.io.charge(st, len(s.seqs[i].Tokens), len(sl.feed) > 0)
	}
	if s.b.o.OnStep != nil {
		s.b.o.OnStep(st)
	}
}
