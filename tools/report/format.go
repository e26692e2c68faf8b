package report

import (
	"encoding/json"
	"fmt"
	"io"
	"math"
	"strconv"
	"strings"
	"unicode/utf8"

	"github.com/pipe-engine/pipe/metrics"
)

// Output formats.
const (
	FormatText     = "text"
	FormatMarkdown = "markdown"
	FormatJSON     = "json"
)

// Write renders the reports of one or more runs in the given format. With
// several runs it adds a side-by-side comparison of every run against the
// first.
func Write(w io.Writer, as []*Analysis, format string) error {
	var err error
	switch format {
	case FormatText, "":
		err = writeText(w, as, false)
	case FormatMarkdown:
		err = writeText(w, as, true)
	case FormatJSON:
		err = writeJSON(w, as)
	default:
		return fmt.Errorf("report: format %q: %w (want text, markdown or json)", format, ErrFormat)
	}
	if err != nil {
		return fmt.Errorf("report: writing output: %w", err)
	}
	return nil
}

// ---- number formatting ----

const dash = "—"

func f0(v float64) string { return fnum(v, 0) }
func f1(v float64) string { return fnum(v, 1) }
func f2(v float64) string { return fnum(v, 2) }

func fnum(v float64, prec int) string {
	if math.IsNaN(v) || math.IsInf(v, 0) {
		return dash
	}
	return strconv.FormatFloat(v, 'f', prec, 64)
}

// frate formats a tok/s figure: three decimals below 1 (0.134), else two.
func frate(v float64) string {
	if v < 1 {
		return fnum(v, 3)
	}
	return fnum(v, 2)
}

// fhit formats a hit rate with the seed's precision: two decimals when fine
// (runs whose hit rate stays below 50 %, like gpt-oss), one otherwise; a
// negative rate (no cache) prints as a dash.
func fhit(v float64, fine bool) string {
	if v < 0 {
		return dash
	}
	if fine {
		return f2(v)
	}
	return f1(v)
}

func finalHit(s metrics.Summary) string {
	if s.FinalHitPct < 0 {
		return dash + " (no expert cache)"
	}
	return fmt.Sprintf("%s %%  (first token %s %%)", fhit(s.FinalHitPct, false), fhit(s.FirstHitPct, false))
}

func plural(n int, what string) string {
	if n == 1 {
		return "1 " + what
	}
	return strconv.Itoa(n) + " " + what + "s"
}

func fpct(share float64) string {
	if math.IsNaN(share) {
		return dash
	}
	return f1(100*share) + " %"
}

// ---- tables ----

type table struct {
	header []string
	rows   [][]string // a nil row is the elision marker "…"
	right  []bool     // right-align column
}

func (t *table) render(b *strings.Builder, md bool, indent string) {
	n := len(t.header)
	if md {
		b.WriteString("| " + strings.Join(t.header, " | ") + " |\n|")
		for i := 0; i < n; i++ {
			if t.right[i] {
				b.WriteString("---:|")
			} else {
				b.WriteString("---|")
			}
		}
		b.WriteString("\n")
		for _, r := range t.rows {
			if r == nil {
				b.WriteString("| …" + strings.Repeat(" | ", n-1) + " |\n")
				continue
			}
			b.WriteString("| " + strings.Join(r, " | ") + " |\n")
		}
		return
	}
	width := make([]int, n)
	for i, h := range t.header {
		width[i] = utf8.RuneCountInString(h)
	}
	for _, r := range t.rows {
		for i, c := range r {
			width[i] = max(width[i], utf8.RuneCountInString(c))
		}
	}
	line := func(cells []string) {
		var l strings.Builder
		l.WriteString(indent)
		for i, c := range cells {
			pad := strings.Repeat(" ", width[i]-utf8.RuneCountInString(c))
			if i > 0 {
				l.WriteString("  ")
			}
			if t.right[i] {
				l.WriteString(pad + c)
			} else {
				l.WriteString(c + pad)
			}
		}
		b.WriteString(strings.TrimRight(l.String(), " ") + "\n")
	}
	line(t.header)
	for _, r := range t.rows {
		if r == nil {
			line(append([]string{"…"}, make([]string, n-1)...))
			continue
		}
		line(r)
	}
}

