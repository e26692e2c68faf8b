package serve

// parallel.go: --parallel N (N > 1): N decode slots, each its own sequence
// with -c / N positions (llama-server's split) or, with --kv-unified, up to
// -c of one pool of -c positions they share, decoded together by a
// decode.Batch — one forward pass per step over every slot with work, each
// layer's experts read once for the batch. A request goes to a free slot
// (the one holding the largest share of its prompt when above
// --slot-prompt-similarity, else the least recently used) and reuses that
// slot's KV under the tenant rule (tenant.go), slot by slot; it queues
// while every slot is busy, and leaves its slot at once when its client goes.

import (
	"context"
	"fmt"
	"slices"
	"sync"
	"time"

	"github.com/rs/zerolog"

	"github.com/pipe-engine/pipe/decode"
	"github.com/pipe-engine/pipe/metrics"
	"github.com/pipe-engine/pipe/sample"
)

// kvOwner is who filled a KV cache: the tenant of the request that last used
// it and how many of its tokens were that request's prompt.
type kvOwner struct {
	who  tenant
	seen bool
	n    int
}

// mayReuse reports whether who's prompt ids may keep the prefix it shares
// with hist, the cache's tokens (tenant.go's rule).
func (o *kvOwner) mayReuse(who tenant, ids, hist []int32) bool {
	return o.seen && who == o.who &&
		(who.keyed || (o.n <= len(hist) && len(ids) >= o.n && slices.Equal(ids[:o.n], hist[:o.n])))
}

// record makes who, with a prompt of n tokens, the cache's owner.
func (o *kvOwner) record(who tenant, n int) { o.who, o.seen, o.n = who, true, n }

// batchSlots are the server's slots with --parallel above 1.
type batchSlots struct {
	b      *decode.Batch
	mu     sync.Mutex
	owners []kvOwner // mu-guarded: the scheduler (MayReuse, OnSlot), slot restore and erase
}

// newBatchSlots makes n slots of nCtx positions each.
// Each pass counts on met (n_decode_total, n_busy_slots_per_decode).
func newBatchSlots(o Options, nCtx int, met *meters) (*batchSlots, error) {
	logStep := stepLogger(o.Log)
	onStep := func(st decode.Step) {
		met.passes(1, st.Seqs)
		if logStep != nil {
			logStep(st)
		}
	}
	b, err := o.Model.NewBatch(decode.BatchOptions{Slots: o.Parallel, Ctx: nCtx, Ubatch: o.Ubatch, Similarity: o.SlotSimilarity,
		Unified: o.KVUnified, OnStep: onStep})
	if err != nil {
		return nil, err
	}
	return &batchSlots{b: b, owners: make([]kvOwner, o.Parallel)}, nil
}

// generateBatched is generate on a slot of the batch.
func (s *generator) generateBatched(ctx context.Context, j *job, em emitter, start time.Time, o *outcome) error {
	o.promptTokens = len(j.ids)
	s.limit(j, o)
	chain, err := s.chainOf(j)
	if err != nil {
		return err
	}
	if err := em.begin(); err != nil {
		return err
	}
	defer func() {
		s.met.setEngine(s.counters())
		s.met.generation(*o)
	}()
	gen := s.batchGen(j, chain, start, o)
	if s.o.ContextShift { // the batch reuses the slot's prefix of the shifted sequence
		gen = s.shifting(s.shiftPlan(j), j.ids, gen, func(seq []int32) []int32 { return seq }, o)
	}
	return s.run(ctx, j, chain, j.ids, gen, em, start, o)
}

// batchGen is the genFunc of job j on the batch: it queues for a slot
// (the queue and busy gauges follow it) and records the slot's new owner
// and the prompt tokens its cache held.
func (s *generator) batchGen(j *job, chain *sample.Chain, start time.Time, o *outcome) genFunc {
	return func(ctx context.Context, ids []int32, maxTokens int, onPrompt func(int) error, onToken func(decode.Token) error) (decode.Result, error) {
		bs := s.batch
		var atSlot func(cached, fed int) error // the slot's cache known: progress from its start
		if onPrompt != nil {
			atSlot = func(cached, fed int) error { o.cachedTokens = cached; return onPrompt(fed) }
		}
		placed := false // set by OnSlot, read after Generate returned
		s.met.queue(1)
		pin := slotOf(j) >= 0
		res, err := bs.b.Generate(ctx, decode.Request{IDs: ids, Chain: chain, MaxTokens: maxTokens, NoCache: j.noCache, Given: start,
			PinSlot: pin, Slot: slotOf(j), OnPrompt: atSlot, Batch: s.o.Batch,
			MayReuse: func(slot int, hist []int32) bool {
				bs.mu.Lock()
				defer bs.mu.Unlock()
				return bs.owners[slot].mayReuse(j.who, ids, hist)
			},
			OnSlot: func(slot int) {
				bs.mu.Lock()
				bs.owners[slot].record(j.who, len(ids))
				bs.mu.Unlock()
				placed, o.queue, o.slot = true, time.Since(start), slot
				s.met.queue(-1)
				s.met.setBusy(true)
			}}, onToken)
		if !placed {
			s.met.queue(-1)
			return res, err
		}
		s.met.setBusy(false)
		o.cachedTokens = len(ids) - res.PromptTokens
		o.eng = shareOf(res, s.counters())
		return res, err
	}
}

