package report

import (
	"bufio"
	"errors"
	"fmt"
	"io"
	"math"
	"path/filepath"
	"strconv"
	"strings"
	"unicode"
	"unicode/utf8"

	"github.com/pipe-engine/pipe/internal/safefile"
	"github.com/pipe-engine/pipe/metrics"
)

// Sentinel errors; match them with errors.Is.
var (
	// ErrMalformed: the per-token CSV cannot be parsed (the message names the
	// file, the line and the column).
	ErrMalformed = errors.New("malformed per-token CSV")
	// ErrNoTokens: the CSV has a header but no token rows.
	ErrNoTokens = errors.New("no token rows")
	// ErrPlotFormat: --plot names a file that is neither .png nor .svg.
	ErrPlotFormat = errors.New("unsupported plot format")
	// ErrFormat: an output format other than text, markdown or json.
	ErrFormat = errors.New("unsupported output format")
)

// requiredColumns are the columns every per-token CSV has, old or new.
var requiredColumns = metrics.Columns[:metrics.LegacyColumns]

// KV is one key=value pair of a `# summary` trailer, in file order.
type KV struct {
	Key, Value string
}

// Run is one per-token CSV as read from disk.
type Run struct {
	Name    string   // file base name without the .csv extension
	Path    string   // as given
	Header  []string // the header as read
	Rows    []metrics.Token
	Extra   []string // columns beyond the known ones, in header order; values in Token.Extra
	Trailer []KV     // the `# summary` trailer, nil if the file has none

	has map[string]bool
}

// Has reports whether the CSV has the named column.
func (r *Run) Has(column string) bool { return r.has[column] }

// Incomplete reports why the run's record is incomplete ("" if it is not):
// pipe writes its `# summary` trailer even when a run fails or is cancelled,
// so a pipe CSV (it has the cpu_ms column) without one is a run that was
// killed or whose output was lost; a trailer whose status is not ok is a run
// that ended early. The older 9-column files never had a trailer.
func (r *Run) Incomplete() string {
	if r.Trailer == nil {
		if r.Has("cpu_ms") {
			return "no # summary trailer: the run was killed or its output lost"
		}
		return ""
	}
	if st, ok := r.TrailerValue("status"); ok && st != "ok" {
		return "status=" + st + ": the run ended early"
	}
	return ""
}

// TrailerValue returns the trailer's value for key.
func (r *Run) TrailerValue(key string) (string, bool) {
	for _, kv := range r.Trailer {
		if kv.Key == key {
			return kv.Value, true
		}
	}
	return "", false
}

// TrailerFloat returns the trailer's value for key as a number.
func (r *Run) TrailerFloat(key string) (float64, bool) {
	v, ok := r.TrailerValue(key)
	if !ok {
		return 0, false
	}
	f, err := strconv.ParseFloat(v, 64)
	return f, err == nil
}

// ReadFile reads a per-token CSV from path.
func ReadFile(path string) (*Run, error) {
	f, err := safefile.OpenInput(path)
	if err != nil {
		return nil, fmt.Errorf("report: %w", err)
	}
	defer f.Close()
	return Read(f, path)
}