// ---- single-run report ----

// hasIO reports whether the step table should show io_ms.
func (a *Analysis) hasIO() bool { return a.Run.Has("io_ms") }

// fineHit: print hit rates with two decimals (the seed does for gpt-oss,
// whose rates stay low).
func (a *Analysis) fineHit() bool { return a.Summary.FinalHitPct < 50 }

// msFormat picks the precision of the run's millisecond figures from its
// median wall time: whole ms (the seed's style) at ≥ 50 ms, else one decimal
// at ≥ 5 ms, else two — so a fast run's table is not all 6s and 7s.
func (a *Analysis) msFormat() func(float64) string {
	wall := make([]float64, len(a.Run.Rows))
	for i, t := range a.Run.Rows {
		wall[i] = t.WallMS
	}
	m := metrics.Median(wall)
	return func(v float64) string {
		switch {
		case m >= 50:
			return f0(v)
		case m >= 5:
			return f1(v)
		default:
			return f2(v)
		}
	}
}

func (a *Analysis) stepTable() *table {
	t := &table{header: []string{"step", "wall_ms", "compute_ms"}, right: []bool{true, true, true}}
	if a.hasIO() {
		t.header = append(t.header, "io_ms")
		t.right = append(t.right, true)
	}
	t.header = append(t.header, "cache_hit%", "tok/s")
	t.right = append(t.right, true, true)
	for _, r := range a.StepTable() {
		if r == nil {
			t.rows = append(t.rows, nil)
			continue
		}
		ms := a.msFormat()
		row := []string{strconv.Itoa(r.Step), ms(r.WallMS), ms(r.ComputeMS)}
		if a.hasIO() {
			row = append(row, ms(r.IOMS))
		}
		row = append(row, fhit(r.HitPct, a.fineHit()), f2(r.TokS))
		t.rows = append(t.rows, row)
	}
	return t
}

// facts are the report's key/value lines.
func (a *Analysis) facts() [][2]string {
	s := a.Summary
	n := s.Tokens
	warm := "auto rule"
	if s.WarmupForced {
		warm = "--warmup"
	}
	steadyFrom := dash
	if s.WarmupTokens < n {
		steadyFrom = fmt.Sprintf("steps %d–%d", a.Run.Rows[s.WarmupTokens].Step, a.Run.Rows[n-1].Step)
	}
	out := [][2]string{
		{"tokens", strconv.Itoa(n)},
		{"mean tok/s", fmt.Sprintf("%s  (%d tokens / %s s wall)", frate(s.MeanTokS), n, f2(s.TotalWallMS/1000))},
		{"steady tok/s", fmt.Sprintf("%s  (warm-up %s by %s; steady window %s)", frate(s.SteadyTokS), plural(s.WarmupTokens, "token"), warm, steadyFrom)},
		{"TTFT", a.ttftFact()},
		{"first-5 wall avg", a.msFormat()(s.First5WallMS) + " ms"},
		{"last-third tok/s", fmt.Sprintf("%s  (last %d tokens)", frate(s.LastThirdTokS), s.LastThirdTokens)},
		{"final hit", finalHit(s)},
		{"read", fmt.Sprintf("%s MiB, %s MiB/token", f1(s.ReadMiB), f1(s.MiBPerToken))},
		{"stall share", fpct(s.StallShare) + " of wall"},
		{"mgmt share", fpct(s.MgmtShare) + " of wall"},
	}
	switch {
	case !a.Run.Has("cpu_ms"):
		out = append(out, [2]string{"cpu occupancy", dash + " (no cpu_ms column)"})
	case a.Threads == 0:
		out = append(out, [2]string{"cpu occupancy", dash + " (thread count unknown: pass --threads)"})
	default:
		out = append(out, [2]string{"cpu occupancy", fmt.Sprintf("%s  (cpu_ms / (wall_ms × %s))", f2(s.CPUOccupancy), plural(a.Threads, "thread"))})
	}
	if a.Run.Has("majflt") {
		out = append(out, [2]string{"major faults/token", f1(s.MajfltPerToken)})
	} else {
		out = append(out, [2]string{"major faults/token", dash + " (no majflt column)"})
	}
	out = append(out, [2]string{"regime", a.Verdict.Regime.Title() + ": " + a.Verdict.Reason})
	var tr []string
	for _, k := range []string{"load_s", "prefill_s", "prefill_tps", "prefill_tok_s", "cache_budget_MiB", "o_direct", "io_threads", "threads", "warm_start", "warm_reads"} {
		if v, ok := a.Run.TrailerValue(k); ok {
			tr = append(tr, k+"="+v)
		}
	}
	if len(tr) > 0 {
		out = append(out, [2]string{"trailer", strings.Join(tr, " ")})
	} else if a.Run.Trailer == nil {
		out = append(out, [2]string{"trailer", dash + " (none)"})
	}
	if why := a.Run.Incomplete(); why != "" {
		out = append(out, [2]string{"INCOMPLETE", why})
	}
	return out
}

