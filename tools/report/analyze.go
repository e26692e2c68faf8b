// Package report is the offline analyser behind `pipe report`: it reads
// per-token CSVs (pipe's 12-column files and the older 9-column BigMoeOnEdge
// files, by header, with or without the `# summary` trailer), computes the
// warm-up analysis of the seed note (mean and steady-window tok/s, first-5 wall
// average, last-third tok/s, hit rate, MiB read per token, stall/mgmt shares,
// CPU occupancy, major faults), classifies the run's regime, and renders text,
// markdown or JSON, a side-by-side comparison of several runs, and a plot.
//
// The warm-up end and every summary number come from package metrics, the
// same code the live sink uses for the CSV trailer and the `summary` log event.
//
// # Regime verdict
//
// Classify decides, in this order:
//
//   - residency-bound — compute_ms collapses over the run (median compute_ms
//     of the first min(5, ⌈n/3⌉) tokens ≥ CollapseFactor × the median of the
//     last third), or the run has a majflt column averaging ≥
//     ResidencyFaultsPerToken major faults per token: dense weights are being
//     faulted in from flash inside compute (the seed's Regime 2). A collapse
//     in a run that counted fewer than NoFaultsPerToken major faults per
//     token is not residency (nothing came from flash through page faults:
//     CPU contention or first touches of fresh memory slowed the first
//     tokens); the reason says so and the run is judged by the next rules.
//   - I/O-bound warm-up — compute is flat and the cache hit rate climbs by at
//     least HitClimbPoints percentage points from the first to the last token:
//     the expert cache is what warms up (the seed's Regime 1).
//   - steady — neither.
//
// Nothing here is concurrent; values are not safe for concurrent mutation but
// may be read from several goroutines.
package report

import (
	"fmt"
	"math"

	"github.com/pipe-engine/pipe/metrics"
)

// Verdict thresholds (see the package documentation).
const (
	CollapseFactor          = 3.0
	ResidencyFaultsPerToken = 100.0
	NoFaultsPerToken        = 1.0
	HitClimbPoints          = 20.0
)

// Regime is the verdict on a run's warm-up.
type Regime string

// The regimes.
const (
	RegimeIOWarmup  Regime = "io-bound-warmup"
	RegimeResidency Regime = "residency-bound"
	RegimeSteady    Regime = "steady"
)

// Title is the regime's human name.
func (r Regime) Title() string {
	switch r {
	case RegimeIOWarmup:
		return "I/O-bound warm-up"
	case RegimeResidency:
		return "residency-bound"
	default:
		return "steady"
	}
}

// Verdict is a regime with the evidence for it.
type Verdict struct {
	Regime Regime
	Reason string
}

// Options control Analyze.
type Options struct {
	// Warmup forces the number of warm-up tokens; negative = the metrics rule.
	Warmup int
	// Threads is the compute thread count for CPU occupancy; 0 takes the
	// trailer's `threads` key if present.
	Threads int
}

// StepRow is one row of the step table.
type StepRow struct {
	Step                            int
	WallMS, ComputeMS, IOMS, HitPct float64
	TokS                            float64 // 1000 / wall_ms
}

// Analysis is one run's report.
type Analysis struct {
	Run     *Run
	Threads int // 0 if unknown
	Summary metrics.Summary
	Verdict Verdict
}

// Analyze computes the report of one run.
func Analyze(run *Run, o Options) (*Analysis, error) {
	if len(run.Rows) == 0 {
		return nil, fmt.Errorf("%s: %w", run.Path, ErrNoTokens)
	}
	threads := o.Threads
	if threads <= 0 {
		if v, ok := run.TrailerFloat("threads"); ok && v >= 1 && v == math.Trunc(v) {
			threads = int(v)
		}
	}
	a := &Analysis{Run: run, Threads: threads}
	a.Summary = metrics.Summarize(run.Rows, metrics.Options{
		Warmup: o.Warmup, Threads: threads,
		HasMajflt: run.Has("majflt"), HasCPU: run.Has("cpu_ms"),
	})
	a.Verdict = Classify(a.Summary)
	return a, nil
}