// Read reads a per-token CSV: a header line naming the columns (any order; the
// nine columns of the older files are required, majflt, cpu_ms and
// resident_frac are optional, unknown columns are kept as extras), one row
// per token, blank lines and `#` comment lines ignored except a trailing
// `# summary key=value …` line, which is kept. path names the input in errors.
func Read(r io.Reader, path string) (*Run, error) {
	run := &Run{Path: path, Name: strings.TrimSuffix(filepath.Base(path), ".csv"), has: map[string]bool{}}
	sc := bufio.NewScanner(r)
	sc.Buffer(make([]byte, 64*1024), 16<<20)
	var idx []int // idx[c] = position of known column c, or -1
	var extraPos []int
	line := 0
	bad := func(format string, a ...any) error {
		return fmt.Errorf("%s:%d: %w: %s", path, line, ErrMalformed, printable(fmt.Sprintf(format, a...)))
	}
	for sc.Scan() {
		line++
		text := strings.TrimRight(sc.Text(), "\r")
		if strings.ContainsRune(text, 0) || !utf8.ValidString(text) {
			return nil, bad("binary data, not a per-token CSV")
		}
		trimmed := strings.TrimSpace(text)
		if trimmed == "" {
			continue
		}
		if strings.HasPrefix(trimmed, "#") {
			body := strings.TrimSpace(strings.TrimPrefix(trimmed, "#"))
			if rest, ok := strings.CutPrefix(body, "summary"); ok && (rest == "" || rest[0] == ' ' || rest[0] == '\t') {
				if run.Trailer != nil {
					return nil, bad("second # summary line")
				}
				kvs, err := parseTrailer(rest)
				if err != nil {
					return nil, bad("%v", err)
				}
				run.Trailer = kvs
			}
			continue
		}
		fields := strings.Split(text, ",")
		if idx == nil {
			var err error
			idx, extraPos, err = run.parseHeader(fields)
			if err != nil {
				return nil, bad("%v", err)
			}
			continue
		}
		if run.Trailer != nil {
			return nil, bad("token row after the # summary trailer")
		}
		if len(fields) != len(run.Header) {
			return nil, bad("%d fields, header has %d", len(fields), len(run.Header))
		}
		tok, err := parseRow(fields, idx, extraPos, run.Header)
		if err != nil {
			return nil, bad("%v", err)
		}
		if n := len(run.Rows); n > 0 && tok.Step <= run.Rows[n-1].Step {
			return nil, bad("step %d after step %d: steps must increase (files joined, or rows reordered?)", tok.Step, run.Rows[n-1].Step)
		}
		run.Rows = append(run.Rows, tok)
	}
	if err := sc.Err(); err != nil {
		if errors.Is(err, bufio.ErrTooLong) {
			return nil, fmt.Errorf("%s:%d: %w: %w", path, line+1, ErrMalformed, err)
		}
		return nil, fmt.Errorf("%s:%d: %w", path, line+1, err)
	}
	if idx == nil {
		return nil, fmt.Errorf("%s: %w: no header line", path, ErrMalformed)
	}
	return run, nil
}

func (run *Run) parseHeader(fields []string) (idx, extraPos []int, err error) {
	idx = make([]int, len(metrics.Columns))
	for i := range idx {
		idx[i] = -1
	}
	pos := map[string]int{}
	for i, c := range metrics.Columns {
		pos[c] = i
	}
	for i, f := range fields {
		name := strings.TrimSpace(f)
		if name == "" {
			return nil, nil, fmt.Errorf("header column %d is empty", i+1)
		}
		if run.has[name] {
			return nil, nil, fmt.Errorf("header column %s repeated", quoted(name))
		}
		run.has[name] = true
		run.Header = append(run.Header, name)
		if c, ok := pos[name]; ok {
			idx[c] = i
		} else {
			run.Extra = append(run.Extra, name)
			extraPos = append(extraPos, i)
		}
	}
	for _, c := range requiredColumns {
		if !run.has[c] {
			return nil, nil, fmt.Errorf("header lacks column %q (have %s)", c, clip(strings.Join(run.Header, ",")))
		}
	}
	return idx, extraPos, nil
}