func writeText(w io.Writer, as []*Analysis, md bool) error {
	var b strings.Builder
	for i, a := range as {
		if i > 0 {
			b.WriteString("\n")
		}
		if md {
			fmt.Fprintf(&b, "### %s\n\n", a.Run.Name)
			ft := &table{header: []string{"metric", "value"}, right: []bool{false, false}}
			for _, kv := range a.facts() {
				ft.rows = append(ft.rows, []string{kv[0], kv[1]})
			}
			ft.render(&b, true, "")
			b.WriteString("\n")
			a.stepTable().render(&b, true, "")
			continue
		}
		fmt.Fprintf(&b, "%s (%s)\n", a.Run.Name, a.Run.Path)
		facts := a.facts()
		wk := 0
		for _, kv := range facts {
			wk = max(wk, utf8.RuneCountInString(kv[0]))
		}
		for _, kv := range facts {
			fmt.Fprintf(&b, "  %s%s  %s\n", kv[0], strings.Repeat(" ", wk-utf8.RuneCountInString(kv[0])), kv[1])
		}
		b.WriteString("\n")
		a.stepTable().render(&b, false, "  ")
	}
	if len(as) > 1 {
		b.WriteString("\n")
		if md {
			b.WriteString("### comparison\n\n")
		} else {
			fmt.Fprintf(&b, "comparison (against %s)\n", as[0].Run.Name)
		}
		compareTable(as).render(&b, md, "  ")
		if md {
			b.WriteString("\n")
		}
		b.WriteString(cmpNote)
	}
	_, err := io.WriteString(w, b.String())
	return err
}

// ---- comparison ----

// cmpMetric is one row of the side-by-side table. better is +1 when higher is
// better, -1 when lower is, 0 when neither (no ratio shown).
type cmpMetric struct {
	name   string
	unit   string
	better int
	value  func(*Analysis) float64
	format func(float64) string
	show   func([]*Analysis) bool
}

func always([]*Analysis) bool { return true }

func anyHas(col string) func([]*Analysis) bool {
	return func(as []*Analysis) bool {
		for _, a := range as {
			if a.Run.Has(col) {
				return true
			}
		}
		return false
	}
}

func trailerNum(key string) func(*Analysis) float64 {
	return func(a *Analysis) float64 {
		if v, ok := a.Run.TrailerFloat(key); ok {
			return v
		}
		return math.NaN()
	}
}