// Classify returns the regime verdict for a run summary.
func Classify(s metrics.Summary) Verdict {
	collapse := s.ComputeHeadMS / s.ComputeTailMS
	climb := s.FinalHitPct - s.FirstHitPct
	collapsed := s.ComputeTailMS > 0 && collapse >= CollapseFactor
	// A run that counted its major faults and had (almost) none cannot be
	// faulting weights in from flash, whatever its compute did; its early
	// compute was slowed by something else (CPU contention, first touch of
	// fresh anonymous memory), so it is judged on its cache instead.
	var note string
	if collapsed && s.MajfltPerToken < NoFaultsPerToken {
		note = fmt.Sprintf("compute_ms falls %s → %s ms (%.0f×) with %.1f major faults/token, so not from flash residency; ", fms(s.ComputeHeadMS), fms(s.ComputeTailMS), collapse, s.MajfltPerToken)
		collapsed = false
	}
	switch {
	case collapsed:
		why := fmt.Sprintf("compute_ms collapses %s → %s ms (%.0f×) over the run: the resident set faults in inside compute", fms(s.ComputeHeadMS), fms(s.ComputeTailMS), collapse)
		if !math.IsNaN(s.MajfltPerToken) {
			why += fmt.Sprintf("; %.0f major faults/token", s.MajfltPerToken)
		}
		return Verdict{RegimeResidency, why}
	case s.MajfltPerToken >= ResidencyFaultsPerToken:
		return Verdict{RegimeResidency, fmt.Sprintf("%.0f major faults/token: dense weights re-fault from flash inside compute", s.MajfltPerToken)}
	case s.FirstHitPct >= 0 && climb >= HitClimbPoints:
		if note != "" {
			return Verdict{RegimeIOWarmup, fmt.Sprintf("%scache hit climbing %.1f → %.1f %%: the expert cache warms up", note, s.FirstHitPct, s.FinalHitPct)}
		}
		return Verdict{RegimeIOWarmup, fmt.Sprintf("compute flat (%s → %s ms), cache hit climbing %.1f → %.1f %%: the expert cache warms up", fms(s.ComputeHeadMS), fms(s.ComputeTailMS), s.FirstHitPct, s.FinalHitPct)}
	case note != "":
		return Verdict{RegimeSteady, fmt.Sprintf("%shit rate %s", note, hitChange(s))}
	default:
		return Verdict{RegimeSteady, fmt.Sprintf("compute flat (%s → %s ms), hit rate %s", fms(s.ComputeHeadMS), fms(s.ComputeTailMS), hitChange(s))}
	}
}

// fms prints milliseconds with precision for their size: whole ms at ≥ 50,
// one decimal at ≥ 5, else two.
func fms(v float64) string {
	switch {
	case v >= 50:
		return fnum(v, 0)
	case v >= 5:
		return fnum(v, 1)
	default:
		return fnum(v, 2)
	}
}

func hitChange(s metrics.Summary) string {
	if s.FirstHitPct < 0 {
		return "n/a (no cache)"
	}
	return fmt.Sprintf("%.1f → %.1f %%", s.FirstHitPct, s.FinalHitPct)
}

func stepRow(t metrics.Token) StepRow {
	tps := math.NaN()
	if t.WallMS > 0 {
		tps = 1000 / t.WallMS
	}
	return StepRow{Step: t.Step, WallMS: t.WallMS, ComputeMS: t.ComputeMS, IOMS: t.IOMS, HitPct: t.CacheHitPct, TokS: tps}
}

// StepTable returns the seed note's elided step table: the first three rows,
// then (if anything is left out) a nil marker, then the last two. Runs of at
// most five tokens are listed in full.
func (a *Analysis) StepTable() []*StepRow {
	rows := a.Run.Rows
	var out []*StepRow
	add := func(t metrics.Token) { r := stepRow(t); out = append(out, &r) }
	if len(rows) <= 5 {
		for _, t := range rows {
			add(t)
		}
		return out
	}
	for _, t := range rows[:3] {
		add(t)
	}
	out = append(out, nil)
	for _, t := range rows[len(rows)-2:] {
		add(t)
	}
	return out
}

// WarmupEndStep is the step number of the last warm-up token (0 if none).
func (a *Analysis) WarmupEndStep() int {
	if a.Summary.WarmupTokens == 0 {
		return 0
	}
	return a.Run.Rows[a.Summary.WarmupTokens-1].Step
}
