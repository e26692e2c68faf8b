package sink

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"github.com/pipe-engine/pipe/internal/status"
	"math"
	"os"
	"path/filepath"
	"runtime"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/rs/zerolog"

	"github.com/pipe-engine/pipe/tools/report"
)

const wantHeader = "step,steps,wall_ms,io_ms,compute_ms,read_bytes,cache_hit_pct,stall_ms,mgmt_ms,majflt,cpu_ms,resident_frac"

// tok returns a deterministic token record for step i of n.
func tok(i, n int) TokenMetrics {
	wall := 100.0
	if i == 1 {
		wall = 900.5
	}
	return TokenMetrics{
		Step: i, Steps: n, WallMS: wall, IOMS: 40.25, ComputeMS: 80.125, ReadBytes: int64(i) << 20,
		CacheHitPct: 10 * float64(i), StallMS: 5, MgmtMS: 1.5, Majflt: int64(i), CPUMS: 300, ResidentFrac: 0.75,
	}
}

func readLines(t *testing.T, path string) []string {
	t.Helper()
	b, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	s := string(b)
	if s == "" {
		return nil
	}
	if !strings.HasSuffix(s, "\n") {
		t.Fatalf("%s does not end with a newline: %q", path, s)
	}
	return strings.Split(strings.TrimSuffix(s, "\n"), "\n")
}

func TestCSVExactAndFlushedPerRow(t *testing.T) {
	path := filepath.Join(t.TempDir(), "run.csv")
	s, err := New(Options{CSV: path, Warmup: -1, Threads: 4})
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	if got := readLines(t, path); len(got) != 1 || got[0] != wantHeader {
		t.Fatalf("after New: %q", got)
	}
	want := []string{
		"1,3,900.500,40.250,80.125,1048576,10.00,5.000,1.500,1,300.000,0.7500",
		"2,3,100.000,40.250,80.125,2097152,20.00,5.000,1.500,2,300.000,0.7500",
		"3,3,100.000,40.250,80.125,3145728,30.00,5.000,1.500,3,300.000,0.7500",
	}
	for i := 1; i <= 3; i++ {
		if err := s.Token(tok(i, 3)); err != nil {
			t.Fatal(err)
		}
		// Once Flush returns the row is in the file.
		if err := s.Flush(); err != nil {
			t.Fatal(err)
		}
		got := readLines(t, path)
		if len(got) != 1+i || got[i] != want[i-1] {
			t.Fatalf("after token %d the file holds %q, want row %q", i, got, want[i-1])
		}
	}
	if err := s.Close(); err != nil {
		t.Fatal(err)
	}
	got := readLines(t, path)
	if len(got) != 5 || !strings.HasPrefix(got[4], "# summary tokens=3 tok_s=") {
		t.Fatalf("file after Close: %q", got)
	}
	if err := s.Close(); err != nil {
		t.Fatalf("second Close: %v", err)
	}
	if err := s.Token(tok(4, 3)); !errors.Is(err, ErrClosed) {
		t.Fatalf("Token after Close: %v, want ErrClosed", err)
	}
}