// counters are the engine's counters: read from the engine by the one
// session's generation (which decodes on its own goroutine), from the
// batch's last pass with slots (the scheduler goroutine decodes).
func (s *generator) counters() metrics.Counters {
	if s.batch != nil {
		return s.batch.b.Counters()
	}
	return s.o.Model.Engine().Metrics().Counters
}

// slotsInfo is GET /slots' array: every slot, as llama-server's.
func (s *generator) slotsInfo() []map[string]any {
	params := s.settings(nil, s.o.MaxTokens)
	if s.batch == nil {
		return []map[string]any{{"id": 0, "n_ctx": s.nCtx, "speculative": false, "is_processing": s.met.running(), "params": params}}
	}
	var out []map[string]any
	for _, si := range s.batch.b.Slots() {
		o := map[string]any{"id": si.ID, "n_ctx": si.Ctx, "speculative": false, "is_processing": si.Processing}
		if si.Served { // llama-server shows params from a slot's first task on
			o["params"] = params
		}
		out = append(out, o)
	}
	return out
}

// totalSlots is /props' total_slots.
func (s *generator) totalSlots() int {
	if s.batch == nil {
		return 1
	}
	return len(s.batch.owners)
}

// parallelCtx is each slot's context: -c split among --parallel slots, as
// llama-server's, or all of -c with KVUnified (one pool the slots share);
// an error when a slot would be too small to generate.
func parallelCtx(o Options) (int, error) {
	if o.Parallel < 0 || o.SlotSimilarity < 0 || o.SlotSimilarity > 1 || o.Ubatch < 0 || o.Batch < 0 {
		return 0, fmt.Errorf("serve: --parallel %d, --slot-prompt-similarity %g, -ub %d, -b %d: need --parallel >= 1, a similarity in 0..1, -ub >= 0, -b >= 0",
			o.Parallel, o.SlotSimilarity, o.Ubatch, o.Batch)
	}
	n := o.Ctx / max(o.Parallel, 1)
	if o.KVUnified {
		n = o.Ctx
	}
	if n < 2 {
		return 0, fmt.Errorf("serve: -c %d split among --parallel %d slots leaves %d positions per slot", o.Ctx, o.Parallel, n)
	}
	return n, nil
}

// makeSlots makes the one session, or the batch of --parallel slots.
func (s *generator) makeSlots() error {
	nCtx, err := parallelCtx(*s.o)
	if err != nil {
		return err
	}
	if s.o.Parallel > 1 {
		s.nCtx = nCtx
		s.batch, err = newBatchSlots(*s.o, nCtx, s.met)
		return err
	}
	sess, err := s.o.Model.NewSession(decode.SessionOptions{Ctx: s.o.Ctx, Sampling: s.o.Sampling})
	if err != nil {
		return err
	}
	s.slot, s.nCtx = &decodeSlot{sess: sess, slot: make(chan struct{}, 1), met: s.met}, sess.Ctx()
	return nil
}

// slotOf is the slot job j asks for with id_slot (-1: any).
func slotOf(j *job) int {
	if j.idSlot == nil {
		return -1
	}
	return *j.idSlot
}

// checkSlot refuses an id_slot outside the server's slots (-1: any).
func (s *generator) checkSlot(j *job) error {
	if id := slotOf(j); id < -1 || id >= s.totalSlots() {
		return badRequest("id_slot %d: the server has %d slots (0..%d; -1: any)", id, s.totalSlots(), s.totalSlots()-1)
	}
	return nil
}

// shareOf is a batched request's share of the engine's work (decode.Step:
// each pass's I/O split among its tokens) as the counters the request log
// reports; now gives the engine's mode (streaming, cached).
func shareOf(r decode.Result, now metrics.Counters) metrics.Counters {
	return metrics.Counters{Decode: r.Lookups, ReadBytes: r.PrefillReadBytes + r.DecodeReadBytes, Stall: r.Stall,
		Streaming: now.Streaming, Cached: now.Cached}
}

// stepLogger logs every batched pass at debug level (event "step"): the
// slots and tokens in it and its expert I/O, which its tokens share
// (decode.Step).
func stepLogger(log zerolog.Logger) func(decode.Step) {
	if log.GetLevel() > zerolog.DebugLevel {
		return nil
	}
	return func(st decode.Step) {
		log.Debug().Str("event", "step").Int64("pass", st.Pass).Int("slots", st.Seqs).Int("tokens", st.Tokens).
			Int("prompt_tokens", st.PromptTokens).Float64("wall_ms", ms(st.Wall)).Float64("stall_ms", ms(st.Stall)).
			Float64("read_MiB", float64(st.ReadBytes)/(1<<20)).Int64("hits", st.Lookups.Hits).Int64("joins", st.Lookups.Joins).
			Int64("misses", st.Lookups.Misses).Msg("batched pass")
	}
}