var cmpMetrics = []cmpMetric{
	{"tokens", "", 0, func(a *Analysis) float64 { return float64(a.Summary.Tokens) }, f0, always},
	{"TTFT", "ms", -1, trailerNum("ttft_ms"), f0, anyTrailer("ttft_ms")},
	{"first-5 wall avg", "ms", -1, func(a *Analysis) float64 { return a.Summary.First5WallMS }, f0, always},
	{"mean tok/s", "", +1, func(a *Analysis) float64 { return a.Summary.MeanTokS }, frate, always},
	{"steady tok/s", "", +1, func(a *Analysis) float64 { return a.Summary.SteadyTokS }, frate, always},
	{"warm-up tokens", "", -1, func(a *Analysis) float64 { return float64(a.Summary.WarmupTokens) }, f0, always},
	{"last-third tok/s", "", +1, func(a *Analysis) float64 { return a.Summary.LastThirdTokS }, frate, always},
	{"final hit", "%", +1, func(a *Analysis) float64 { return a.Summary.FinalHitPct }, f1, always},
	{"read/token", "MiB", -1, func(a *Analysis) float64 { return a.Summary.MiBPerToken }, f1, always},
	{"stall share", "%", -1, func(a *Analysis) float64 { return 100 * a.Summary.StallShare }, f1, always},
	{"mgmt share", "%", -1, func(a *Analysis) float64 { return 100 * a.Summary.MgmtShare }, f1, always},
	{"cpu occupancy", "", 0, func(a *Analysis) float64 { return a.Summary.CPUOccupancy }, f2, anyHas("cpu_ms")},
	{"major faults/token", "", -1, func(a *Analysis) float64 { return a.Summary.MajfltPerToken }, f1, anyHas("majflt")},
	{"budget", "MiB", 0, trailerNum("cache_budget_MiB"), f0, anyTrailer("cache_budget_MiB")},
}

// anyTrailer shows a metric when some run's trailer has key.
func anyTrailer(key string) func([]*Analysis) bool {
	return func(as []*Analysis) bool {
		for _, a := range as {
			if _, ok := a.Run.TrailerValue(key); ok {
				return true
			}
		}
		return false
	}
}

// ttftFact is the time to first token line: ttft_ms from the trailer, with
// the prefill that makes most of it.
func (a *Analysis) ttftFact() string {
	v, ok := a.Run.TrailerFloat("ttft_ms")
	if !ok {
		return dash + " (no ttft_ms in the trailer)"
	}
	out := f0(v) + " ms  (prompt to first token"
	if p, ok := a.Run.TrailerFloat("prefill_s"); ok {
		out += fmt.Sprintf("; prefill %s ms", f0(1000*p))
		if n, ok := a.Run.TrailerValue("prefill_tokens"); ok {
			out += " for " + n + " tokens"
		}
		if r, ok := trailerFloatAny(a.Run, "prefill_read_GB_s", "prefill_read_GBs"); ok {
			out += ", expert reads at " + f2(r) + " GB/s"
		}
	}
	return out + ")"
}

// trailerFloatAny is the trailer's number under the first of keys present
// (a key's current name first, then what older CSVs called it).
func trailerFloatAny(r *Run, keys ...string) (float64, bool) {
	for _, k := range keys {
		if v, ok := r.TrailerFloat(k); ok {
			return v, true
		}
	}
	return 0, false
}

// TTFTms is the run's time to first token from the trailer (NaN if absent).
func (a *Analysis) TTFTms() float64 { return trailerNum("ttft_ms")(a) }

// Comparison is one cell of the side-by-side table: metric of run Value
// against the first run's Base.
type Comparison struct {
	Metric string   `json:"metric"`
	Unit   string   `json:"unit,omitempty"`
	Base   *float64 `json:"base"`
	Value  *float64 `json:"value"`
	// Ratio is the improvement factor (>1 better) where the metric has a
	// direction and both values are positive.
	Ratio *float64 `json:"ratio,omitempty"`
	Text  string   `json:"text"`
}