// TestSummaryReadByReport: the trailer parses with pipe report's reader, and
// report's analysis of the file agrees with the trailer.
func TestSummaryReadByReport(t *testing.T) {
	path := filepath.Join(t.TempDir(), "run.csv")
	s, err := New(Options{CSV: path, Warmup: -1, PeakRSS: func() int64 { return 3 << 20 }})
	if err != nil {
		t.Fatal(err)
	}
	s.Load(LoadInfo{Seconds: 1.25, DenseBytes: 3 << 20, ExpertBytes: 40 << 20, BudgetBytes: 2000 << 20, ODirect: true, Lanes: 4, Threads: 2})
	s.Prefill(10, 2*time.Second)
	s.Set("dense_weights", "anon")
	s.Set("note", "two words")
	s.Set("o_direct", false) // replaces the computed key
	const n = 12
	for i := 1; i <= n; i++ {
		if err := s.Token(tok(i, n)); err != nil {
			t.Fatal(err)
		}
	}
	if err := s.Close(); err != nil {
		t.Fatal(err)
	}
	run, err := report.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	if strings.Join(run.Header, ",") != wantHeader || len(run.Rows) != n {
		t.Fatalf("header %v, %d rows", run.Header, len(run.Rows))
	}
	for i, r := range run.Rows {
		w := tok(i+1, n)
		if r.Step != w.Step || r.WallMS != w.WallMS || r.ReadBytes != w.ReadBytes || r.Majflt != w.Majflt || r.ResidentFrac != w.ResidentFrac {
			t.Fatalf("row %d = %+v, want %+v", i, r, w)
		}
	}
	a, err := report.Analyze(run, report.Options{Warmup: -1})
	if err != nil {
		t.Fatal(err)
	}
	wantKV := map[string]string{
		"tokens":           "12",
		"tok_s":            strconv.FormatFloat(a.Summary.MeanTokS, 'f', 3, 64),
		"steady_tok_s":     strconv.FormatFloat(a.Summary.SteadyTokS, 'f', 3, 64),
		"warmup_tokens":    strconv.Itoa(a.Summary.WarmupTokens),
		"read_MiB":         "78.0",
		"MiB_per_token":    "6.5",
		"cache_hit_pct":    "120.0",
		"load_s":           "1.250",
		"prefill_tokens":   "10",
		"prefill_s":        "2.000",
		"prefill_tok_s":    "5.00",
		"cache_budget_MiB": "2000.0",
		"o_direct":         "0",
		"io_threads":       "4",
		"threads":          "2",
		"peak_rss_MiB":     "3.0",
		"cpu_occupancy":    strconv.FormatFloat(a.Summary.CPUOccupancy, 'f', 2, 64),
		"majflt_per_token": "6.5",
		"status":           "ok",
		"dense_weights":    "anon",
		"note":             "two_words",
	}
	if a.Summary.WarmupTokens != 1 || a.Threads != 2 {
		t.Errorf("report: warm-up %d threads %d, want 1 and 2 (from the trailer)", a.Summary.WarmupTokens, a.Threads)
	}
	for k, v := range wantKV {
		if got, ok := run.TrailerValue(k); !ok || got != v {
			t.Errorf("trailer %s = %q (present %v), want %q", k, got, ok, v)
		}
	}
	if last := run.Trailer[len(run.Trailer)-1]; last.Key != "note" {
		t.Errorf("caller keys must come last, got %v", run.Trailer)
	}
}

// TestSummaryAfterError: a run that fails mid-way still leaves its rows and a
// summary trailer, with the reason in status.
func TestSummaryAfterError(t *testing.T) {
	for _, tc := range []struct {
		err    error
		status string
	}{
		{context.Canceled, "canceled"},
		{fmt.Errorf("layer 3: %w", errors.New("short read")), "error"},
	} {
		path := filepath.Join(t.TempDir(), "run.csv")
		var logBuf bytes.Buffer
		runErr := func() (err error) {
			s, err := New(Options{CSV: path, Warmup: -1, Log: zerolog.New(&logBuf)})
			if err != nil {
				return err
			}
			defer func() {
				s.Fail(err)
				if cerr := s.Close(); err == nil {
					err = cerr
				}
			}()
			for i := 1; i <= 5; i++ {
				if i == 3 {
					return tc.err
				}
				if err := s.Token(tok(i, 5)); err != nil {
					return err
				}
			}
			return nil
		}()
		if !errors.Is(runErr, tc.err) {
			t.Fatalf("run error %v", runErr)
		}
		run, err := report.ReadFile(path)
		if err != nil {
			t.Fatal(err)
		}
		if len(run.Rows) != 2 {
			t.Errorf("%d rows, want 2", len(run.Rows))
		}
		if v, _ := run.TrailerValue("status"); v != tc.status {
			t.Errorf("status = %q, want %q", v, tc.status)
		}
		if v, _ := run.TrailerValue("tokens"); v != "2" {
			t.Errorf("tokens = %q, want 2", v)
		}
		ev := findEvent(t, &logBuf, "summary")
		if ev["status"] != tc.status || ev["error"] != tc.err.Error() {
			t.Errorf("summary event %v", ev)
		}
	}
}

func findEvent(t *testing.T, buf *bytes.Buffer, name string) map[string]any {
	t.Helper()
	sc := bufio.NewScanner(bytes.NewReader(buf.Bytes()))
	for sc.Scan() {
		var m map[string]any
		if err := json.Unmarshal(sc.Bytes(), &m); err != nil {
			t.Fatalf("log line %q: %v", sc.Text(), err)
		}
		if m["event"] == name {
			if m["message"] != name {
				t.Errorf("event %s has message %v", name, m["message"])
			}
			return m
		}
	}
	t.Fatalf("no %q event in %s", name, buf.String())
	return nil
}

// eventLine is the raw JSON line of the first event called name.
func eventLine(t *testing.T, buf *bytes.Buffer, name string) []byte {
	t.Helper()
	for _, l := range bytes.Split(buf.Bytes(), []byte("\n")) {
		if bytes.Contains(l, []byte(`"event":"`+name+`"`)) {
			return l
		}
	}
	t.Fatalf("no %q event in %s", name, buf.String())
	return nil
}

