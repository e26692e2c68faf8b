// Package sink is the per-token end of the decode pipeline: after each
// generated token the pipeline hands it one TokenMetrics record, and the sink
// writes it to the per-token CSV (`--csv`), logs it, updates the live status
// line (`--progress`), and at the end computes the run summary — mean and
// steady-window tok/s by package metrics' warm-up rule, the same code
// `pipe report` uses — which it writes as the CSV's `# summary` trailer and as
// the `summary` log event. It sees metrics only, never model data.
//
// # CSV
//
// The header is exactly metrics.Columns
// (step,steps,wall_ms,io_ms,compute_ms,read_bytes,cache_hit_pct,stall_ms,mgmt_ms,majflt,cpu_ms,resident_frac),
// followed by Options.ExtraColumns. Token hands each row to the sink's
// writer goroutine (see Concurrency), which gives it to the file in a single
// write (no user-space buffering; no fsync), so a reader sees every row a
// moment after its token — and a crash loses at most the rows still queued.
// Close writes every queued row, then appends
//
//	# summary tokens=… tok_s=… steady_tok_s=… warmup_tokens=… …
//
// even when the run ended with an error or was cancelled (call Fail first to
// record why; `status=ok|error|canceled`). Keys, in order, each present when
// known (cache_hit_pct only with a cache): tokens tok_s steady_tok_s
// warmup_tokens first5_wall_ms last_third_tok_s read_MiB MiB_per_token
// cache_hit_pct stall_share mgmt_share majflt_per_token cpu_occupancy load_s
// prefill_tokens prefill_s prefill_tok_s ttft_ms prefill_read_MiB
// prefill_read_GB_s cache_budget_MiB dense_MiB expert_MiB o_direct io_threads
// threads peak_rss_MiB status, then the caller's Set keys in call order (a
// Set of a key listed here replaces its value). Values never contain
// whitespace. peak_rss_MiB, with Options.PeakRSS (`pipe run` and `pipe
// serve` set it), is the process's own peak resident set when the trailer
// is written, which `pipe bench` reports.
//
// # Names
//
// One scheme for every summary (this trailer and event, `pipe bench`'s
// JSON, `pipe report`'s JSON): snake_case with the unit last — _ms, _s,
// _bytes, _MiB, _pct, _tok_s (tokens per second), _GB_s — and, in JSON, null
// (or an absent key) where a number does not apply, never -1.
//
// # Log events (a stable contract)
//
// JSON lines through the zerolog.Logger given in Options; the message and the
// `event` field both carry the event name, so `jq 'select(.event=="summary")'`
// works:
//
//   - `load` (info): load_seconds, dense_bytes, expert_bytes, budget_bytes,
//     o_direct (bool), lanes, threads, then LoadInfo.Extra fields.
//   - `prefill` (info): prefill_tokens, prefill_seconds, prefill_tok_s.
//   - `first_token` (info): ttft_ms, the time from the prompt to the first
//     generated token (FirstToken; the first prompt of the run only).
//   - `prefill_layer` (debug): one per MoE layer of each prompt forward
//     pass, where it waited (PrefillLayer: wall, compute, stall, slot wait,
//     lanes' busy time, bytes read, lookups).
//   - `token` (debug): every CSV column under its CSV name (extra columns
//     too); cache_hit_pct and resident_frac are null where the CSV has -1.
//   - `summary` (info, from Close): the trailer's keys, in its order, with
//     numbers in full precision (o_direct a bool), then error when the run
//     failed.
//
// # Concurrency
//
// The sink is a stage of the pipeline: New starts one writer goroutine and
// Close waits for it. Token counts the row for the summary (what
// Options.SummaryWindow keeps, never the row itself) and sends it
// through a bounded channel (RowBuffer rows) to that goroutine, which writes
// the CSV row and redraws the status line, so a slow disk or terminal does
// not stall decode; when the channel is full Token blocks rather than drop a
// row. A write error is kept and returned by the next Token and by Close.
// Log events go through the zerolog.Logger given in Options; cmd/pipe puts
// an AsyncWriter (the same kind of stage, for log lines) under it, so a
// blocked stderr pipe does not stall decode either. A Sink is safe for
// concurrent use (one mutex); the pipeline calls it from the decode
// goroutine. Token copies what it needs from m; the caller keeps ownership
// of m.Extra.
package sink

