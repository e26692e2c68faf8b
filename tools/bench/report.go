package bench

import (
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"math"
	"reflect"
	"runtime"
	"slices"
	"sort"
	"strconv"
	"strings"
	"syscall"
	"text/tabwriter"
	"time"
)

// ErrFormat reports an unknown --format.
var ErrFormat = errors.New("unknown format")

// ConfigStats aggregates the runs of one configuration (completed runs only
// for the throughput figures).
type ConfigStats struct {
	Label       string   `json:"label"`
	Flags       []string `json:"flags"` // a peer's: its command line
	Peer        bool     `json:"peer,omitempty"`
	Runs        int      `json:"runs"`
	OK          int      `json:"ok"`
	OOM         int      `json:"oom_killed"`
	Failed      int      `json:"failed"`
	TokS        float64  `json:"tok_s"` // mean over completed runs of the run's mean tok/s (a peer's: the rate it printed)
	TokSMin     float64  `json:"tok_s_min"`
	TokSMax     float64  `json:"tok_s_max"`
	SteadyTokS  float64  `json:"steady_tok_s"` // mean over completed runs of the steady-window tok/s
	SteadyMin   float64  `json:"steady_tok_s_min"`
	SteadyMax   float64  `json:"steady_tok_s_max"`
	Ratio       float64  `json:"ratio"`          // SteadyTokS / the first configuration's (NaN when either has no completed run)
	TTFTms      float64  `json:"ttft_ms"`        // mean time to first token (prompt → first generated token)
	WarmupTok   float64  `json:"warmup_tokens"`  // mean warm-up length (tokens before the steady window)
	First5Ms    float64  `json:"first5_wall_ms"` // mean wall of the first five tokens
	HitPct      float64  `json:"cache_hit_pct"`
	MiBPerTok   float64  `json:"MiB_per_token"`
	PeakRSSMiB  float64  `json:"peak_rss_MiB"` // max over runs
	MajFltPerTk float64  `json:"majflt_per_token"`
	DiskReadMiB float64  `json:"disk_read_MiB"`   // mean over completed runs (RunResult.DiskReadMiB)
	DiskMiBs    float64  `json:"disk_read_MiB_s"` // mean over completed runs of read MiB ÷ wall
	BoundTokS   float64  `json:"bound_tok_s"`     // mean roofline bound of the completed runs (NaN without --roofline)
	BoundFrac   float64  `json:"bound_frac"`      // mean of the runs' steady tok/s ÷ bound
	BoundMin    float64  `json:"bound_frac_min"`
	BoundMax    float64  `json:"bound_frac_max"`
	BoundBy     string   `json:"bound_by,omitempty"` // the roofline terms that bound the completed runs (memory, compute, disk; "/"-joined when they differ)
}

// Report is a whole bench.
type Report struct {
	Model       string        `json:"model"`
	Prompt      string        `json:"prompt"`
	N           int           `json:"n"`
	Extra       []string      `json:"extra_args"`
	MemCapBytes int64         `json:"mem_cap_bytes"`
	Cold        bool          `json:"cold"`
	Repeat      int           `json:"repeat"`
	OutDir      string        `json:"out_dir"`
	Started     time.Time     `json:"started"`
	Configs     []ConfigStats `json:"configs"`
	Runs        []RunResult   `json:"runs"`
	Roofline    *Roofline     `json:"roofline,omitempty"`
	Peers       []Peer        `json:"peers,omitempty"`
	Ratios      []PeerRatio   `json:"peer_ratios,omitempty"`
}

// PeerRatio compares one pipe configuration with one peer round by round:
// pipe's mean decode tok/s (the summary's tok_s, every generated token)
// over the rate the peer printed (its mean decode rate too: llama-bench's
// tg avg_ts, llama.cpp's eval time, bmoe-cli's generation line), each
// round's two runs next to each other in time.
type PeerRatio struct {
	Pipe   string       `json:"pipe"`
	Peer   string       `json:"peer"`
	Rounds []RoundRatio `json:"rounds"`
	N      int          `json:"rounds_ok"` // rounds where both runs completed
	Min    float64      `json:"min"`
	Median float64      `json:"median"`
	Max    float64      `json:"max"`
}

