package sink

import (
	"time"
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