import (
	"context"
	"errors"
	"fmt"
	"io"
	"math"
	"os"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/pipe-engine/pipe/metrics"
	"github.com/rs/zerolog"
)

// TokenMetrics is one generated token's metrics (one CSV row).
type TokenMetrics = metrics.Token

// Sentinel errors.
var (
	// ErrClosed: Token after Close.
	ErrClosed = errors.New("sink closed")
	// ErrExtraColumns: a token's Extra does not match Options.ExtraColumns.
	ErrExtraColumns = errors.New("extra column count mismatch")
	// ErrColumnName: an extra column name is empty, repeated, a fixed column
	// or contains a comma, quote or whitespace.
	ErrColumnName = errors.New("bad extra column name")
	// ErrWindow: a negative Options.SummaryWindow.
	ErrWindow = errors.New("summary window must be >= 0")
)

// Field is a caller-supplied key/value for a log event or the summary.
type Field struct {
	Key   string
	Value any
}

// F builds a Field.
func F(key string, value any) Field { return Field{key, value} }

// LoadInfo describes the model load, for the `load` event and the summary.
type LoadInfo struct {
	Seconds     float64
	DenseBytes  int64
	ExpertBytes int64
	BudgetBytes int64 // expert-cache budget
	ODirect     bool
	Lanes       int // reader lanes (--io-threads)
	Threads     int // compute threads (-t)
	Extra       []Field
}

// Options configure a Sink.
type Options struct {
	// CSV is the per-token CSV path ("" = none). The file is created (or
	// truncated) by New, with Create when set (the caller's checks, e.g.
	// that it is not an input file) else os.Create, and closed by Close.
	CSV    string
	Create func(path string) (*os.File, error)
	// CSVWriter, if CSV is empty, receives the CSV instead (it is not closed).
	CSVWriter io.Writer
	// ExtraColumns are appended to the fixed header; TokenMetrics.Extra
	// carries their values in this order.
	ExtraColumns []string
	// Log receives the events; the zero Logger discards them.
	Log zerolog.Logger
	// Progress, if non-nil, is updated after every token (see NewProgress).
	Progress *Progress
	// Warmup forces the summary's warm-up token count; negative = the
	// metrics rule. Threads is the compute thread count for CPU occupancy
	// (LoadInfo.Threads overrides it when non-zero).
	Warmup  int
	Threads int
	// SummaryWindow bounds what the sink keeps for the summary: 0 keeps
	// every token's wall and compute time (16 bytes a token; the summary is
	// exactly metrics.Summarize's, as `pipe report` computes it from the
	// CSV); N > 0 keeps running sums and the first and last N tokens' times
	// (metrics.Stream), for a process that decodes without end (a server).
	SummaryWindow int
	// PeakRSS, if set, is read when the trailer is written for its
	// peak_rss_MiB (the process's peak resident bytes, sysmem.PeakRSS; a
	// negative value omits the key). Unset, the trailer has no such key and
	// depends only on the tokens and Set values.
	PeakRSS func() int64
}

// Sink collects per-token metrics. Create it with New and always Close it.
type Sink struct {
	mu       sync.Mutex
	o        Options
	w        io.Writer
	file     *os.File
	name     string          // CSV name for errors
	stream   *metrics.Stream // what the summary needs of every token
	wr       *writer         // the stage goroutine writing rows and the status line
	load     *LoadInfo
	prefillN int
	prefillS float64
	start    start
	extra    []Field
	failure  error
	closed   bool
	closeErr error
}

// New creates a sink, creating the CSV file and writing its header.
func New(o Options) (*Sink, error) {
	seen := map[string]bool{}
	for _, c := range metrics.Columns {
		seen[c] = true
	}
	for _, c := range o.ExtraColumns {
		if c == "" || seen[c] || strings.ContainsAny(c, ",\"# \t\r\n") {
			return nil, fmt.Errorf("sink: column %q: %w", c, ErrColumnName)
		}
		seen[c] = true
	}
	if o.SummaryWindow < 0 {
		return nil, fmt.Errorf("sink: summary window %d: %w", o.SummaryWindow, ErrWindow)
	}
	s := &Sink{o: o, w: o.CSVWriter, name: "csv writer", stream: metrics.NewStream(o.SummaryWindow)}
	if o.CSV != "" {
		create := o.Create
		if create == nil {
			create = os.Create
		}
		f, err := create(o.CSV)
		if err != nil {
			return nil, fmt.Errorf("sink: --csv: %w", err)
		}
		s.file, s.w, s.name = f, f, o.CSV
	}
	if s.w != nil {
		header := strings.Join(append(append([]string(nil), metrics.Columns...), o.ExtraColumns...), ",") + "\n"
		if _, err := io.WriteString(s.w, header); err != nil {
			if s.file != nil {
				s.file.Close()
			}
			return nil, fmt.Errorf("sink: --csv %s: header: %w", s.name, err)
		}
	}
	s.wr = newWriter(s.w, s.name, o.Progress)
	return s, nil
}