// RoundRatio is one round of a PeerRatio; a number that does not apply
// (a failed run, no --roofline, no cap) is NaN (null in JSON).
type RoundRatio struct {
	Rep      int     `json:"rep"`
	PipeTokS float64 `json:"pipe_tok_s"`
	PeerTokS float64 `json:"peer_tok_s"`
	Ratio    float64 `json:"ratio"`
	PipeDisk float64 `json:"pipe_disk_GB_s"` // the roofline's O_DIRECT rate measured just before the pipe run
	PeerDisk float64 `json:"peer_disk_GB_s"` // and just before the peer run
	PipeMiBs float64 `json:"pipe_read_MiB_s"`
	PeerMiBs float64 `json:"peer_read_MiB_s"`
}

// MarshalJSON writes NaN as null.
func (r RoundRatio) MarshalJSON() ([]byte, error) { return json.Marshal(nullNaN(r)) }

// MarshalJSON writes NaN as null.
func (p PeerRatio) MarshalJSON() ([]byte, error) { return json.Marshal(nullNaN(p)) }

// diskGBs is the disk rate measured before run, NaN when none was.
func diskGBs(run *RunResult) float64 {
	if run == nil || run.Roofline == nil {
		return math.NaN()
	}
	return run.Roofline.DiskGBs
}

// ratios pairs every pipe configuration with every peer, round by round.
func (r *Report) ratios() []PeerRatio {
	byKey := map[[2]int]*RunResult{}
	for i := range r.Runs {
		byKey[[2]int{r.Runs[i].Config, r.Runs[i].Rep}] = &r.Runs[i]
	}
	var out []PeerRatio
	for pi, pc := range r.Configs {
		if pc.Peer {
			continue
		}
		for qi, qc := range r.Configs {
			if !qc.Peer {
				continue
			}
			pr := PeerRatio{Pipe: pc.Label, Peer: qc.Label}
			var vals []float64
			for rep := 1; rep <= r.Repeat; rep++ {
				a, b := byKey[[2]int{pi, rep}], byKey[[2]int{qi, rep}]
				if a == nil && b == nil {
					continue
				}
				rr := RoundRatio{Rep: rep, PipeTokS: okTokS(a), PeerTokS: okTokS(b), PipeDisk: diskGBs(a), PeerDisk: diskGBs(b),
					PipeMiBs: readRate(a), PeerMiBs: readRate(b)}
				rr.Ratio = rr.PipeTokS / rr.PeerTokS
				if !math.IsNaN(rr.Ratio) {
					vals = append(vals, rr.Ratio)
				}
				pr.Rounds = append(pr.Rounds, rr)
			}
			pr.N = len(vals)
			pr.Min, pr.Median, pr.Max = spread(vals)
			out = append(out, pr)
		}
	}
	return out
}

// okTokS is a completed run's tok/s, NaN for a failed or missing run.
func okTokS(run *RunResult) float64 {
	if run == nil || !run.OK() {
		return math.NaN()
	}
	return run.TokS
}

func readRate(run *RunResult) float64 {
	if run == nil {
		return math.NaN()
	}
	return run.DiskMiBs
}

// spread is the min, median (mean of the middle two of an even count) and
// max of vals; NaN for none.
func spread(vals []float64) (lo, med, hi float64) {
	if len(vals) == 0 {
		return math.NaN(), math.NaN(), math.NaN()
	}
	v := append([]float64(nil), vals...)
	sort.Float64s(v)
	n := len(v)
	med = v[n/2]
	if n%2 == 0 {
		med = (v[n/2-1] + v[n/2]) / 2
	}
	return v[0], med, v[n-1]
}

