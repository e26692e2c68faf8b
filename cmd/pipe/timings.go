package main

import (
	"fmt"
	"math"
	"strings"
	"time"

	"github.com/pipe-engine/pipe/decode"
	"github.com/pipe-engine/pipe/metrics"
)

// timings is the human end-of-run line, llama.cpp's llama_perf_context_print
// in one line, for a log meant for a person (a terminal, or --log-format
// console); a JSON log has the `summary` event instead and no such line:
//
//	[prompt 128 tok 85.3 tok/s | 64 tok 5.12 tok/s (steady 5.40) | TTFT 1.52 s | hit 61.2% | read 830 MiB (prompt 612)]
//
// It adds up the decode calls of a run (one, or every reply of -i).
type timings struct {
	calls                   int
	promptTok, genTok       int
	prefill, decode         time.Duration
	ttft                    time.Duration // of the first call
	prefillRead, decodeRead int64
	lookups                 metrics.Lookups
}

// add counts a call; one that did nothing (a turn that did not fit the
// context) is left out.
func (t *timings) add(r decode.Result) {
	if r.PromptTokens == 0 && len(r.Tokens) == 0 {
		return
	}
	if t.calls == 0 {
		t.ttft = r.TTFT
	}
	t.calls++
	t.promptTok += r.PromptTokens
	t.genTok += len(r.Tokens)
	t.prefill += r.Prefill
	t.decode += r.Decode
	t.prefillRead += r.PrefillReadBytes
	t.decodeRead += r.DecodeReadBytes
	t.lookups = t.lookups.Add(r.Lookups)
}

// line formats the sums; steady is the steady-window tok/s (NaN: none).
func (t *timings) line(steady float64) string {
	var b strings.Builder
	b.WriteString("[")
	if t.calls > 1 {
		fmt.Fprintf(&b, "%d turns | ", t.calls)
	}
	fmt.Fprintf(&b, "prompt %d tok", t.promptTok)
	if t.prefill > 0 {
		fmt.Fprintf(&b, " %.1f tok/s", float64(t.promptTok)/t.prefill.Seconds())
	}
	fmt.Fprintf(&b, " | %d tok", t.genTok)
	if t.decode > 0 && t.genTok > 0 {
		fmt.Fprintf(&b, " %.2f tok/s", float64(t.genTok)/t.decode.Seconds())
	}
	if !math.IsNaN(steady) && !math.IsInf(steady, 0) && steady > 0 {
		fmt.Fprintf(&b, " (steady %.2f)", steady)
	}
	if t.calls > 0 && t.genTok > 0 {
		fmt.Fprintf(&b, " | TTFT %s", shortDuration(t.ttft))
	}
	if pct, ok := t.lookups.HitPct(); ok {
		fmt.Fprintf(&b, " | hit %.1f%%", pct)
	}
	if t.prefillRead+t.decodeRead > 0 {
		fmt.Fprintf(&b, " | read %.0f MiB (prompt %.0f)", float64(t.prefillRead+t.decodeRead)/(1<<20), float64(t.prefillRead)/(1<<20))
	}
	b.WriteString("]")
	return b.String()
}

// steadyOf is the summary's steady-window tok/s, or NaN when the run was
// too short to have one.
func steadyOf(s metrics.Summary) float64 {
	if s.Tokens == 0 {
		return math.NaN()
	}
	return s.SteadyTokS
}

// shortDuration prints d in ms below a second, else in seconds.
func shortDuration(d time.Duration) string {
	if d < time.Second {
		return fmt.Sprintf("%.0f ms", float64(d)/1e6)
	}
	return fmt.Sprintf("%.2f s", d.Seconds())
}