func compare(all []*Analysis, base, b *Analysis) []Comparison {
	var out []Comparison
	for _, m := range cmpMetrics {
		if !m.show(all) {
			continue
		}
		x, y := m.value(base), m.value(b)
		c := Comparison{Metric: m.name, Unit: m.unit, Base: jnum(x), Value: jnum(y)}
		sx, sy := m.format(x), m.format(y)
		unit := ""
		if m.unit != "" {
			unit = " " + m.unit
		}
		if sx == sy {
			c.Text = sx + " = " + sy
		} else {
			c.Text = sx + " → " + sy + unit
			if m.better != 0 && x > 0 && y > 0 {
				r := y / x
				if m.better < 0 {
					r = x / y
				}
				c.Ratio = &r
				c.Text += " (" + fratio(r) + ")"
			}
		}
		out = append(out, c)
	}
	regime := Comparison{Metric: "regime", Text: base.Verdict.Regime.Title() + " = " + b.Verdict.Regime.Title()}
	if base.Verdict.Regime != b.Verdict.Regime {
		regime.Text = base.Verdict.Regime.Title() + " → " + b.Verdict.Regime.Title()
	}
	return append(out, regime)
}

// cmpNote explains the ratios under the comparison table.
const cmpNote = "  (×: improvement factor of the later run over the first, > 1 = better; a = b: equal as printed)\n"

// fratio prints an improvement factor the seed's way: "20×", "1.15×".
func fratio(r float64) string {
	if r >= 10 {
		return f0(r) + "×"
	}
	return f2(r) + "×"
}

func compareTable(as []*Analysis) *table {
	t := &table{header: []string{"metric"}, right: []bool{false}}
	var cols [][]Comparison
	for _, a := range as[1:] {
		t.header = append(t.header, as[0].Run.Name+" → "+a.Run.Name)
		t.right = append(t.right, false)
		cols = append(cols, compare(as, as[0], a))
	}
	for i := range cols[0] {
		row := []string{cols[0][i].Metric}
		for _, c := range cols {
			row = append(row, c[i].Text)
		}
		t.rows = append(t.rows, row)
	}
	return t
}

// ---- JSON ----

func jnum(v float64) *float64 {
	if math.IsNaN(v) || math.IsInf(v, 0) {
		return nil
	}
	return &v
}

// jpct is a hit rate for JSON: null when there is no cache (-1) or none is
// known.
func jpct(v float64) *float64 {
	if v < 0 {
		return nil
	}
	return jnum(v)
}

type jsonStep struct {
	Step      int      `json:"step"`
	WallMS    float64  `json:"wall_ms"`
	ComputeMS float64  `json:"compute_ms"`
	IOMS      *float64 `json:"io_ms,omitempty"`
	HitPct    *float64 `json:"cache_hit_pct"`
	TokS      *float64 `json:"tok_s"`
}

type jsonRun struct {
	Name            string            `json:"name"`
	Path            string            `json:"path"`
	Columns         []string          `json:"columns"`
	Tokens          int               `json:"tokens"`
	TotalWallMS     float64           `json:"total_wall_ms"`
	MeanTokS        *float64          `json:"tok_s"`
	SteadyTokS      *float64          `json:"steady_tok_s"`
	WarmupTokens    int               `json:"warmup_tokens"`
	WarmupForced    bool              `json:"warmup_forced"`
	WarmupEndStep   int               `json:"warmup_end_step"`
	TTFTms          *float64          `json:"ttft_ms"`
	First5WallMS    *float64          `json:"first5_wall_ms"`
	LastThirdTokens int               `json:"last_third_tokens"`
	LastThirdTokS   *float64          `json:"last_third_tok_s"`
	FirstHitPct     *float64          `json:"first_cache_hit_pct"`
	FinalHitPct     *float64          `json:"cache_hit_pct"`
	ReadMiB         float64           `json:"read_MiB"`
	MiBPerToken     *float64          `json:"MiB_per_token"`
	StallShare      *float64          `json:"stall_share"`
	MgmtShare       *float64          `json:"mgmt_share"`
	IOShare         *float64          `json:"io_share"`
	Threads         int               `json:"threads,omitempty"`
	CPUOccupancy    *float64          `json:"cpu_occupancy"`
	MajfltPerToken  *float64          `json:"majflt_per_token"`
	ComputeHeadMS   *float64          `json:"compute_head_ms"`
	ComputeTailMS   *float64          `json:"compute_tail_ms"`
	Regime          Regime            `json:"regime"`
	RegimeReason    string            `json:"regime_reason"`
	Steps           []jsonStep        `json:"steps"`
	Trailer         map[string]string `json:"trailer,omitempty"`
	Incomplete      string            `json:"incomplete,omitempty"` // why the record is incomplete (Run.Incomplete)
}

