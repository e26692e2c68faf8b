package sink

import (
	"math"
	"time"

	"github.com/pipe-engine/pipe/metrics"
)

// start holds what the sink knows about the start of a run: time to first
// token and the expert bytes its prefill read.
type start struct {
	ttft         time.Duration
	hasTTFT      bool
	prefillBytes int64 // expert bytes read during the prefill (0: unknown)
}

// FirstToken records the time to first token of the run — from the moment the
// prompt was given to the moment the first generated token was sampled
// (tokenization, prefill and the first sample) — and logs the `first_token`
// event. Only the first call counts: later prompts of an interactive session
// or a server find a warm cache, and the run's TTFT is its cold start.
func (s *Sink) FirstToken(d time.Duration) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.start.hasTTFT {
		return
	}
	s.start.ttft, s.start.hasTTFT = d, true
	s.o.Log.Info().Str("event", "first_token").Float64("ttft_ms", ms(d)).Msg("first_token")
}

// PrefillRead records the expert bytes the prefill read from the model file,
// for the prefill read rate (prefill_read_MiB, prefill_read_GB_s).
func (s *Sink) PrefillRead(bytes int64) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.start.prefillBytes = bytes
}

func ms(d time.Duration) float64 { return float64(d) / 1e6 }

// startTrailer returns the trailer keys of the run's start: ttft_ms,
// prefill_read_MiB and prefill_read_GB_s (decimal GB per second of prefill).
func (s *Sink) startTrailer() []Field {
	var out []Field
	if s.start.hasTTFT {
		out = num(out, "ttft_ms", ms(s.start.ttft), 1)
	}
	if s.start.prefillBytes > 0 {
		out = num(out, "prefill_read_MiB", float64(s.start.prefillBytes)/(1<<20), 1)
		if s.prefillS > 0 {
			out = num(out, "prefill_read_GB_s", float64(s.start.prefillBytes)/1e9/s.prefillS, 3)
		}
	}
	return out
}

// PrefillLayer logs one row of a prompt pass's per-layer accounting as the
// `prefill_layer` event (debug): pass, layer, tokens, wall_ms, compute_ms,
// stall_ms (the FFN stage waiting for expert bytes), slot_wait_ms (demand
// lookups waiting for a cache slot, a cause within the stall), io_ms (lane
// busy time summed over the lanes), lanes_busy_pct (io ÷ wall × lanes),
// read_bytes, read_GB_s, and the layer's lookups (hits, joins, misses) —
// each the quantity metrics.Counters defines, over the row's span.
func (s *Sink) PrefillLayer(l metrics.Layer, lanes int) {
	ev := s.o.Log.Debug()
	if ev == nil {
		return
	}
	ev = ev.Str("event", "prefill_layer").Int("pass", l.Pass).Int("layer", l.Layer).Int("tokens", l.Tokens).
		Float64("wall_ms", ms(l.Wall)).Float64("compute_ms", ms(l.Compute)).Float64("stall_ms", ms(l.Stall)).
		Float64("slot_wait_ms", ms(l.SlotWait)).Float64("io_ms", ms(l.IOBusy)).Int64("read_bytes", l.ReadBytes).
		Int64("hits", l.Prompt.Hits).Int64("joins", l.Prompt.Joins).Int64("misses", l.Prompt.Misses)
	if b := l.LanesBusy(lanes); !math.IsNaN(b) {
		ev = ev.Float64("lanes_busy_pct", 100*b)
	}
	if l.Wall > 0 {
		ev = ev.Float64("read_GB_s", float64(l.ReadBytes)/1e9/l.Wall.Seconds())
	}
	ev.Msg("prefill_layer")
}