// bound sets a run's roofline bound and fraction from the roofline
// measured just before it: the run's compute threads (summary "threads"),
// and under a memory cap its read bytes per token (summary MiB_per_token)
// at the disk's rate.
func (r *Report) bound(run *RunResult) {
	run.BoundTokS, run.BoundFrac, run.BoundBy = math.NaN(), math.NaN(), ""
	if run.Roofline == nil || !run.OK() || run.Peer != "" {
		return
	}
	miss := 0.0
	if r.MemCapBytes > 0 {
		miss = run.MiBPerTok * (1 << 20)
	}
	run.BoundTokS, run.BoundBy = run.Roofline.Bound(int(num(run.Summary, "threads")), miss)
	run.BoundFrac = run.SteadyTokS / run.BoundTokS
}

func (r *Report) aggregate() {
	for i := range r.Runs {
		r.bound(&r.Runs[i])
	}
	for i := range r.Configs {
		c := &r.Configs[i]
		*c = ConfigStats{Label: c.Label, Flags: c.Flags, Peer: c.Peer, SteadyMin: math.NaN(), SteadyMax: math.NaN(),
			BoundMin: math.NaN(), BoundMax: math.NaN(), TokSMin: math.NaN(), TokSMax: math.NaN()}
		var n float64
		var majflt, tokens, ttftN float64
		for _, run := range r.Runs {
			if run.Config != i {
				continue
			}
			c.Runs++
			c.PeakRSSMiB = math.Max(c.PeakRSSMiB, run.PeakRSSMiB)
			switch {
			case run.OOMKilled:
				c.OOM++
				continue
			case !run.OK():
				c.Failed++
				continue
			}
			c.OK++
			n++
			c.TokS += run.TokS
			c.TokSMin = nanMin(c.TokSMin, run.TokS)
			c.TokSMax = -nanMin(-c.TokSMax, -run.TokS)
			c.DiskReadMiB += run.DiskReadMiB
			c.DiskMiBs += run.DiskMiBs
			c.SteadyTokS += run.SteadyTokS
			c.HitPct += run.HitPct
			c.MiBPerTok += run.MiBPerTok
			if !math.IsNaN(run.TTFTms) {
				c.TTFTms += run.TTFTms
				ttftN++
			}
			c.WarmupTok += float64(run.WarmupTokens)
			c.First5Ms += run.First5Ms
			majflt += float64(run.MajFlt)
			tokens += float64(run.Tokens)
			if math.IsNaN(c.SteadyMin) || run.SteadyTokS < c.SteadyMin {
				c.SteadyMin = run.SteadyTokS
			}
			if math.IsNaN(c.SteadyMax) || run.SteadyTokS > c.SteadyMax {
				c.SteadyMax = run.SteadyTokS
			}
			c.BoundTokS += run.BoundTokS
			c.BoundFrac += run.BoundFrac
			c.BoundMin = nanMin(c.BoundMin, run.BoundFrac)
			c.BoundMax = -nanMin(-c.BoundMax, -run.BoundFrac)
			c.BoundBy = addTerm(c.BoundBy, run.BoundBy)
		}
		if n == 0 {
			c.TokS, c.SteadyTokS, c.HitPct, c.MiBPerTok, c.MajFltPerTk = math.NaN(), math.NaN(), math.NaN(), math.NaN(), math.NaN()
			c.TTFTms, c.WarmupTok, c.First5Ms = math.NaN(), math.NaN(), math.NaN()
			c.BoundTokS, c.BoundFrac = math.NaN(), math.NaN()
			c.DiskReadMiB, c.DiskMiBs = math.NaN(), math.NaN()
			continue
		}
		c.DiskReadMiB /= n // NaN where the OS does not count reads
		c.DiskMiBs /= n
		c.BoundTokS /= n // NaN without a roofline
		c.BoundFrac /= n
		c.TTFTms /= ttftN // NaN without a TTFT
		c.WarmupTok /= n
		c.First5Ms /= n
		c.TokS /= n
		c.SteadyTokS /= n
		c.HitPct /= n
		c.MiBPerTok /= n
		c.MajFltPerTk = math.NaN()
		if tokens > 0 {
			c.MajFltPerTk = majflt / tokens
		}
		if c.Peer { // a peer prints one rate: no warm-up window, no first tokens
			c.WarmupTok, c.First5Ms = math.NaN(), math.NaN()
		}
	}
	for i := range r.Configs {
		r.Configs[i].Ratio = r.Configs[i].SteadyTokS / r.Configs[0].SteadyTokS
	}
	r.Ratios = r.ratios()
}

