// Package prefetch is the planner stage of the streaming pipeline: for each
// layer it splits the routed experts into cache hits and misses, issues the
// misses' reads to the reader lanes in router-rank order, and hands every
// expert to the FFN stage the moment its bytes are resident — the layer's
// hits first (order.go), so a prefill layer's resident experts are computed
// while the lanes read its misses. A Policy may add
// speculative reads of experts a later layer is likely to need, and a prompt
// pass hands the planner its guess of the next layer's routed set
// ([Planner.SpeculateSet]); those reads
// only warm the cache and never change what the FFN computes. Speculative
// reads are offered to the lanes without blocking and tracked until their
// layer is routed ([Planner.Settle]): wrong guesses no lane has started are
// withdrawn (no I/O, the slot freed) and right guesses still queued are
// promoted to demand priority. [Planner.Warm] (warm.go) reads the warm
// start: a hot set's experts (package warmstart chooses them and their
// order) into free cache slots, a bounded number at a time, layer by layer
// ahead of the layer being computed, at background priority
// (reader.Request.Background: behind every demand read and every guess) on
// every lane, while the model loads and then whenever the lanes have
// nothing else to read; its counters are warmstart.Stats.
// [Planner.Fill] reads the cache fill — every expert the warm start did not,
// when the cache holds them all — the same way at background priority on
// the --prefetch-lanes lanes only, and returns once they are read.
//
// Ownership: the Planner owns no expert memory. Bytes live in cache slots; a
// Ready value (package expert) carries the cache pin as its Lease, which the
// FFN stage releases. The planner keeps a record per expert (expertRec):
// its label, its projection views (slices into its slot), rewritten in place
// on the next lookup of that expert, which can only come after the previous
// Ready was released, and its demand read's request with the Done callback
// bound once — so a cache hit and a demand miss hand the FFN its expert
// without allocating. The
// Planner's goroutines (one waiter per in-flight expert it joins) are owned
// by the Planner and waited for in Close. The planner goroutine is the
// Planner's own loop, [Planner.Run] (loop.go), which serves the pipeline's
// [Request] values in order: Plan, Settle and the speculation are called
// from it alone (and Warm and Fill from the engine's warm-start goroutine).
package prefetch

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"sync"
	"sync/atomic"

	"github.com/pipe-engine/pipe/cache"
	"github.com/pipe-engine/pipe/expert"
	"github.com/pipe-engine/pipe/reader"
	"github.com/pipe-engine/pipe/warmstart"
)

// Layout gives the file ranges of an expert.
type Layout interface {
	// ExpertRanges returns the ranges of (layer, expert) in the
	// architecture's projection order.
	ExpertRanges(layer, expert int) []reader.Range
}

// Stats are the planner's cumulative counters.
type Stats struct {
	Hits, Misses, Joins int64 // demand lookups by outcome
	Speculative         int64 // speculative reads issued
	SpeculativeUsed     int64 // of those, routed to by the layer they were guessed for
	SpeculativeSkipped  int64 // predictions already resident or in flight, or with no slot or queue room
	// Of the speculative reads the layer's router then did not pick, those
	// withdrawn before a lane started them (no I/O spent).
	SpeculativeWithdrawn int64
	// Of the used ones, those still waiting in the speculative queue when
	// demanded, and moved to demand priority.
	SpeculativePromoted int64
}

// Planner issues one layer's lookups and reads.
type Planner struct {
	cache  *cache.Cache
	lanes  *reader.Lanes
	layout Layout
	policy Policy
	spec   int // speculative experts per layer (0: off)

	wg     sync.WaitGroup
	specMu sync.Mutex
	specd  map[cache.Key]*reader.Ticket // speculative reads whose layer has not been routed yet
	recMu  sync.Mutex
	recs   map[cache.Key]*expertRec // one per expert looked up so far

	hits, misses, joins, speculative, used, skipped, withdrawn, promoted atomic.Int64

	warmMu sync.Mutex
	warmQ  map[cache.Key]*warmRead        // warm-start and fill reads not yet done
	warmed map[cache.Key]*warmstart.Stats // warm-started or filled experts no demand lookup has found yet, and whose
	warm   warmstart.Stats
	fill   warmstart.Stats
	onWarm func() // OnWarm's observer (nil: none)

	hitOrd, missOrd []int        // Plan's scratch (hitsFirst)
	lastLayer       atomic.Int64 // the layer of the last Plan (-1 before any; Warm's order)
}