// orderedKeys are the top-level keys of a JSON object in their order.
func orderedKeys(t *testing.T, obj []byte) []string {
	t.Helper()
	dec := json.NewDecoder(bytes.NewReader(obj))
	if _, err := dec.Token(); err != nil {
		t.Fatal(err)
	}
	var keys []string
	for dec.More() {
		k, err := dec.Token()
		if err != nil {
			t.Fatal(err)
		}
		keys = append(keys, k.(string))
		var v any
		if err := dec.Decode(&v); err != nil {
			t.Fatal(err)
		}
	}
	return keys
}

func lastLine(s string) string {
	lines := strings.Split(strings.TrimRight(s, "\n"), "\n")
	return lines[len(lines)-1]
}

func TestLogEvents(t *testing.T) {
	var buf, csv bytes.Buffer
	s, err := New(Options{Log: zerolog.New(&buf).Level(zerolog.DebugLevel), CSVWriter: &csv, ExtraColumns: []string{"spec_hits"}, Warmup: -1})
	if err != nil {
		t.Fatal(err)
	}
	s.Load(LoadInfo{Seconds: 2.5, DenseBytes: 100, ExpertBytes: 200, BudgetBytes: 300, ODirect: true, Lanes: 4, Threads: 2, Extra: []Field{F("dense_weights", "anon")}})
	m := tok(1, 2)
	m.Extra = []float64{7}
	if err := s.Token(m); err != nil {
		t.Fatal(err)
	}
	m = tok(2, 2)
	if err := s.Token(m); !errors.Is(err, ErrExtraColumns) {
		t.Fatalf("missing extra value: %v", err)
	}
	if err := s.Close(); err != nil {
		t.Fatal(err)
	}
	load := findEvent(t, &buf, "load")
	for k, v := range map[string]any{"load_seconds": 2.5, "dense_bytes": 100.0, "expert_bytes": 200.0, "budget_bytes": 300.0, "o_direct": true, "lanes": 4.0, "threads": 2.0, "dense_weights": "anon"} {
		if load[k] != v {
			t.Errorf("load.%s = %v, want %v", k, load[k], v)
		}
	}
	token := findEvent(t, &buf, "token")
	if token["level"] != "debug" || token["step"] != 1.0 || token["wall_ms"] != 900.5 || token["spec_hits"] != 7.0 || token["resident_frac"] != 0.75 {
		t.Errorf("token event %v", token)
	}
	sum := findEvent(t, &buf, "summary")
	for _, k := range []string{"tokens", "tok_s", "steady_tok_s", "warmup_tokens", "cache_hit_pct", "read_MiB", "MiB_per_token", "load_s", "status"} {
		if _, ok := sum[k]; !ok {
			t.Errorf("summary event lacks %s: %v", k, sum)
		}
	}
	if sum["tokens"] != 1.0 || math.Abs(sum["tok_s"].(float64)-1000/900.5) > 1e-9 || sum["o_direct"] != true {
		t.Errorf("summary event %v", sum)
	}
	// The event has the trailer's keys, in its order.
	var keys []string
	for _, kv := range strings.Fields(strings.TrimPrefix(lastLine(csv.String()), "# summary ")) {
		k, _, _ := strings.Cut(kv, "=")
		keys = append(keys, k)
	}
	var evKeys []string
	for _, k := range orderedKeys(t, eventLine(t, &buf, "summary")) {
		if k != "level" && k != "event" && k != "time" && k != "message" {
			evKeys = append(evKeys, k)
		}
	}
	if strings.Join(keys, " ") != strings.Join(evKeys, " ") {
		t.Errorf("summary event keys\n%v\nwant the trailer's\n%v", evKeys, keys)
	}
}

func TestExtraColumnsAndNames(t *testing.T) {
	var out bytes.Buffer
	s, err := New(Options{CSVWriter: &out, ExtraColumns: []string{"spec_read_bytes", "x"}, Warmup: -1})
	if err != nil {
		t.Fatal(err)
	}
	m := tok(1, 1)
	m.Extra = []float64{4096, 0.5}
	if err := s.Token(m); err != nil {
		t.Fatal(err)
	}
	if err := s.Close(); err != nil {
		t.Fatal(err)
	}
	lines := strings.Split(out.String(), "\n")
	if lines[0] != wantHeader+",spec_read_bytes,x" || !strings.HasSuffix(lines[1], ",0.7500,4096,0.5") {
		t.Errorf("CSV with extras: %q", lines[:2])
	}
	run, err := report.Read(strings.NewReader(out.String()), "extras.csv")
	if err != nil {
		t.Fatal(err)
	}
	if len(run.Extra) != 2 || run.Rows[0].Extra[0] != 4096 {
		t.Errorf("report reader extras %v %v", run.Extra, run.Rows[0].Extra)
	}
	for _, bad := range []string{"", "wall_ms", "a,b", "sp ace", "dup"} {
		cols := []string{bad}
		if bad == "dup" {
			cols = []string{"dup", "dup"}
		}
		if _, err := New(Options{ExtraColumns: cols}); !errors.Is(err, ErrColumnName) {
			t.Errorf("column %q: %v, want ErrColumnName", bad, err)
		}
	}
}

