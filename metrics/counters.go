package metrics

import (
	"math"
	"time"
)

// Lookups are demand lookups of the expert cache — one per routed expert of
// a forward pass — by outcome:
//
//   - a hit found the expert resident and ready;
//   - a join found a read of it already in flight (a speculative or warm
//     read, or another token's demand read) and waits for that read;
//   - a miss started a read.
//
// A join is not a hit: its bytes were not there when the FFN asked for them.
type Lookups struct {
	Hits, Joins, Misses int64
}

// Total is the number of lookups.
func (l Lookups) Total() int64 { return l.Hits + l.Joins + l.Misses }

// HitPct is Hits ÷ Total in percent (the CSV's cache_hit_pct, /metrics'
// pipe_expert_cache_hit_percent); ok is false without lookups.
func (l Lookups) HitPct() (pct float64, ok bool) {
	n := l.Total()
	if n == 0 {
		return 0, false
	}
	return 100 * float64(l.Hits) / float64(n), true
}

// Add is l + b.
func (l Lookups) Add(b Lookups) Lookups {
	return Lookups{Hits: l.Hits + b.Hits, Joins: l.Joins + b.Joins, Misses: l.Misses + b.Misses}
}

// Sub is l − b.
func (l Lookups) Sub(b Lookups) Lookups {
	return Lookups{Hits: l.Hits - b.Hits, Joins: l.Joins - b.Joins, Misses: l.Misses - b.Misses}
}

// Counters are an engine's cumulative expert counters since it opened, the
// one definition of a hit, a join, a miss, bytes read and stall that the
// per-token CSV, the run summary, decode.Result, `pipe bench` and
// `pipe report` (through the CSV and its summary) and the server's /metrics
// all read. Take deltas with Sub.
type Counters struct {
	// Decode are the lookups of decode steps (one token a pass), Prompt those
	// of prompt passes. Hit rates are decode's: a prompt pass reads each
	// routed expert once for all its tokens.
	Decode, Prompt Lookups
	// ReadBytes are the expert bytes the reader lanes read (demand,
	// speculative and warm reads); IOBusy is the lanes' busy time, summed
	// over the lanes.
	ReadBytes int64
	IOBusy    time.Duration
	// Stall is the time the FFN stage waited for expert bytes; Mgmt the time
	// spent in expert-cache bookkeeping.
	Stall, Mgmt time.Duration
	// SlotWait is the time demand lookups waited for a free cache slot
	// (every slot pinned; cache.Stats.WaitTime). The planner waits, not the
	// FFN stage: while it does, the FFN stage stalls on the experts behind
	// it, so SlotWait is a cause within Stall, not time beside it.
	SlotWait time.Duration
	// Streaming: routed experts are read by the reader lanes (else they are
	// slices of the mapped file and every field above but Stall is zero).
	// Cached: an expert cache keeps them between tokens (a budget above 0),
	// the condition for a hit rate.
	Streaming, Cached bool
	// Skipped is what the lossy routing modes changed (zero with every mode
	// off).
	Skipped Skips
}

// HitPct is the decode hit rate in percent; ok is false without a cache or
// without decode lookups.
func (c Counters) HitPct() (pct float64, ok bool) {
	if !c.Cached {
		return 0, false
	}
	return c.Decode.HitPct()
}

// Sub is the change from b to c (the flags are c's).
func (c Counters) Sub(b Counters) Counters {
	d := c
	d.Decode, d.Prompt = c.Decode.Sub(b.Decode), c.Prompt.Sub(b.Prompt)
	d.ReadBytes -= b.ReadBytes
	d.IOBusy -= b.IOBusy
	d.Stall -= b.Stall
	d.Mgmt -= b.Mgmt
	d.SlotWait -= b.SlotWait
	d.Skipped = c.Skipped.Sub(b.Skipped)
	return d
}

// Skips count what the lossy routing modes (router.Lossy) changed, in
// routed (token, slot) pairs of the forward passes they applied to.
type Skips struct {
	Routed      int64 // slots the modes looked at
	Dropped     int64 // missed experts not read (--moe-drop)
	Substituted int64 // experts replaced by a cached one (--moe-substitute)
	Trimmed     int64 // slots beyond the dynamic k (--moe-dynamic-k)
}

// Sub is s − b.
func (s Skips) Sub(b Skips) Skips {
	return Skips{s.Routed - b.Routed, s.Dropped - b.Dropped, s.Substituted - b.Substituted, s.Trimmed - b.Trimmed}
}

// SkipColumns are the per-token CSV columns of a run with a lossy mode on:
// the slots each mode skipped in that token's forward pass.
var SkipColumns = []string{"moe_dropped", "moe_substituted", "moe_trimmed"}

// Layer is one row of a prompt pass's per-layer accounting (one per MoE
// layer of each forward pass): Wall runs from the end of the row before (or
// the pass's start) to the end of the layer's FFN, so it holds the layer's
// attention and router as well as its experts; Compute is the measured busy
// time of the compute sections in that span (the per-token CSV's compute_ms
// definition); Counters is the change of the engine's counters over the
// span — Stall (the FFN stage waiting for expert bytes), SlotWait (demand
// lookups waiting for a cache slot, a cause within Stall), IOBusy and
// ReadBytes (the lanes: busy time summed over them, and bytes read, demand
// and speculative), the layer's lookups in Prompt.
type Layer struct {
	Pass   int // forward pass of the prompt (a long prompt is fed in chunks), 0-based
	Layer  int
	Tokens int // the pass's tokens
	Wall   time.Duration
	// Compute is measured, never derived from Wall: Wall − Compute − Stall
	// is what neither measures (scheduling, hand-offs).
	Compute time.Duration
	Counters
}

// LanesBusy is the fraction of the row's wall time the lanes were reading:
// IOBusy ÷ (Wall × lanes); NaN for an empty row or no lanes.
func (l Layer) LanesBusy(lanes int) float64 {
	if l.Wall <= 0 || lanes <= 0 {
		return math.NaN()
	}
	return float64(l.IOBusy) / (float64(l.Wall) * float64(lanes))
}