// New returns a planner. policy may be nil when spec is 0.
func New(c *cache.Cache, lanes *reader.Lanes, layout Layout, policy Policy, spec int) *Planner {
	if policy == nil {
		spec = 0
	}
	p := &Planner{cache: c, lanes: lanes, layout: layout, policy: policy, spec: spec, specd: map[cache.Key]*reader.Ticket{},
		warmQ: map[cache.Key]*warmRead{}, warmed: map[cache.Key]*warmstart.Stats{}, recs: map[cache.Key]*expertRec{}}
	p.lastLayer.Store(-1)
	return p
}

// Stats returns the counters.
func (p *Planner) Stats() Stats {
	return Stats{Hits: p.hits.Load(), Misses: p.misses.Load(), Joins: p.joins.Load(),
		Speculative: p.speculative.Load(), SpeculativeUsed: p.used.Load(), SpeculativeSkipped: p.skipped.Load(),
		SpeculativeWithdrawn: p.withdrawn.Load(), SpeculativePromoted: p.promoted.Load()}
}

func label(l, e int) string { return fmt.Sprintf("layer %d expert %d", l, e) }

// expertRec is what the planner keeps per expert: its label, its last
// projection views and, while its demand read is in flight, that read's
// handle, ranges and destination, with the read's Done callback bound once.
// The cache runs one read per expert at a time (single flight) and a new
// demand read of an expert starts only after the previous one was delivered
// and its Ready released, so the fields are reused without a race.
type expertRec struct {
	p     *Planner
	key   cache.Key
	label string
	parts [][]byte // guarded by p.recMu

	h    *cache.Handle
	rs   []reader.Range
	out  chan<- expert.Ready
	done func(error) // readDone, bound once
}

// rec returns key's record, made on first use.
func (p *Planner) rec(key cache.Key) *expertRec {
	p.recMu.Lock()
	defer p.recMu.Unlock()
	r := p.recs[key]
	if r == nil {
		r = &expertRec{p: p, key: key, label: label(key.Layer, key.Expert)}
		r.done = r.readDone
		p.recs[key] = r
	}
	return r
}

// readDone is the demand read's Done: complete the cache entry and deliver.
func (r *expertRec) readDone(err error) {
	h, rs, out := r.h, r.rs, r.out
	h.Complete(err)
	r.p.deliver(out, r, h, rs, err)
}

// Settle is called once per layer and token with every expert the layer's
// router picked (routed), before the first Plan of that layer: speculative
// reads of this layer that the router did not pick and that no lane has
// started are withdrawn, so a wrong guess costs no I/O once the truth is
// known; the guesses that were right stay (Plan promotes them if they still
// wait in the speculative queue).
func (p *Planner) Settle(layer int, routed []int) {
	if p.speculative.Load() == 0 {
		return
	}
	p.specMu.Lock()
	var drop []*reader.Ticket
	for k, tk := range p.specd {
		if k.Layer != layer || slices.Contains(routed, k.Expert) {
			continue
		}
		delete(p.specd, k) // a wrong guess, whether or not it can still be withdrawn
		drop = append(drop, tk)
	}
	p.specMu.Unlock()
	for _, tk := range drop {
		if tk.Withdraw() {
			p.withdrawn.Add(1)
		}
	}
}

// Plan looks up experts (distinct, rank order) of layer and sends each to out
// once its bytes are resident (or its read failed). out must have room for
// len(experts) values so no send blocks. Plan returns after every expert has
// been acquired and its read submitted; reads complete asynchronously. On an
// error return, experts not yet sent are sent with the error, so the consumer
// always receives exactly len(experts) values.
func (p *Planner) Plan(ctx context.Context, step, layer int, experts []int, out chan<- expert.Ready) error {
	p.cache.Batch(step, layer)
	p.lastLayer.Store(int64(layer))
	if p.policy != nil {
		p.policy.Observe(step, layer, experts)
	}
	order := p.hitsFirst(layer, experts)
	for i, e := range order {
		if err := p.one(ctx, layer, e, out); err != nil {
			for _, e2 := range order[i:] {
				out <- expert.Ready{Expert: e2, Err: err}
			}
			return err
		}
	}
	return nil
}

