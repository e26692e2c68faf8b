// Package metrics holds the per-token metrics record of a decode run and the
// run-summary arithmetic shared by the live sink (package sink, which writes
// the per-token CSV and the `# summary` trailer while a run is in progress) and
// the offline analyser (package report, `pipe report`). Both compute the same
// numbers from the same rows with the same code, so a run's trailer and a later
// report of its CSV agree.
//
// # Warm-up rule
//
// A streamed run starts cold and reaches its steady rate only after a warm-up
// window (see the seed note on warm-up dynamics). WarmupEnd finds the end of
// that window from the per-token wall times alone:
//
//  1. The reference is the median wall_ms of the last third of the run
//     (⌈n/3⌉ tokens, at least one).
//  2. The threshold is Tolerance (1.5) × that reference.
//  3. The warm-up ends at the first token i (0-based) whose own wall_ms is at or
//     below the threshold and for which the median wall_ms of the window
//     i … i+Window−1 (Window = 5, shortened at the end of the run) is also at or
//     below it. Tokens 0 … i−1 are the warm-up; WarmupEnd returns i, the number
//     of warm-up tokens.
//  4. If no token qualifies, the warm-up is everything before the last third.
//
// The first condition keeps a slow token from opening the steady window; the
// window median keeps one lucky fast token inside a slow head (gpt-oss's step
// 10) from ending the warm-up early, while tolerating isolated spikes later on.
// The steady-window tok/s is then (n − i) / Σ wall_ms[i:] (tokens per second).
//
// Stream computes the same summary token by token in bounded memory (running
// sums and a head and tail window), for a server that decodes without end.
//
// Counters are an engine's cumulative expert counters (lookups by outcome,
// bytes read, stall), the one definition of a hit that the CSV's
// cache_hit_pct, decode.Result and the server's /metrics read.
//
// All functions here are pure and safe for concurrent use; they never retain
// or modify the slices passed to them.
package metrics

import (
	"math"
	"sort"
)

// Columns is the fixed per-token CSV header, in order (the README's per-token
// CSV). Extra columns, if any, follow these.
var Columns = []string{
	"step", "steps", "wall_ms", "io_ms", "compute_ms", "read_bytes",
	"cache_hit_pct", "stall_ms", "mgmt_ms", "majflt", "cpu_ms", "resident_frac",
}

// LegacyColumns is the number of leading Columns present in the older
// (BigMoeOnEdge) per-token files, which lack majflt, cpu_ms and resident_frac.
const LegacyColumns = 9

// Warm-up rule parameters (see the package documentation).
const (
	Window    = 5
	Tolerance = 1.5
)

// Token is one generated token's metrics — one row of the per-token CSV.
type Token struct {
	Step, Steps  int     // 1-based token index; planned number of tokens
	WallMS       float64 // wall time of this token
	IOMS         float64 // read-lane busy time, summed across lanes (may exceed WallMS)
	ComputeMS    float64 // time the compute stages were busy
	ReadBytes    int64   // expert bytes read from flash for this token
	CacheHitPct  float64 // running expert-cache hit rate, -1 without a cache
	StallMS      float64 // wall time the FFN waited for an expert
	MgmtMS       float64 // cache bookkeeping
	Majflt       int64   // major page faults during this token (getrusage delta)
	CPUMS        float64 // CPU time summed across threads (getrusage delta)
	ResidentFrac float64 // sampled resident fraction of the dense weights, -1 if unmeasured
	Extra        []float64
}

// Options control Summarize.
type Options struct {
	// Warmup forces the number of warm-up tokens; negative means "find it
	// with WarmupEnd". It is clamped to [0, n−1] for a non-empty run.
	Warmup int
	// Threads is the compute thread count for CPU occupancy; 0 = unknown.
	Threads int
	// HasMajflt / HasCPU say whether the majflt / cpu_ms columns were
	// measured (older CSVs lack them); without them the derived fields are NaN.
	HasMajflt, HasCPU bool
}

// Summary is the analysis of one run. Float fields that cannot be computed
// (no tokens, column absent, threads unknown) are NaN.
type Summary struct {
	Tokens          int
	TotalWallMS     float64
	MeanTokS        float64 // Tokens / Σ wall
	WarmupTokens    int     // tokens before the steady window
	WarmupForced    bool    // WarmupTokens came from Options.Warmup
	SteadyTokS      float64 // steady-window tokens / Σ steady wall
	First5WallMS    float64 // mean wall_ms of the first min(5, n) tokens
	LastThirdTokens int     // ⌈n/3⌉
	LastThirdTokS   float64 // last-third tokens / Σ their wall
	FinalHitPct     float64 // cache_hit_pct of the last token
	FirstHitPct     float64 // cache_hit_pct of the first token
	ReadMiB         float64 // Σ read_bytes / 2^20
	MiBPerToken     float64
	StallShare      float64 // Σ stall / Σ wall
	MgmtShare       float64 // Σ mgmt / Σ wall
	IOShare         float64 // Σ io / Σ wall (can exceed 1 with several lanes)
	CPUOccupancy    float64 // Σ cpu / (Σ wall × threads)
	MajfltPerToken  float64
	// ComputeHeadMS / ComputeTailMS are the median compute_ms of the first
	// min(5, ⌈n/3⌉) tokens and of the last third; their ratio is the
	// compute-collapse factor behind the residency-bound verdict.
	ComputeHeadMS, ComputeTailMS float64
}