type failingWriter struct{ after int }

func (f *failingWriter) Write(p []byte) (int, error) {
	if f.after <= 0 {
		return 0, errors.New("disk full")
	}
	f.after--
	return len(p), nil
}

func TestWriteErrors(t *testing.T) {
	if _, err := New(Options{CSV: filepath.Join(t.TempDir(), "missing", "run.csv")}); !errors.Is(err, os.ErrNotExist) {
		t.Errorf("uncreatable CSV: %v", err)
	}
	if _, err := New(Options{CSVWriter: &failingWriter{0}}); err == nil || !strings.Contains(err.Error(), "header") {
		t.Errorf("header write error: %v", err)
	}
	s, err := New(Options{CSVWriter: &failingWriter{1}, Warmup: -1})
	if err != nil {
		t.Fatal(err)
	}
	// The row is written by the sink's goroutine: its error comes with the
	// next Token (or Flush, or Close).
	if err := s.Token(tok(1, 2)); err != nil {
		t.Fatalf("Token: %v", err)
	}
	if err := s.Flush(); err == nil || !strings.Contains(err.Error(), "token 1") || !strings.Contains(err.Error(), "disk full") {
		t.Errorf("row write error: %v", err)
	}
	if err := s.Token(tok(2, 2)); err == nil || !strings.Contains(err.Error(), "token 1") {
		t.Errorf("Token after a row write error: %v", err)
	}
	if err := s.Close(); err == nil || !strings.Contains(err.Error(), "summary") {
		t.Errorf("summary write error: %v", err)
	}
}

func TestProgress(t *testing.T) {
	if p := NewProgress(nil); p != nil {
		t.Fatal("NewProgress without a status line must be nil")
	}
	var nilP *Progress
	nilP.Update(tok(1, 1)) // no-op, no panic
	nilP.Done()

	var buf bytes.Buffer
	s, err := New(Options{Progress: NewProgress(status.NewTo(&buf, 0)), Warmup: -1})
	if err != nil {
		t.Fatal(err)
	}
	for i := 1; i <= 3; i++ {
		if err := s.Token(tok(i, 3)); err != nil {
			t.Fatal(err)
		}
	}
	if err := s.Close(); err != nil {
		t.Fatal(err)
	}
	out := buf.String()
	parts := strings.Split(out, "\r")
	if len(parts) != 4 || parts[0] != "" || !strings.HasSuffix(out, "\n") || strings.Count(out, "\n") != 1 {
		t.Fatalf("progress output %q", out)
	}
	if !strings.HasPrefix(parts[1], "token 1/3  1.11 tok/s (this 1.11)  hit 10.0%  read 1 MiB/tok  ETA 2s") {
		t.Errorf("first line %q", parts[1])
	}
	// A shorter line pads over the previous one.
	if len([]rune(parts[2])) < len([]rune(parts[1])) {
		t.Errorf("line 2 %q shorter than line 1 %q", parts[2], parts[1])
	}
	if !strings.HasPrefix(parts[3], "token 3/3") || strings.Contains(parts[3], "ETA") {
		t.Errorf("last line %q", parts[3])
	}
}

func TestConcurrentTokens(t *testing.T) {
	var buf bytes.Buffer
	s, err := New(Options{CSVWriter: &buf, Progress: NewProgress(status.NewTo(&bytes.Buffer{}, 0)), Warmup: -1})
	if err != nil {
		t.Fatal(err)
	}
	var wg sync.WaitGroup
	for g := 0; g < 4; g++ {
		wg.Add(1)
		go func(g int) {
			defer wg.Done()
			for i := 1; i <= 25; i++ {
				if err := s.Token(tok(g*25+i, 100)); err != nil {
					t.Error(err)
				}
				_ = s.Summary()
			}
		}(g)
	}
	wg.Wait()
	if err := s.Close(); err != nil {
		t.Fatal(err)
	}
	// Goroutines interleave their steps, so the rows are not in step order
	// (pipe report would refuse the file): count them and the trailer.
	lines := strings.Split(strings.TrimSuffix(buf.String(), "\n"), "\n")
	if len(lines) != 102 || !strings.HasPrefix(lines[101], "# summary tokens=100 ") {
		t.Fatalf("%d lines, last %q", len(lines), lines[len(lines)-1])
	}
}