func parseRow(fields []string, idx, extraPos []int, header []string) (metrics.Token, error) {
	t := metrics.Token{CacheHitPct: -1, ResidentFrac: -1}
	num := func(c int) (float64, error) {
		i := idx[c]
		s := strings.TrimSpace(fields[i])
		v, err := strconv.ParseFloat(s, 64)
		if err != nil || math.IsNaN(v) || math.IsInf(v, 0) {
			return 0, fmt.Errorf("column %s: %s is not a finite number", quoted(header[i]), quoted(s))
		}
		return v, nil
	}
	integer := func(c int) (int64, error) {
		v, err := num(c)
		if err != nil {
			return 0, err
		}
		if v != math.Trunc(v) || math.Abs(v) > 1<<53 {
			return 0, fmt.Errorf("column %s: %v is not an integer", quoted(header[idx[c]]), v)
		}
		return int64(v), nil
	}
	nonneg := func(c int, dst *float64) error {
		if idx[c] < 0 {
			return nil
		}
		v, err := num(c)
		if err != nil {
			return err
		}
		if v < 0 {
			return fmt.Errorf("column %s: %v is negative", quoted(header[idx[c]]), v)
		}
		*dst = v
		return nil
	}
	var err error
	var v int64
	if v, err = integer(0); err != nil {
		return t, err
	}
	t.Step = int(v)
	if v, err = integer(1); err != nil {
		return t, err
	}
	t.Steps = int(v)
	for c, dst := range map[int]*float64{2: &t.WallMS, 3: &t.IOMS, 4: &t.ComputeMS, 7: &t.StallMS, 8: &t.MgmtMS, 10: &t.CPUMS} {
		if err := nonneg(c, dst); err != nil {
			return t, err
		}
	}
	if t.ReadBytes, err = integer(5); err != nil {
		return t, err
	}
	if t.ReadBytes < 0 {
		return t, fmt.Errorf("column %q: %d is negative", "read_bytes", t.ReadBytes)
	}
	if t.CacheHitPct, err = num(6); err != nil {
		return t, err
	}
	if idx[9] >= 0 {
		if t.Majflt, err = integer(9); err != nil {
			return t, err
		}
	}
	if idx[11] >= 0 {
		if t.ResidentFrac, err = num(11); err != nil {
			return t, err
		}
	}
	for _, p := range extraPos {
		s := strings.TrimSpace(fields[p])
		f, err := strconv.ParseFloat(s, 64)
		if err != nil {
			return t, fmt.Errorf("column %s: %s is not a number", quoted(header[p]), quoted(s))
		}
		t.Extra = append(t.Extra, f)
	}
	return t, nil
}

// parseTrailer parses the `key=value key=value …` body of a summary line.
func parseTrailer(s string) ([]KV, error) {
	kvs := []KV{}
	for _, f := range strings.Fields(s) {
		k, v, ok := strings.Cut(f, "=")
		if !ok || k == "" {
			return nil, fmt.Errorf("summary field %s is not key=value", quoted(f))
		}
		kvs = append(kvs, KV{k, v})
	}
	return kvs, nil
}

// printable escapes what a terminal would not show as text (control bytes,
// invalid UTF-8) in a message quoting the input, so a binary file cannot
// garble the terminal.
// maxQuoted bounds the bytes of a value an error quotes: a field can be
// megabytes long, and its start says what it is.
const maxQuoted = 64

// clip cuts s to maxQuoted bytes (at a character boundary), saying how long
// it was.
func clip(s string) string {
	if len(s) <= maxQuoted {
		return s
	}
	n := maxQuoted
	for n > 0 && !utf8.RuneStart(s[n]) {
		n--
	}
	return fmt.Sprintf("%s… (%d bytes)", s[:n], len(s))
}

// quoted is %q of a value, cut as clip does.
func quoted(s string) string {
	if len(s) <= maxQuoted {
		return strconv.Quote(s)
	}
	c := clip(s)
	i := strings.LastIndex(c, "…")
	return strconv.Quote(c[:i]) + c[i:]
}

func printable(s string) string {
	var b strings.Builder
	for i := 0; i < len(s); {
		r, n := utf8.DecodeRuneInString(s[i:])
		switch {
		case r == utf8.RuneError && n == 1:
			fmt.Fprintf(&b, "\\x%02x", s[i])
		case !unicode.IsPrint(r) && r != ' ':
			q := strconv.QuoteRuneToASCII(r)
			b.WriteString(q[1 : len(q)-1])
		default:
			b.WriteString(s[i : i+n])
		}
		i += n
	}
	return b.String()
}
