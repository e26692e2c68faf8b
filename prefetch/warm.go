package prefetch

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/pipe-engine/pipe/cache"
	"github.com/pipe-engine/pipe/reader"
	"github.com/pipe-engine/pipe/warmstart"
)

// warmRead is one warm-start read the planner tracks until it is done.
type warmRead struct{ tk *reader.Ticket }

// Warm fills free cache slots with keys before the run needs them (the warm
// start). Every read is optional: it takes only a free resident slot
// (cache.Warm — it never evicts, so it never exceeds the budget nor pushes
// out an expert the run used), it is offered to the lanes' background
// queue, which they serve only when no demand read and no guess (a prompt
// pass's or a decode step's) waits — on every lane, not only
// --prefetch-lanes of them (reader.Request.AnyLane), so a warm start reads
// at the disk's rate while nothing else does, and a prompt pass that starts
// before it is done reads what it routes as a cold one would —, and at most
// inflight of them are queued or reading at once, so a demand miss always
// finds a slot that is free or evictable. A demand lookup that joins a warm
// read still queued promotes it to demand priority.
//
// Order: warmstart.Order, from the layer after the one the pipeline last
// looked up (layer 0 before the first lookup) — so the reads arrive in the
// order a prefill or a decode step computes the layers, ahead of it, and a
// layer it has already passed is read last (for the next token). Warm returns when every key has been offered, the cache is full or
// ctx ends (then it withdraws its reads no lane has started); the reads it
// offered complete asynchronously. It is meant to run on its own goroutine,
// concurrently with Plan.
func (p *Planner) Warm(ctx context.Context, keys []warmstart.Key, inflight int) (warmstart.Stats, error) {
	sem := make(chan struct{}, max(inflight, 1))
	err := p.warmKeys(ctx, keys, sem, &p.warm, false)
	return p.WarmStats(), err
}

// Fill reads keys into free cache slots as Warm does — never evicting,
// stopping at the first key the cache has no free slot for (FillStats.Full)
// — but at background priority (reader.Request.Background): a lane reads a
// fill key only when no demand or speculative read is queued, and only the
// lanes speculation may use (--prefetch-lanes) do, so neither the first
// token nor the pipeline's prefetch waits behind the fill in a queue and
// the other lanes are free for demand reads (a read a lane has started is
// finished). It is the cache fill: a
// caller that warm-started runs it after Warm, with every expert the warm
// start did not read. Unlike Warm it returns once every read it offered is
// done (or ctx ended: it withdraws the reads no lane has started and does
// not wait for the others). Its counters are FillStats.
func (p *Planner) Fill(ctx context.Context, keys []warmstart.Key, inflight int) (warmstart.Stats, error) {
	sem := make(chan struct{}, max(inflight, 1))
	err := p.warmKeys(ctx, keys, sem, &p.fill, true)
	for range cap(sem) { // every token back: every read offered is done
		select {
		case sem <- struct{}{}:
		case <-ctx.Done():
			p.withdrawWarm()
			return p.FillStats(), err
		}
	}
	return p.FillStats(), err
}

// warmKeys offers the reads of keys in warmstart.Order, counting them in
// st, at most cap(sem) at a time (Warm, Fill).
func (p *Planner) warmKeys(ctx context.Context, keys []warmstart.Key, sem chan struct{}, st *warmstart.Stats, background bool) error {
	defer func() {
		if ctx.Err() != nil {
			p.withdrawWarm()
		}
	}()
	q := warmstart.NewOrder(keys)
	for k, ok := q.Next(int(p.lastLayer.Load())); ok; k, ok = q.Next(int(p.lastLayer.Load())) {
		select {
		case sem <- struct{}{}:
		case <-ctx.Done():
			return nil
		}
		full, err := p.warmOne(ctx, cache.Key(k), sem, st, background)
		if full || err != nil || ctx.Err() != nil {
			p.warmMu.Lock()
			st.Full = full
			p.warmMu.Unlock()
			p.warmChanged()
			if errors.Is(err, reader.ErrClosed) || errors.Is(err, cache.ErrClosed) {
				err = nil // the run ended first
			}
			return err
		}
	}
	return nil
}

// warmSlot is cache.Warm that waits, while the cache's free slots are not
// yet faulted in (cache.WarmNotFaulted), for the Prefaulter to reach one,
// or for ctx to end (then WarmPresent: nothing is read).
func (p *Planner) warmSlot(ctx context.Context, k cache.Key, size int64) (*cache.Handle, cache.WarmStatus, error) {
	for {
		progress := p.cache.Faulting()
		h, ws, err := p.cache.Warm(k, size)
		if err != nil || ws != cache.WarmNotFaulted {
			return h, ws, err
		}
		select {
		case <-progress:
		case <-ctx.Done():
			return nil, cache.WarmPresent, nil
		}
	}
}