// addTerm appends term to the "/"-joined list terms unless it is empty or
// already there.
func addTerm(terms, term string) string {
	if term == "" || slices.Contains(strings.Split(terms, "/"), term) {
		return terms
	}
	if terms == "" {
		return term
	}
	return terms + "/" + term
}

// nanMin is the smaller of a and b, the other where one is NaN.
func nanMin(a, b float64) float64 {
	if math.IsNaN(a) || b < a {
		return b
	}
	return a
}

func f(v float64, prec int) string {
	if math.IsNaN(v) || math.IsInf(v, 0) {
		return "-"
	}
	return fmt.Sprintf("%.*f", prec, v)
}

func (c *ConfigStats) status() string {
	s := fmt.Sprintf("%d/%d ok", c.OK, c.Runs)
	if c.OOM > 0 {
		s += fmt.Sprintf(", %d OOM-killed", c.OOM)
	}
	if c.Failed > 0 {
		s += fmt.Sprintf(", %d failed", c.Failed)
	}
	return s
}

var header = []string{"config", "tok/s", "steady tok/s", "ratio", "TTFT ms", "warm-up", "first-5 ms", "hit %", "MiB/token", "peak RSS MiB", "majflt/token", "runs"}

// boundHeader: the columns a roofline adds.
var boundHeader = []string{"bound tok/s", "% of bound", "bound by"}

func (c *ConfigStats) row(roofline bool) []string {
	steady := f(c.SteadyTokS, 3)
	if c.OK > 1 && !c.Peer {
		steady += fmt.Sprintf(" (%s–%s)", f(c.SteadyMin, 3), f(c.SteadyMax, 3))
	}
	label, tokS := c.Label, f(c.TokS, 3)
	if c.Peer {
		label += " (peer)"
		if c.OK > 1 {
			tokS += fmt.Sprintf(" (%s–%s)", f(c.TokSMin, 3), f(c.TokSMax, 3))
		}
	}
	row := []string{label, tokS, steady, f(c.Ratio, 2), f(c.TTFTms, 0), f(c.WarmupTok, 1), f(c.First5Ms, 0), f(c.HitPct, 1), f(c.MiBPerTok, 1), f(c.PeakRSSMiB, 0), f(c.MajFltPerTk, 1), c.status()}
	if roofline {
		pct := f(100*c.BoundFrac, 1)
		if c.OK > 1 {
			pct += fmt.Sprintf(" (%s–%s)", f(100*c.BoundMin, 1), f(100*c.BoundMax, 1))
		}
		by := c.BoundBy
		if by == "" {
			by = "-"
		}
		row = append(row, f(c.BoundTokS, 2), pct, by)
	}
	return row
}

func (r *Report) header() []string {
	if r.Roofline == nil {
		return header
	}
	return append(append([]string(nil), header...), boundHeader...)
}

