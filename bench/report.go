package bench

import (
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"math"
	"reflect"
	"runtime"
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
	Flags       []string `json:"flags"`
	Runs        int      `json:"runs"`
	OK          int      `json:"ok"`
	OOM         int      `json:"oom_killed"`
	Failed      int      `json:"failed"`
	TokS        float64  `json:"tok_s"`        // mean over completed runs of the run's mean tok/s
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
	BoundTokS   float64  `json:"bound_tok_s"` // mean roofline bound of the completed runs (NaN without --roofline)
	BoundFrac   float64  `json:"bound_frac"`  // mean of the runs' steady tok/s ÷ bound
	BoundMin    float64  `json:"bound_frac_min"`
	BoundMax    float64  `json:"bound_frac_max"`
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
}

// bound sets a run's roofline bound and fraction from the roofline
// measured just before it: the run's compute threads (summary "threads"),
// and under a memory cap its read bytes per token (summary MiB_per_token)
// at the disk's rate.
func (r *Report) bound(run *RunResult) {
	run.BoundTokS, run.BoundFrac = math.NaN(), math.NaN()
	if run.Roofline == nil || !run.OK() {
		return
	}
	miss := 0.0
	if r.MemCapBytes > 0 {
		miss = run.MiBPerTok * (1 << 20)
	}
	run.BoundTokS = run.Roofline.Bound(int(num(run.Summary, "threads")), miss)
	run.BoundFrac = run.SteadyTokS / run.BoundTokS
}

func (r *Report) aggregate() {
	for i := range r.Runs {
		r.bound(&r.Runs[i])
	}
	for i := range r.Configs {
		c := &r.Configs[i]
		*c = ConfigStats{Label: c.Label, Flags: c.Flags, SteadyMin: math.NaN(), SteadyMax: math.NaN(),
			BoundMin: math.NaN(), BoundMax: math.NaN()}
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
		}
		if n == 0 {
			c.TokS, c.SteadyTokS, c.HitPct, c.MiBPerTok, c.MajFltPerTk = math.NaN(), math.NaN(), math.NaN(), math.NaN(), math.NaN()
			c.TTFTms, c.WarmupTok, c.First5Ms = math.NaN(), math.NaN(), math.NaN()
			c.BoundTokS, c.BoundFrac = math.NaN(), math.NaN()
			continue
		}
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
	}
	for i := range r.Configs {
		r.Configs[i].Ratio = r.Configs[i].SteadyTokS / r.Configs[0].SteadyTokS
	}
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
var boundHeader = []string{"bound tok/s", "% of bound"}

func (c *ConfigStats) row(roofline bool) []string {
	steady := f(c.SteadyTokS, 3)
	if c.OK > 1 {
		steady += fmt.Sprintf(" (%s–%s)", f(c.SteadyMin, 3), f(c.SteadyMax, 3))
	}
	row := []string{c.Label, f(c.TokS, 3), steady, f(c.Ratio, 2), f(c.TTFTms, 0), f(c.WarmupTok, 1), f(c.First5Ms, 0), f(c.HitPct, 1), f(c.MiBPerTok, 1), f(c.PeakRSSMiB, 0), f(c.MajFltPerTk, 1), c.status()}
	if roofline {
		pct := f(100*c.BoundFrac, 1)
		if c.OK > 1 {
			pct += fmt.Sprintf(" (%s–%s)", f(100*c.BoundMin, 1), f(100*c.BoundMax, 1))
		}
		row = append(row, f(c.BoundTokS, 2), pct)
	}
	return row
}

func (r *Report) header() []string {
	if r.Roofline == nil {
		return header
	}
	return append(append([]string(nil), header...), boundHeader...)
}

// Write prints the report as text (aligned table), markdown or json.
func (r *Report) Write(w io.Writer, format string) error {
	switch format {
	case "json":
		enc := json.NewEncoder(w)
		enc.SetIndent("", "  ")
		return enc.Encode(jsonSafe(r))
	case "markdown", "md":
		fmt.Fprintf(w, "%s\n\n", r.caption())
		h := r.header()
		fmt.Fprintf(w, "| %s |\n|%s\n", strings.Join(h, " | "), strings.Repeat("---|", len(h)))
		for i := range r.Configs {
			fmt.Fprintf(w, "| %s |\n", strings.Join(r.Configs[i].row(r.Roofline != nil), " | "))
		}
		return nil
	case "text", "":
		fmt.Fprintf(w, "%s\n", r.caption())
		tw := tabwriter.NewWriter(w, 0, 0, 2, ' ', 0)
		fmt.Fprintln(tw, strings.Join(r.header(), "\t"))
		for i := range r.Configs {
			fmt.Fprintln(tw, strings.Join(r.Configs[i].row(r.Roofline != nil), "\t"))
		}
		return tw.Flush()
	}
	return fmt.Errorf("bench: --format %q: %w (text, markdown, json)", format, ErrFormat)
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

// runRates lists each run's memory rate at 2 threads and, where measured,
// disk rate.
func (r *Report) runRates() string {
	var parts []string
	for _, run := range r.Runs {
		if rf := run.Roofline; rf != nil {
			p := fmt.Sprintf("%s #%d %.1f GB/s", run.Label, run.Rep+1, rf.MemGBs[1])
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

// ParseSize parses a memory size: plain bytes or with a K/M/G/T suffix
// (binary units, optional trailing B or iB).
func ParseSize(s string) (int64, error) {
	t := strings.TrimSpace(strings.ToUpper(s))
	t = strings.TrimSuffix(strings.TrimSuffix(t, "B"), "I")
	mult := int64(1)
	if n := len(t); n > 0 {
		switch t[n-1] {
		case 'K':
			mult = 1 << 10
		case 'M':
			mult = 1 << 20
		case 'G':
			mult = 1 << 30
		case 'T':
			mult = 1 << 40
		}
		if mult > 1 {
			t = t[:n-1]
		}
	}
	v, err := strconv.ParseFloat(t, 64)
	if b := v * float64(mult); err != nil || !(v > 0) || !(b < 1<<62) {
		return 0, fmt.Errorf("bad size %q (want e.g. 8G, 512M, 1073741824; at most 4 EiB)", s)
	}
	return int64(v * float64(mult)), nil
}