func (p *Planner) one(ctx context.Context, layer, e int, out chan<- expert.Ready) error {
	rs := p.layout.ExpertRanges(layer, e)
	key := cache.Key{Layer: layer, Expert: e}
	r := p.rec(key)
	h, st, err := p.cache.Acquire(ctx, key, reader.SpanBytes(rs))
	if err != nil {
		return fmt.Errorf("%s: %w", r.label, err)
	}
	p.noteDemand(ctx, key)
	p.noteWarm(ctx, key)
	switch st {
	case cache.Hit:
		p.hits.Add(1)
		p.deliver(out, r, h, rs, nil)
	case cache.InFlight:
		p.joins.Add(1)
		p.wg.Add(1)
		go func() {
			defer p.wg.Done()
			err := h.Wait(ctx)
			if err == nil {
				err = h.Err()
			}
			p.deliver(out, r, h, rs, err)
		}()
	case cache.Miss:
		p.misses.Add(1)
		r.h, r.rs, r.out = h, rs, out
		req := reader.Request{Buf: h.Buf(), Ranges: rs, Label: r.label, Done: r.done}
		if err := p.lanes.Submit(ctx, req); err != nil {
			h.Complete(err)
			h.Release()
			return fmt.Errorf("%s: %w", r.label, err)
		}
	}
	return nil
}

// deliver hands the expert to the FFN stage: its projections, pinned by h,
// or the error (h released).
func (p *Planner) deliver(out chan<- expert.Ready, r *expertRec, h *cache.Handle, rs []reader.Range, err error) {
	if err == nil {
		p.recMu.Lock()
		parts := r.parts
		p.recMu.Unlock()
		if parts, err = reader.Views(parts[:0], h.Buf(), rs); err == nil {
			p.recMu.Lock()
			r.parts = parts
			p.recMu.Unlock()
			out <- expert.Ready{Expert: r.key.Expert, Parts: parts, Lease: h}
			return
		}
	}
	h.Release()
	out <- expert.Ready{Expert: r.key.Expert, Err: err}
}

// noteDemand counts a demanded expert that was guessed for this layer and, if
// its speculative read still waits in the queue, moves it to demand priority.
func (p *Planner) noteDemand(ctx context.Context, k cache.Key) {
	if p.speculative.Load() == 0 {
		return
	}
	p.specMu.Lock()
	tk, ok := p.specd[k]
	if ok {
		delete(p.specd, k)
		p.used.Add(1)
	}
	p.specMu.Unlock()
	if tk != nil && tk.Promote(ctx) {
		p.promoted.Add(1)
	}
}

// Speculate issues the policy's predicted reads for layer (typically the
// layer after the one being computed). Predictions already resident or in
// flight are skipped; a prediction never waits for a slot (it is dropped
// when no resident slot is free or evictable), and the lanes serve it only
// when no demand read is queued, so speculation cannot stall demand.
func (p *Planner) Speculate(step, layer int) {
	if p.spec == 0 {
		return
	}
	p.SpeculateSet(layer, p.policy.Predict(step, layer, p.spec), false)
}

// SpeculateSet issues speculative reads of experts (best first) of layer,
// whatever the policy, under Speculate's rules: a prompt pass's guess of the
// next layer's routed set (the pipeline applies that layer's router to every
// prompt token). It stops at the first guess the speculative queue has no
// room for. anyLane lets every lane serve the reads (reader.Request.AnyLane),
// not only --prefetch-lanes of them; they still wait while demand reads are
// queued.
func (p *Planner) SpeculateSet(layer int, experts []int, anyLane bool) {
	for _, e := range experts {
		key := cache.Key{Layer: layer, Expert: e}
		if p.cache.Contains(key) {
			p.skipped.Add(1)
			continue
		}
		rs := p.layout.ExpertRanges(layer, e)
		// Prefetch never waits, never takes a transient slot and is not a
		// lookup: a wrong guess costs a resident slot, not a hit statistic.
		h, ok, err := p.cache.Prefetch(key, reader.SpanBytes(rs))
		if err != nil {
			return
		}
		if !ok {
			p.skipped.Add(1)
			continue
		}
		req := reader.Request{Buf: h.Buf(), Ranges: rs, Label: label(layer, e) + " (prefetch)", AnyLane: anyLane, Done: func(err error) {
			if errors.Is(err, reader.ErrWithdrawn) {
				h.Release() // never read: the entry and its slot go (cache.ErrAbandoned)
				return
			}
			h.Complete(err)
			h.Release()
		}}
		tk, err := p.lanes.Offer(req)
		if err != nil || tk == nil {
			h.Release()
			if err != nil {
				return
			}
			p.skipped.Add(1) // the speculative queue is full: guessing further is pointless
			return
		}
		p.speculative.Add(1)
		p.specMu.Lock()
		p.specd[key] = tk
		p.specMu.Unlock()
	}
}

// Close waits for the planner's waiter goroutines.
func (p *Planner) Close() { p.wg.Wait() }