// Write prints the report as text (aligned tables), markdown or json. With
// peers, two more tables follow the configurations: every run (wall,
// exit, peak memory, bytes read from disk, the disk rate measured before
// it) and pipe ÷ peer round by round with the spread.
func (r *Report) Write(w io.Writer, format string) error {
	if format == "json" {
		enc := json.NewEncoder(w)
		enc.SetIndent("", "  ")
		return enc.Encode(jsonSafe(r))
	}
	var t tableWriter
	para, item := "\n", "" // text: a blank line before a paragraph; markdown: the table ends with one
	switch format {
	case "markdown", "md":
		t, para, item = mdTable{w}, "", "- "
	case "text", "":
		t = textTable{w}
	default:
		return fmt.Errorf("bench: --format %q: %w (text, markdown, json)", format, ErrFormat)
	}
	fmt.Fprintf(w, "%s\n", r.caption())
	rows := make([][]string, len(r.Configs))
	for i := range r.Configs {
		rows[i] = r.Configs[i].row(r.Roofline != nil)
	}
	if err := t.table(r.header(), rows); err != nil {
		return err
	}
	if len(r.Peers) == 0 {
		return nil
	}
	fmt.Fprintf(w, "%sEvery run, in the order run (read = bytes the run's processes read from disk, ÷ its wall time; disk = the --roofline O_DIRECT rate measured just before it):\n", para)
	if err := t.table(runsHeader, r.runRows()); err != nil {
		return err
	}
	fmt.Fprintf(w, "%spipe ÷ peer per round (pipe's mean decode tok/s ÷ the rate the peer printed):\n", para)
	if err := t.table(ratioHeader, r.ratioRows()); err != nil {
		return err
	}
	for _, pr := range r.Ratios {
		fmt.Fprintf(w, "%s%s ÷ %s: min %s, median %s, max %s over %d of %d rounds\n",
			item, pr.Pipe, pr.Peer, f(pr.Min, 2), f(pr.Median, 2), f(pr.Max, 2), pr.N, r.Repeat)
	}
	return nil
}

// tableWriter writes one table (text or markdown) with a blank line
// before it in markdown.
type tableWriter interface {
	table(header []string, rows [][]string) error
}

type mdTable struct{ w io.Writer }

func (t mdTable) table(h []string, rows [][]string) error {
	fmt.Fprintf(t.w, "\n| %s |\n|%s\n", strings.Join(h, " | "), strings.Repeat("---|", len(h)))
	for _, row := range rows {
		if _, err := fmt.Fprintf(t.w, "| %s |\n", strings.Join(row, " | ")); err != nil {
			return err
		}
	}
	_, err := fmt.Fprintln(t.w)
	return err
}

type textTable struct{ w io.Writer }

func (t textTable) table(h []string, rows [][]string) error {
	tw := tabwriter.NewWriter(t.w, 0, 0, 2, ' ', 0)
	fmt.Fprintln(tw, strings.Join(h, "\t"))
	for _, row := range rows {
		fmt.Fprintln(tw, strings.Join(row, "\t"))
	}
	return tw.Flush()
}

var runsHeader = []string{"round", "row", "tok/s", "wall s", "exit", "peak MiB", "read MiB", "read MiB/s", "disk GB/s before"}

// runRows is one row per run: its status, memory and reads.
func (r *Report) runRows() [][]string {
	var rows [][]string
	for i := range r.Runs {
		run := &r.Runs[i]
		label := run.Label
		if run.Peer != "" {
			label += " (peer)"
		}
		exit := strconv.Itoa(run.ExitCode)
		switch {
		case run.OOMKilled:
			exit = "OOM-killed"
		case run.Signal != "":
			exit = run.Signal
		}
		if run.Err != "" && !run.OOMKilled && !strings.HasPrefix(run.Err, "exit status") {
			exit += ": " + firstLine(run.Err)
		}
		peak := run.PeakRSSMiB // RSS of the largest process
		if run.CgroupPeak > 0 {
			peak = run.CgroupPeak // the whole cgroup, page cache included
		}
		rows = append(rows, []string{strconv.Itoa(run.Rep), label, f(okTokS(run), 3), f(run.WallS, 1), exit, f(peak, 0),
			f(run.DiskReadMiB, 0), f(run.DiskMiBs, 0), f(diskGBs(run), 2)})
	}
	return rows
}

var ratioHeader = []string{"round", "pipe", "tok/s", "disk GB/s", "peer", "tok/s", "disk GB/s", "pipe ÷ peer"}

func (r *Report) ratioRows() [][]string {
	var rows [][]string
	for _, pr := range r.Ratios {
		for _, rr := range pr.Rounds {
			rows = append(rows, []string{strconv.Itoa(rr.Rep), pr.Pipe, f(rr.PipeTokS, 3), f(rr.PipeDisk, 2),
				pr.Peer, f(rr.PeerTokS, 3), f(rr.PeerDisk, 2), f(rr.Ratio, 2)})
		}
	}
	return rows
}