// Load records the model load and logs the `load` event.
func (s *Sink) Load(li LoadInfo) {
	s.mu.Lock()
	defer s.mu.Unlock()
	c := li
	c.Extra = append([]Field(nil), li.Extra...)
	s.load = &c
	ev := s.o.Log.Info().Str("event", "load").
		Float64("load_seconds", li.Seconds).
		Int64("dense_bytes", li.DenseBytes).
		Int64("expert_bytes", li.ExpertBytes).
		Int64("budget_bytes", li.BudgetBytes).
		Bool("o_direct", li.ODirect).
		Int("lanes", li.Lanes).
		Int("threads", li.Threads)
	addFields(ev, li.Extra).Msg("load")
}

// Prefill records the prompt processing and logs the `prefill` event.
func (s *Sink) Prefill(tokens int, d time.Duration) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.prefillN, s.prefillS = tokens, d.Seconds()
	ev := s.o.Log.Info().Str("event", "prefill").Int("prefill_tokens", tokens).Float64("prefill_seconds", d.Seconds())
	if d > 0 {
		ev = ev.Float64("prefill_tok_s", float64(tokens)/d.Seconds())
	}
	ev.Msg("prefill")
}

// Set adds (or replaces) a key/value of the summary trailer and event.
func (s *Sink) Set(key string, value any) {
	s.mu.Lock()
	defer s.mu.Unlock()
	for i := range s.extra {
		if s.extra[i].Key == key {
			s.extra[i].Value = value
			return
		}
	}
	s.extra = append(s.extra, Field{key, value})
}