// WarmupEnd returns the number of warm-up tokens of a run with the given
// per-token wall times, by the rule in the package documentation.
func WarmupEnd(wallMS []float64) int {
	n := len(wallMS)
	if n <= 1 {
		return 0
	}
	third := thirdOf(n)
	thr := Tolerance * median(wallMS[n-third:])
	for i := 0; i < n; i++ {
		if !(wallMS[i] <= thr) {
			continue
		}
		end := min(i+Window, n)
		if median(wallMS[i:end]) <= thr {
			return i
		}
	}
	return n - third
}

// thirdOf is ⌈n/3⌉, at least 1.
func thirdOf(n int) int {
	return max(1, (n+2)/3)
}

// Summarize computes the run summary of rows (in step order).
func Summarize(rows []Token, o Options) Summary {
	var t totals
	wall := make([]float64, len(rows))
	compute := make([]float64, len(rows))
	for i, r := range rows {
		t.add(r)
		wall[i], compute[i] = r.WallMS, r.ComputeMS
	}
	return t.summary(wall, compute, o)
}

// totals are a run's running sums, in step order.
type totals struct {
	n                          int
	wall, io, stall, mgmt, cpu float64
	read, faults               int64
	firstHit, finalHit         float64
}

func (t *totals) add(r Token) {
	if t.n == 0 {
		t.firstHit = r.CacheHitPct
	}
	t.n++
	t.wall += r.WallMS
	t.io += r.IOMS
	t.stall += r.StallMS
	t.mgmt += r.MgmtMS
	t.cpu += r.CPUMS
	t.read += r.ReadBytes
	t.faults += r.Majflt
	t.finalHit = r.CacheHitPct
}

// base is the summary of the sums alone; the window fields are NaN.
func (t *totals) base(o Options) Summary {
	nan := math.NaN()
	n := t.n
	s := Summary{
		Tokens: n, MeanTokS: nan, SteadyTokS: nan, First5WallMS: nan, LastThirdTokS: nan,
		FinalHitPct: nan, FirstHitPct: nan, ReadMiB: 0, MiBPerToken: nan, StallShare: nan,
		MgmtShare: nan, IOShare: nan, CPUOccupancy: nan, MajfltPerToken: nan,
		ComputeHeadMS: nan, ComputeTailMS: nan,
	}
	if n == 0 {
		return s
	}
	s.TotalWallMS = t.wall
	s.MeanTokS = rate(n, s.TotalWallMS)
	s.FirstHitPct, s.FinalHitPct = t.firstHit, t.finalHit
	s.ReadMiB = float64(t.read) / (1 << 20)
	s.MiBPerToken = s.ReadMiB / float64(n)
	if s.TotalWallMS > 0 {
		s.StallShare = t.stall / s.TotalWallMS
		s.MgmtShare = t.mgmt / s.TotalWallMS
		s.IOShare = t.io / s.TotalWallMS
		if o.HasCPU && o.Threads > 0 {
			s.CPUOccupancy = t.cpu / (s.TotalWallMS * float64(o.Threads))
		}
	}
	if o.HasMajflt {
		s.MajfltPerToken = float64(t.faults) / float64(n)
	}
	return s
}

// summary is the whole summary given every token's wall and compute time.
func (t *totals) summary(wall, compute []float64, o Options) Summary {
	s := t.base(o)
	n := t.n
	if n == 0 {
		return s
	}
	if o.Warmup >= 0 {
		s.WarmupTokens = min(o.Warmup, n-1)
		s.WarmupForced = true
	} else {
		s.WarmupTokens = WarmupEnd(wall)
	}
	s.SteadyTokS = rate(n-s.WarmupTokens, sum(wall[s.WarmupTokens:]))
	k := min(5, n)
	s.First5WallMS = sum(wall[:k]) / float64(k)
	third := thirdOf(n)
	s.LastThirdTokens = third
	s.LastThirdTokS = rate(third, sum(wall[n-third:]))
	s.ComputeHeadMS = median(compute[:min(5, third)])
	s.ComputeTailMS = median(compute[n-third:])
	return s
}

// rate is tokens per second for n tokens taking totalMS milliseconds.
func rate(n int, totalMS float64) float64 {
	if n <= 0 || !(totalMS > 0) {
		return math.NaN()
	}
	return float64(n) * 1000 / totalMS
}

func sum(xs []float64) float64 {
	var t float64
	for _, x := range xs {
		t += x
	}
	return t
}

// median of xs (mean of the two middle values for even lengths); NaN if empty.
func median(xs []float64) float64 {
	if len(xs) == 0 {
		return math.NaN()
	}
	c := append([]float64(nil), xs...)
	sort.Float64s(c)
	m := len(c) / 2
	if len(c)%2 == 1 {
		return c[m]
	}
	return (c[m-1] + c[m]) / 2
}

// Median is the median of xs (NaN if empty); exported for the report's verdicts.
func Median(xs []float64) float64 { return median(xs) }