func firstLine(s string) string {
	l, _, _ := strings.Cut(s, "\n")
	return l
}

func (r *Report) caption() string {
	model := r.Model
	if model == "" {
		model = "(demo model)"
	}
	cap := "none"
	if r.MemCapBytes > 0 {
		cap = fmt.Sprintf("%.1f GiB", float64(r.MemCapBytes)/(1<<30))
	}
	s := fmt.Sprintf("pipe bench: %s, -n %d, %d round(s) interleaved, memory cap %s", model, r.N, r.Repeat, cap)
	if r.Cold {
		s += ", page cache dropped before each run"
	}
	if len(r.Extra) > 0 {
		s += ", extra: " + strings.Join(r.Extra, " ")
	}
	s += "; ratio = steady tok/s / first row's"
	if rf := r.Roofline; rf != nil {
		s += "\n" + rf.String(r.MemCapBytes > 0) + " (measured again before every run: " + r.runRates() + ")"
	}
	return s
}

// runRates lists each run's memory rate and compute bound at 2 threads
// with the blocks' share of it and, where measured, disk rate.
func (r *Report) runRates() string {
	var parts []string
	for _, run := range r.Runs {
		if rf := run.Roofline; rf != nil {
			p := fmt.Sprintf("%s #%d %.1f GB/s", run.Label, run.Rep, rf.MemGBs[1])
			if len(rf.Compute) > 0 {
				c := rf.computeTime(2)
				p += fmt.Sprintf(" compute %s tok/s (blocks %.0f %%)", f(1/c, 2), 100*rf.Blocks.Seconds(2)/c)
			}
			if r.MemCapBytes > 0 && !math.IsNaN(rf.DiskGBs) {
				p += fmt.Sprintf(" disk %.2f GB/s", rf.DiskGBs)
			}
			parts = append(parts, p)
		}
	}
	return strings.Join(parts, "; ")
}

// jsonReport is a Report as JSON: a number that does not apply (NaN: no
// completed run, no cache, no TTFT in the trailer) is null, never a magic
// -1.
type jsonReport struct {
	*Report
	Configs []map[string]any `json:"configs"`
	Runs    []map[string]any `json:"runs"`
}

func jsonSafe(r *Report) jsonReport {
	j := jsonReport{Report: r, Configs: []map[string]any{}, Runs: []map[string]any{}}
	for _, c := range r.Configs {
		j.Configs = append(j.Configs, nullNaN(c))
	}
	for _, run := range r.Runs {
		j.Runs = append(j.Runs, nullNaN(run))
	}
	return j
}

// nullNaN is the struct v as a JSON object (its json tags, omitempty
// honoured) whose NaN and ±Inf float fields are null.
func nullNaN(v any) map[string]any {
	rv := reflect.ValueOf(v)
	rt := rv.Type()
	m := make(map[string]any, rt.NumField())
	for i := range rt.NumField() {
		name, opts, _ := strings.Cut(rt.Field(i).Tag.Get("json"), ",")
		if name == "-" || !rt.Field(i).IsExported() {
			continue
		}
		if name == "" {
			name = rt.Field(i).Name
		}
		f := rv.Field(i)
		if opts == "omitempty" && f.IsZero() {
			continue
		}
		if f.Kind() == reflect.Float64 && (math.IsNaN(f.Float()) || math.IsInf(f.Float(), 0)) {
			m[name] = nil
			continue
		}
		m[name] = f.Interface()
	}
	return m
}

// maxrssMiB converts rusage's Maxrss (KiB on Linux, bytes on Darwin) to MiB.
func maxrssMiB(ru *syscall.Rusage) float64 {
	if runtime.GOOS == "darwin" || runtime.GOOS == "ios" {
		return float64(ru.Maxrss) / (1 << 20)
	}
	return float64(ru.Maxrss) / 1024
}