// warmOne offers the read of k, counted in st; it holds one token of sem,
// which the read's Done (or warmOne itself, when nothing is read) gives back.
func (p *Planner) warmOne(ctx context.Context, k cache.Key, sem chan struct{}, st *warmstart.Stats, background bool) (full bool, err error) {
	rs := p.layout.ExpertRanges(k.Layer, k.Expert)
	size := reader.SpanBytes(rs)
	h, ws, err := p.warmSlot(ctx, k, size)
	if err != nil || ws != cache.WarmStarted {
		<-sem
		return ws == cache.WarmFull && err == nil, err
	}
	what := " (warm start)"
	if background {
		what = " (cache fill)"
	}
	wr := &warmRead{}
	req := reader.Request{Buf: h.Buf(), Ranges: rs, Label: label(k.Layer, k.Expert) + what, AnyLane: !background, Background: true, Done: func(err error) {
		p.warmMu.Lock()
		if p.warmQ[k] == wr {
			delete(p.warmQ, k)
		}
		switch {
		case errors.Is(err, reader.ErrWithdrawn):
			st.Withdrawn++
			delete(p.warmed, k)
		case err == nil:
			st.Completed++
			st.Bytes += size
		default:
			st.Failed++
			delete(p.warmed, k)
		}
		p.warmMu.Unlock()
		if !errors.Is(err, reader.ErrWithdrawn) {
			h.Complete(err) // a withdrawn read is abandoned by Release: the slot goes back
		}
		h.Release()
		<-sem
		p.warmChanged()
	}}
	p.warmMu.Lock()
	p.warmQ[k], p.warmed[k] = wr, st
	p.warmMu.Unlock()
	for {
		tk, err := p.lanes.Offer(req)
		if tk != nil {
			p.warmMu.Lock()
			wr.tk = tk
			st.Issued++
			p.warmMu.Unlock()
			p.warmChanged()
			return false, nil
		}
		if err == nil { // the queue is full: wait for room
			select {
			case <-time.After(time.Millisecond):
				continue
			case <-ctx.Done():
			}
		}
		p.warmMu.Lock()
		delete(p.warmQ, k)
		delete(p.warmed, k)
		p.warmMu.Unlock()
		h.Release()
		<-sem
		if err != nil {
			return false, fmt.Errorf("%s%s: %w", label(k.Layer, k.Expert), what, err)
		}
		return false, nil
	}
}

// noteWarm counts a demand lookup of a warmed expert and, if its read still
// waits in the speculative queue, moves it to demand priority.
func (p *Planner) noteWarm(ctx context.Context, k cache.Key) {
	p.warmMu.Lock()
	st := p.warmed[k]
	if st == nil {
		p.warmMu.Unlock()
		return
	}
	delete(p.warmed, k)
	st.Used++
	var tk *reader.Ticket
	if wr := p.warmQ[k]; wr != nil {
		tk = wr.tk
	}
	p.warmMu.Unlock()
	if tk != nil && tk.Promote(ctx) {
		p.warmMu.Lock()
		st.Promoted++
		p.warmMu.Unlock()
	}
	p.warmChanged()
}

// withdrawWarm takes back every warm read no lane has started.
func (p *Planner) withdrawWarm() {
	p.warmMu.Lock()
	var tks []*reader.Ticket
	for _, wr := range p.warmQ {
		if wr.tk != nil {
			tks = append(tks, wr.tk)
		}
	}
	p.warmMu.Unlock()
	for _, tk := range tks {
		tk.Withdraw() // Done runs here (counted there) or in the lane that started it
	}
}

// OnWarm sets f to be called after every change of WarmStats or FillStats, outside the
// planner's locks, on the goroutine that made it (Warm's, a lane's that
// finished a read, or Plan's); it must not block. Set it before Warm
// starts. Waiters use it to wait for a count instead of polling.
func (p *Planner) OnWarm(f func()) { p.onWarm = f }

func (p *Planner) warmChanged() {
	if f := p.onWarm; f != nil {
		f()
	}
}

// WarmStats returns the warm start's counters.
func (p *Planner) WarmStats() warmstart.Stats {
	p.warmMu.Lock()
	defer p.warmMu.Unlock()
	return p.warm
}

// FillStats returns the cache fill's counters (Fill).
func (p *Planner) FillStats() warmstart.Stats {
	p.warmMu.Lock()
	defer p.warmMu.Unlock()
	return p.fill
}