// TestNotApplicable: without a cache (cache_hit_pct -1) and without a
// resident-fraction sample (-1) the CSV keeps -1, the token event has null
// and the summary (trailer and event) has no cache_hit_pct.
func TestNotApplicable(t *testing.T) {
	var buf, csv bytes.Buffer
	s, err := New(Options{Log: zerolog.New(&buf).Level(zerolog.DebugLevel), CSVWriter: &csv, Warmup: -1})
	if err != nil {
		t.Fatal(err)
	}
	m := tok(1, 1)
	m.CacheHitPct, m.ResidentFrac = -1, -1
	if err := s.Token(m); err != nil {
		t.Fatal(err)
	}
	if err := s.Close(); err != nil {
		t.Fatal(err)
	}
	row := strings.Split(strings.Split(csv.String(), "\n")[1], ",")
	if row[6] != "-1.00" || row[11] != "-1.0000" {
		t.Errorf("CSV row %q: want -1 in cache_hit_pct and resident_frac", row)
	}
	token := findEvent(t, &buf, "token")
	for _, k := range []string{"cache_hit_pct", "resident_frac"} {
		if v, ok := token[k]; !ok || v != nil {
			t.Errorf("token event %s = %v (present %v), want null", k, v, ok)
		}
	}
	sum := findEvent(t, &buf, "summary")
	if _, ok := sum["cache_hit_pct"]; ok || strings.Contains(lastLine(csv.String()), "cache_hit_pct") {
		t.Errorf("summary without a cache has cache_hit_pct: %v / %s", sum, lastLine(csv.String()))
	}
}

// heapAfter is the live heap after a GC.
func heapAfter() uint64 {
	runtime.GC()
	var ms runtime.MemStats
	runtime.ReadMemStats(&ms)
	return ms.HeapAlloc
}

// TestSummaryWindowBounded: a server's sink (SummaryWindow > 0) fed token
// after token for a long time keeps a bounded amount of memory, while the
// default (every token's times, for pipe run's exact trailer) grows with the
// run; below the window both summaries are the same.
func TestSummaryWindowBounded(t *testing.T) {
	const tokens = 300_000
	grow := func(window int) (uint64, *Sink) {
		s, err := New(Options{Warmup: -1, SummaryWindow: window})
		if err != nil {
			t.Fatal(err)
		}
		before := heapAfter()
		for i := 1; i <= tokens; i++ {
			if err := s.Token(tok(i, 0)); err != nil {
				t.Fatal(err)
			}
		}
		if err := s.Flush(); err != nil {
			t.Fatal(err)
		}
		after := heapAfter()
		if after < before {
			return 0, s
		}
		return after - before, s
	}
	bounded, s := grow(4096)
	if bounded > 1<<20 {
		t.Errorf("window 4096: the heap grew %d bytes over %d tokens, want < 1 MiB", bounded, tokens)
	}
	if sum := s.Summary(); sum.Tokens != tokens || sum.LastThirdTokens != 4096 {
		t.Errorf("window summary: %d tokens, last %d", sum.Tokens, sum.LastThirdTokens)
	}
	s.Close()
	all, s := grow(0)
	if all < 16*tokens/2 {
		t.Errorf("window 0: the heap grew only %d bytes over %d tokens; the test cannot tell bounded from not", all, tokens)
	}
	s.Close()

	var csvs []string
	for _, window := range []int{0, 16} {
		var csv bytes.Buffer
		s, err := New(Options{CSVWriter: &csv, Warmup: -1, SummaryWindow: window})
		if err != nil {
			t.Fatal(err)
		}
		for i := 1; i <= 12; i++ {
			if err := s.Token(tok(i, 12)); err != nil {
				t.Fatal(err)
			}
		}
		if err := s.Close(); err != nil {
			t.Fatal(err)
		}
		csvs = append(csvs, csv.String())
	}
	if csvs[0] != csvs[1] || !strings.Contains(csvs[0], "# summary tokens=12 ") {
		t.Errorf("a run within the window: CSV\n%s\nwant the same as without one\n%s", csvs[1], csvs[0])
	}
	if _, err := New(Options{SummaryWindow: -1}); !errors.Is(err, ErrWindow) {
		t.Errorf("negative window: %v", err)
	}
}
