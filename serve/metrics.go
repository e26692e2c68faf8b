package serve

import (
	"fmt"
	"io"
	"maps"
	"slices"
	"sync"
	"time"

	"github.com/pipe-engine/pipe/stages"
)

// engineCounters are the engine's cumulative counters at one moment. They
// are read on the decoding goroutine only (stages.Engine.Profile is not safe
// to read while a forward pass runs).
type engineCounters struct {
	lookups, hits int64 // expert-cache lookups and hits (joins count as hits)
	readBytes     int64 // expert bytes read by the reader lanes
	stall         time.Duration
	streaming     bool
}

func readCounters(e *stages.Engine) engineCounters {
	c := engineCounters{stall: e.Profile().Stall}
	if ca := e.Cache(); ca != nil {
		st := ca.Stats()
		c.hits = st.Hits + st.Joins
		c.lookups = c.hits + st.Misses
		c.streaming = true
	}
	if l := e.Lanes(); l != nil {
		c.readBytes = l.Stats().Bytes
	}
	return c
}

// sub is the change from b to c.
func (c engineCounters) sub(b engineCounters) engineCounters {
	return engineCounters{lookups: c.lookups - b.lookups, hits: c.hits - b.hits,
		readBytes: c.readBytes - b.readBytes, stall: c.stall - b.stall, streaming: c.streaming}
}

// hitPct is the hit rate in percent; ok is false without lookups.
func (c engineCounters) hitPct() (float64, bool) {
	if c.lookups == 0 {
		return 0, false
	}
	return 100 * float64(c.hits) / float64(c.lookups), true
}

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
	eng            engineCounters
}

func newMeters() *meters { return &meters{requests: map[int]int64{}} }

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
	m.prefillSeconds += o.prefill.Seconds()
	m.decodeSeconds += o.decode.Seconds()
	if v, ok := o.tokS(); ok {
		m.lastTokS = v
	}
}

func (m *meters) setEngine(c engineCounters) {
	m.mu.Lock()
	m.eng = c
	m.mu.Unlock()
}

func (m *meters) queue(delta int) {
	m.mu.Lock()
	m.queued += delta
	m.mu.Unlock()
}

func (m *meters) setBusy(b bool) {
	m.mu.Lock()
	m.busy = 0
	if b {
		m.busy = 1
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
	if pct, ok := m.eng.hitPct(); ok {
		p.metric("pipe_expert_cache_hit_percent", "gauge", "Expert-cache hit rate since start, in percent.", pct)
	}
	if m.eng.streaming {
		p.metric("pipe_expert_read_bytes_total", "counter", "Expert bytes read from the model file.", float64(m.eng.readBytes))
	}
	p.metric("pipe_expert_stall_seconds_total", "counter", "Time the expert FFN waited for expert bytes.", m.eng.stall.Seconds())
	p.metric("pipe_requests_queued", "gauge", "Requests waiting for the decode slot.", float64(m.queued))
	p.metric("pipe_requests_running", "gauge", "Requests decoding (0 or 1).", float64(m.busy))
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