type jsonComparison struct {
	Base    string       `json:"base"`
	Run     string       `json:"run"`
	Metrics []Comparison `json:"metrics"`
}

type jsonDoc struct {
	Runs       []jsonRun        `json:"runs"`
	Comparison []jsonComparison `json:"comparison,omitempty"`
}

func writeJSON(w io.Writer, as []*Analysis) error {
	var doc jsonDoc
	for _, a := range as {
		s := a.Summary
		r := jsonRun{
			Name: a.Run.Name, Path: a.Run.Path, Columns: a.Run.Header, Tokens: s.Tokens,
			TotalWallMS: s.TotalWallMS, MeanTokS: jnum(s.MeanTokS), SteadyTokS: jnum(s.SteadyTokS),
			WarmupTokens: s.WarmupTokens, WarmupForced: s.WarmupForced, WarmupEndStep: a.WarmupEndStep(),
			TTFTms:       jnum(a.TTFTms()),
			First5WallMS: jnum(s.First5WallMS), LastThirdTokens: s.LastThirdTokens, LastThirdTokS: jnum(s.LastThirdTokS),
			FirstHitPct: jpct(s.FirstHitPct), FinalHitPct: jpct(s.FinalHitPct), ReadMiB: s.ReadMiB,
			MiBPerToken: jnum(s.MiBPerToken), StallShare: jnum(s.StallShare), MgmtShare: jnum(s.MgmtShare),
			IOShare: jnum(s.IOShare), Threads: a.Threads, CPUOccupancy: jnum(s.CPUOccupancy),
			MajfltPerToken: jnum(s.MajfltPerToken), ComputeHeadMS: jnum(s.ComputeHeadMS), ComputeTailMS: jnum(s.ComputeTailMS),
			Regime: a.Verdict.Regime, RegimeReason: a.Verdict.Reason, Steps: []jsonStep{},
		}
		for _, st := range a.StepTable() {
			if st == nil {
				continue
			}
			js := jsonStep{Step: st.Step, WallMS: st.WallMS, ComputeMS: st.ComputeMS, TokS: jnum(st.TokS)}
			if a.hasIO() {
				js.IOMS = jnum(st.IOMS)
			}
			js.HitPct = jpct(st.HitPct)
			r.Steps = append(r.Steps, js)
		}
		r.Incomplete = a.Run.Incomplete()
		if a.Run.Trailer != nil {
			r.Trailer = map[string]string{}
			for _, kv := range a.Run.Trailer {
				r.Trailer[kv.Key] = kv.Value
			}
		}
		doc.Runs = append(doc.Runs, r)
	}
	for _, a := range as[min(1, len(as)):] {
		doc.Comparison = append(doc.Comparison, jsonComparison{Base: as[0].Run.Name, Run: a.Run.Name, Metrics: compare(as, as[0], a)})
	}
	enc := json.NewEncoder(w)
	enc.SetIndent("", "  ")
	return enc.Encode(doc)
}
