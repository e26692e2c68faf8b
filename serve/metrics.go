package serve

import (
	"fmt"
	"io"
	"maps"
	"slices"
	"sync"
	"time"

	"github.com/pipe-engine/pipe/metrics"
)

// meters are the server's counters for /metrics, safe for concurrent use.
type meters struct {
	mu sync.Mutex

	requests       map[int]int64 // by HTTP status
	promptTokens   int64         // prompt tokens of completed generations
	cachedTokens   int64         // of them, reused from the KV cache
	genTokens      int64
	prefillSeconds float64
	decodeSeconds  float64
	lastTokS       float64
	queued, busy   int
	seqMax         int              // the longest prompt + generation of a request
	nDecode, nBusy int64            // forward passes, and the busy slots summed over them
	eng            metrics.Counters // the engine's, at the last token
	start          time.Time        // when the server was made (Process-Start-Time-Unix)
}

func newMeters() *meters { return &meters{requests: map[int]int64{}, start: time.Now()} }

func (m *meters) request(status int) {
	m.mu.Lock()
	m.requests[status]++
	m.mu.Unlock()
}

// generation records one finished (or cancelled) generation.
func (m *meters) generation(o outcome) {
	m.mu.Lock()
	defer m.mu.Unlock()
	m.promptTokens += int64(o.promptTokens)
	m.cachedTokens += int64(o.cachedTokens)
	m.genTokens += int64(o.genTokens)
	m.seqMax = max(m.seqMax, o.promptTokens+o.genTokens)
	m.prefillSeconds += o.prefill.Seconds()
	m.decodeSeconds += o.decode.Seconds()
	if v, ok := o.tokS(); ok {
		m.lastTokS = v
	}
}

// passes counts n forward passes of busy slots each.
func (m *meters) passes(n int64, busy int) {
	m.mu.Lock()
	m.nDecode += n
	m.nBusy += n * int64(busy)
	m.mu.Unlock()
}

func (m *meters) setEngine(c metrics.Counters) {
	m.mu.Lock()
	m.eng = c
	m.mu.Unlock()
}

func (m *meters) queue(delta int) {
	m.mu.Lock()
	m.queued += delta
	m.mu.Unlock()
}

// running reports whether a generation holds a decode slot.
func (m *meters) running() bool {
	m.mu.Lock()
	defer m.mu.Unlock()
	return m.busy > 0
}

// setBusy counts a generation that took (true) or left (false) a slot.
func (m *meters) setBusy(b bool) {
	m.mu.Lock()
	if b {
		m.busy++
	} else {
		m.busy--
	}
	m.mu.Unlock()
}

// write renders the counters in the Prometheus text exposition format.
func (m *meters) write(w io.Writer) error {
	m.mu.Lock()
	defer m.mu.Unlock()
	p := &promWriter{w: w}
	p.header("pipe_requests_total", "counter", "HTTP requests answered, by status.")
	for _, code := range slices.Sorted(maps.Keys(m.requests)) {
		p.printf("pipe_requests_total{status=\"%d\"} %d\n", code, m.requests[code])
	}
	p.metric("pipe_prompt_tokens_total", "counter", "Prompt tokens of generations.", float64(m.promptTokens))
	p.metric("pipe_prompt_tokens_cached_total", "counter", "Prompt tokens whose KV was reused from the previous request (not prefilled).", float64(m.cachedTokens))
	p.metric("pipe_generated_tokens_total", "counter", "Tokens generated.", float64(m.genTokens))
	p.metric("pipe_prefill_seconds_total", "counter", "Time spent prefilling prompts.", m.prefillSeconds)
	p.metric("pipe_decode_seconds_total", "counter", "Time spent generating tokens.", m.decodeSeconds)
	p.metric("pipe_decode_tokens_per_second", "gauge", "Decode rate of the last generation.", m.lastTokS)
	if pct, ok := m.eng.HitPct(); ok {
		p.metric("pipe_expert_cache_hit_percent", "gauge", "Expert-cache hit rate of decode steps since start, in percent: hits ÷ lookups, a join on a read in flight not a hit (the CSV's cache_hit_pct).", pct)
	}
	if m.eng.Streaming {
		p.header("pipe_expert_lookups_total", "counter", "Expert-cache lookups since start, by pass (decode, prompt) and outcome (hit: resident; join: a read in flight; miss: a read started).")
		for _, l := range []struct {
			pass string
			n    metrics.Lookups
		}{{"decode", m.eng.Decode}, {"prompt", m.eng.Prompt}} {
			p.printf("pipe_expert_lookups_total{pass=%q,outcome=\"hit\"} %d\n", l.pass, l.n.Hits)
			p.printf("pipe_expert_lookups_total{pass=%q,outcome=\"join\"} %d\n", l.pass, l.n.Joins)
			p.printf("pipe_expert_lookups_total{pass=%q,outcome=\"miss\"} %d\n", l.pass, l.n.Misses)
		}
		p.metric("pipe_expert_read_bytes_total", "counter", "Expert bytes read from the model file.", float64(m.eng.ReadBytes))
	}
	p.metric("pipe_expert_stall_seconds_total", "counter", "Time the expert FFN waited for expert bytes.", m.eng.Stall.Seconds())
	p.metric("pipe_requests_queued", "gauge", "Requests waiting for a decode slot.", float64(m.queued))
	p.metric("pipe_requests_running", "gauge", "Requests decoding (at most --parallel).", float64(m.busy))
	m.writeLlama(p)
	return p.err
}

type promWriter struct {
	w   io.Writer
	err error
}

func (p *promWriter) printf(format string, a ...any) {
	if p.err == nil {
		_, p.err = fmt.Fprintf(p.w, format, a...)
	}
}

func (p *promWriter) header(name, typ, help string) {
	p.printf("# HELP %s %s\n# TYPE %s %s\n", name, help, name, typ)
}

func (p *promWriter) metric(name, typ, help string, v float64) {
	p.header(name, typ, help)
	p.printf("%s %g\n", name, v)
}
