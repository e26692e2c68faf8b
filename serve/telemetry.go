package serve

import (
	"sync/atomic"
	"time"

	"github.com/pipe-engine/pipe/decode"
	"github.com/pipe-engine/pipe/metrics"
)

// telemetry is the engine's work behind a streamed chunk, sent as the
// chunk's "pipe" field (an extension OpenAI and llama-server clients
// ignore; the chat page at / draws it): the decode rate, the expert cache's
// hit rate, the wait for expert bytes, the bytes read, and per layer how
// many routed experts were in the cache (hit) or not (miss) when routed.
type telemetry struct {
	Tokens  int      `json:"tokens"`   // generated so far
	Prompt  bool     `json:"prompt"`   // the first chunk: its first token came from the prompt pass, which the counters include
	TokS    *float64 `json:"tok_s"`    // the rate of the tokens since the last chunk (null for the first)
	HitPct  *float64 `json:"hit_pct"`  // expert-cache hit rate of their lookups (null: no cache or no lookups)
	StallMs float64  `json:"stall_ms"` // their wait for expert bytes
	ReadMiB float64  `json:"read_MiB"` // expert bytes they read
	Layers  [][2]int `json:"layers"`   // [layer] = {hits, misses} of their routed experts
}

// tracker turns the engine's counters and routings into telemetry, chunk by
// chunk. It lives on the decoding goroutine (its strip is filled by the
// model's route observer, which runs there too).
type tracker struct {
	last   metrics.Counters
	lastAt time.Time
	tokens int
	first  bool
	strip  [][2]int
}

// strips hands the running generation's per-layer strip of expert hits and
// misses from the model's route observer (observe) to the generation's
// tracker (newTracker).
type strips struct {
	m   *decode.Model
	cur atomic.Pointer[[][2]int] // the running generation's strip
}

// newTracker starts a generation's tracker and points the route observer
// at its strip.
func (b *strips) newTracker(start time.Time, now metrics.Counters) *tracker {
	eng := b.m.Engine()
	t := &tracker{last: now, lastAt: start, first: true, strip: make([][2]int, eng.Desc().HParams.NLayer)}
	b.cur.Store(&t.strip)
	return t
}

// take is the telemetry of the n tokens since the last call, at counters
// now; the strip starts over.
func (t *tracker) take(now metrics.Counters, n int) *telemetry {
	at := time.Now()
	d := now.Sub(t.last)
	t.tokens += n
	tel := &telemetry{Tokens: t.tokens, Prompt: t.first, StallMs: float64(d.Stall) / 1e6, ReadMiB: float64(d.ReadBytes) / (1 << 20),
		Layers: append([][2]int(nil), t.strip...)}
	if !t.first && at.After(t.lastAt) {
		v := float64(n) / at.Sub(t.lastAt).Seconds()
		tel.TokS = &v
	}
	if v, ok := d.HitPct(); ok {
		tel.HitPct = &v
	}
	clear(t.strip)
	t.last, t.lastAt, t.first = now, at, false
	return tel
}

// observe counts a decode step's routed experts per layer as hits (in the
// expert cache when routed) or misses, into the running generation's
// strip.
func (b *strips) observe(rt decode.Route) {
	sp := b.cur.Load()
	if rt.Prefill || sp == nil || rt.Layer >= len(*sp) {
		return
	}
	eng := b.m.Engine()
	for _, experts := range rt.IDs {
		for _, e := range experts {
			if eng.Resident(rt.Layer, e) {
				(*sp)[rt.Layer][0]++
			} else {
				(*sp)[rt.Layer][1]++
			}
		}
	}
}