// Fail records why the run ended early; the summary reports
// status=canceled (context.Canceled / DeadlineExceeded) or status=error.
// The first non-nil error wins.
func (s *Sink) Fail(err error) {
	if err == nil {
		return
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.failure == nil {
		s.failure = err
	}
}

// Token records one token and hands it to the writer goroutine, which writes
// its CSV row and redraws the status line; it blocks only while RowBuffer
// rows wait to be written. A debug `token` event is logged. A write error
// of an earlier row is returned (and every later call returns it too).
func (s *Sink) Token(m TokenMetrics) error {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.closed {
		return fmt.Errorf("sink: token %d: %w", m.Step, ErrClosed)
	}
	if len(m.Extra) != len(s.o.ExtraColumns) {
		return fmt.Errorf("sink: token %d: %d extra values for %d extra columns: %w", m.Step, len(m.Extra), len(s.o.ExtraColumns), ErrExtraColumns)
	}
	if err := s.wr.failed(); err != nil {
		return err
	}
	s.stream.Add(m)
	if len(m.Extra) > 0 {
		m.Extra = append([]float64(nil), m.Extra...) // the caller keeps its slice
	}
	s.wr.in <- rowItem{m: m}
	if ev := s.o.Log.Debug(); ev != nil {
		ev.Str("event", "token").Int("step", m.Step).Int("steps", m.Steps).
			Float64("wall_ms", m.WallMS).Float64("io_ms", m.IOMS).Float64("compute_ms", m.ComputeMS).
			Int64("read_bytes", m.ReadBytes)
		orNull(ev, "cache_hit_pct", m.CacheHitPct)
		ev.Float64("stall_ms", m.StallMS).Float64("mgmt_ms", m.MgmtMS).Int64("majflt", m.Majflt).
			Float64("cpu_ms", m.CPUMS)
		orNull(ev, "resident_frac", m.ResidentFrac)
		for i, c := range s.o.ExtraColumns {
			ev.Float64(c, m.Extra[i])
		}
		ev.Msg("token")
	}
	return nil
}

// orNull adds a CSV column that is -1 when it does not apply (no cache, not
// measured) as null.
func orNull(ev *zerolog.Event, k string, v float64) {
	if v < 0 {
		ev.Interface(k, nil)
	} else {
		ev.Float64(k, v)
	}
}

// Flush waits until the writer goroutine has written every row Token
// handed it so far, and returns the first write error.
func (s *Sink) Flush() error {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.closed {
		return s.closeErr
	}
	return s.wr.flush()
}

// appendRow formats one CSV row.
func appendRow(b []byte, m *TokenMetrics) []byte {
	b = strconv.AppendInt(b, int64(m.Step), 10)
	b = append(b, ',')
	b = strconv.AppendInt(b, int64(m.Steps), 10)
	for _, v := range []float64{m.WallMS, m.IOMS, m.ComputeMS} {
		b = append(b, ',')
		b = strconv.AppendFloat(b, v, 'f', 3, 64)
	}
	b = append(b, ',')
	b = strconv.AppendInt(b, m.ReadBytes, 10)
	b = append(b, ',')
	b = strconv.AppendFloat(b, m.CacheHitPct, 'f', 2, 64)
	for _, v := range []float64{m.StallMS, m.MgmtMS} {
		b = append(b, ',')
		b = strconv.AppendFloat(b, v, 'f', 3, 64)
	}
	b = append(b, ',')
	b = strconv.AppendInt(b, m.Majflt, 10)
	b = append(b, ',')
	b = strconv.AppendFloat(b, m.CPUMS, 'f', 3, 64)
	b = append(b, ',')
	b = strconv.AppendFloat(b, m.ResidentFrac, 'f', 4, 64)
	for _, v := range m.Extra {
		b = append(b, ',')
		b = strconv.AppendFloat(b, v, 'g', -1, 64)
	}
	return append(b, '\n')
}

// Summary computes the run summary of the tokens recorded so far.
func (s *Sink) Summary() metrics.Summary {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.summary()
}

func (s *Sink) threads() int {
	if s.load != nil && s.load.Threads > 0 {
		return s.load.Threads
	}
	return s.o.Threads
}

func (s *Sink) summary() metrics.Summary {
	return s.stream.Summary(metrics.Options{Warmup: s.o.Warmup, Threads: s.threads(), HasMajflt: true, HasCPU: true})
}

func (s *Sink) status() string {
	switch {
	case s.failure == nil:
		return "ok"
	case errors.Is(s.failure, context.Canceled), errors.Is(s.failure, context.DeadlineExceeded):
		return "canceled"
	default:
		return "error"
	}
}

// fixed is a summary number: printed with prec decimals in the CSV
// trailer, in full in the JSON event.
type fixed struct {
	v    float64
	prec int
}

// num appends key k with value v unless v is unknown (NaN, ±Inf).
func num(out []Field, k string, v float64, prec int) []Field {
	if math.IsNaN(v) || math.IsInf(v, 0) {
		return out
	}
	return append(out, Field{k, fixed{v, prec}})
}

// trailer returns the summary key/values in order: the CSV's `# summary`
// trailer and the `summary` event have the same keys.
func (s *Sink) trailer(sum metrics.Summary) []Field {
	var out []Field
	num := func(k string, v float64, prec int) { out = num(out, k, v, prec) }
	out = append(out, Field{"tokens", sum.Tokens})
	num("tok_s", sum.MeanTokS, 3)
	num("steady_tok_s", sum.SteadyTokS, 3)
	out = append(out, Field{"warmup_tokens", sum.WarmupTokens})
	num("first5_wall_ms", sum.First5WallMS, 1)
	num("last_third_tok_s", sum.LastThirdTokS, 3)
	num("read_MiB", sum.ReadMiB, 1)
	num("MiB_per_token", sum.MiBPerToken, 1)
	if sum.FinalHitPct >= 0 { // -1: no cache
		num("cache_hit_pct", sum.FinalHitPct, 1)
	}
	num("stall_share", sum.StallShare, 3)
	num("mgmt_share", sum.MgmtShare, 3)
	num("majflt_per_token", sum.MajfltPerToken, 1)
	num("cpu_occupancy", sum.CPUOccupancy, 2)
	if s.load != nil {
		num("load_s", s.load.Seconds, 3)
	}
	if s.prefillN > 0 || s.prefillS > 0 {
		out = append(out, Field{"prefill_tokens", s.prefillN})
		num("prefill_s", s.prefillS, 3)
		if s.prefillS > 0 {
			num("prefill_tok_s", float64(s.prefillN)/s.prefillS, 2)
		}
	}
	out = append(out, s.startTrailer()...)
	if s.load != nil {
		num("cache_budget_MiB", float64(s.load.BudgetBytes)/(1<<20), 1)
		num("dense_MiB", float64(s.load.DenseBytes)/(1<<20), 1)
		num("expert_MiB", float64(s.load.ExpertBytes)/(1<<20), 1)
		out = append(out, Field{"o_direct", s.load.ODirect}, Field{"io_threads", s.load.Lanes})
	}
	if t := s.threads(); t > 0 {
		out = append(out, Field{"threads", t})
	}
	if s.o.PeakRSS != nil {
		if p := s.o.PeakRSS(); p >= 0 {
			num("peak_rss_MiB", float64(p)/(1<<20), 1)
		}
	}
	out = append(out, Field{"status", s.status()})
	for _, f := range s.extra {
		replaced := false
		for i := range out {
			if out[i].Key == f.Key {
				out[i].Value, replaced = f.Value, true
			}
		}
		if !replaced {
			out = append(out, f)
		}
	}
	return out
}

// Close writes the `# summary` trailer, logs the `summary` event, ends the
// progress line and closes the CSV file. It is safe to call more than once
// (later calls return the first call's result) and must be called even when
// the run failed — typically in a defer right after New.
func (s *Sink) Close() error {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.closed {
		return s.closeErr
	}
	s.closed = true
	var errs []error
	if err := s.wr.close(); err != nil { // every queued row is written first
		errs = append(errs, err)
	}
	sum := s.summary()
	tr := s.trailer(sum)
	if s.w != nil {
		var b strings.Builder
		b.WriteString("# summary")
		for _, f := range tr {
			b.WriteString(" " + cleanKey(f.Key) + "=" + formatValue(f.Value))
		}
		b.WriteString("\n")
		if _, err := io.WriteString(s.w, b.String()); err != nil {
			errs = append(errs, fmt.Errorf("sink: --csv %s: summary: %w", s.name, err))
		}
	}
	if s.file != nil {
		if err := s.file.Close(); err != nil {
			errs = append(errs, fmt.Errorf("sink: --csv %s: %w", s.name, err))
		}
	}
	if s.o.Progress != nil {
		s.o.Progress.Done()
	}
	s.logSummary(tr)
	s.closeErr = errors.Join(errs...)
	return s.closeErr
}

// logSummary logs the `summary` event: the trailer's keys and values (in
// full precision), then error when the run failed.
func (s *Sink) logSummary(tr []Field) {
	ev := s.o.Log.Info()
	if ev == nil {
		return
	}
	ev.Str("event", "summary")
	for _, f := range tr {
		if x, ok := f.Value.(fixed); ok {
			ev.Float64(f.Key, x.v)
		} else {
			ev.Interface(f.Key, f.Value)
		}
	}
	if s.failure != nil {
		ev.Str("error", s.failure.Error())
	}
	ev.Msg("summary")
}

func addFields(ev *zerolog.Event, fs []Field) *zerolog.Event {
	if ev == nil {
		return nil
	}
	for _, f := range fs {
		ev = ev.Interface(f.Key, f.Value)
	}
	return ev
}

// cleanKey makes a summary key safe: anything other than letters, digits and
// _ . / - becomes _.
func cleanKey(k string) string {
	if k == "" {
		return "_"
	}
	return strings.Map(func(r rune) rune {
		switch {
		case r >= 'a' && r <= 'z', r >= 'A' && r <= 'Z', r >= '0' && r <= '9', r == '_', r == '.', r == '/', r == '-':
			return r
		}
		return '_'
	}, k)
}

// formatValue prints a summary value without whitespace.
func formatValue(v any) string {
	var s string
	switch x := v.(type) {
	case string:
		s = x
	case float64:
		s = strconv.FormatFloat(x, 'f', -1, 64)
	case float32:
		s = strconv.FormatFloat(float64(x), 'f', -1, 32)
	case bool:
		s = "0"
		if x {
			s = "1"
		}
	case fixed:
		s = strconv.FormatFloat(x.v, 'f', x.prec, 64)
	case time.Duration:
		s = strconv.FormatFloat(x.Seconds(), 'f', 3, 64)
	case fmt.Stringer:
		s = x.String()
	default:
		s = fmt.Sprint(x)
	}
	if s == "" {
		return "_"
	}
	return strings.Join(strings.Fields(s), "_")
}
