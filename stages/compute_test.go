package stages

import (
	"context"
	"fmt"
	"math"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/pipe-engine/pipe/dense"
	"github.com/pipe-engine/pipe/model"
	"github.com/pipe-engine/pipe/reader"
	"github.com/pipe-engine/pipe/sink"
)

// slowFile delays every read after the dense weights are loaded.
type slowFile struct {
	reader.File
	delay *time.Duration
}

func (f slowFile) ReadAt(p []byte, off int64) (int, error) {
	time.Sleep(*f.delay)
	return f.File.ReadAt(p, off)
}

// stepRows decodes n steps with no expert cache (every expert is read each
// step) and returns their metrics; readDelay slows each read after the load,
// and observer, when set, runs on the decode goroutine after each layer's
// routing.
func stepRows(t *testing.T, n int, readDelay time.Duration, observer func()) []sink.TokenMetrics {
	t.Helper()
	var delay time.Duration
	cfg := baseCfg()
	// One compute thread: no pool helpers to wake after each stall, whose
	// scheduling delay on a loaded machine would count as compute (it is
	// time the compute stage is busy, but not what this test is about).
	cfg.Threads = 1
	cfg.Cache.Bytes = NoCache
	cfg.Dense = dense.Mmap // dense bytes via mmap: only expert reads go through the slow file
	cfg.IO.Open = func(path string, direct bool) (reader.File, error) {
		f, err := reader.OpenOS(path, direct)
		if err != nil {
			return nil, err
		}
		return slowFile{File: f, delay: &delay}, nil
	}
	ctx := context.Background()
	e, err := Open(ctx, cfg, Inputs{})
	if err != nil {
		t.Fatal(err)
	}
	defer e.Close()
	s, err := e.NewSession(len(prompt)+n, model.KVF32)
	if err != nil {
		t.Fatal(err)
	}
	if _, _, err := s.Prefill(ctx, prompt, false); err != nil {
		t.Fatal(err)
	}
	delay = readDelay // the lanes are idle between steps: no read is in flight
	if observer != nil {
		e.Observe(func(int, int, [][]int, [][]float32) { observer() })
	}
	var rows []sink.TokenMetrics
	for i := 0; i < n; i++ {
		_, m, err := s.Step(ctx, int32(100+i), n)
		if err != nil {
			t.Fatal(err)
		}
		rows = append(rows, m)
	}
	return rows
}

func sumMS(rows []sink.TokenMetrics, f func(sink.TokenMetrics) float64) float64 {
	var s float64
	for _, r := range rows {
		s += f(r)
	}
	return s
}

// TestComputeMeasured: compute_ms is the measured busy time of the compute
// sections, not wall − stall. A slow reader makes stall grow while compute
// stays; time the decode goroutine spends outside compute and outside the
// wait for experts (a slow route observer) is in wall but in neither term;
// and without such time compute + stall accounts for wall within 2 ms a row
// (the median row). Compute sections are timed by the wall clock, so on a
// machine loaded far past its cores a section the scheduler preempts is
// stretched: a check that fails is retried, up to 3 attempts, and the test
// fails only if every attempt fails. Compute derived from wall − stall fails
// every attempt, since the injected waits are the same each time.
func TestComputeMeasured(t *testing.T) {
	if testing.Short() {
		// The -short run is the race-detector pass (scripts/test.sh): the
		// detector's slowdown on a loaded machine stretches the wall-clock
		// compute sections past any bound (load 19 saw compute 37 → 853 ms).
		// The plain `go test ./...` run measures.
		t.Skip("timing test: run without -short")
	}
	const attempts = 3
	var problems []string
	for a := 1; a <= attempts; a++ {
		problems = computeProblems(t)
		if len(problems) == 0 {
			return
		}
		t.Logf("attempt %d of %d: %s", a, attempts, strings.Join(problems, "; "))
	}
	for _, p := range problems {
		t.Error(p)
	}
}

// computeProblems runs the slow-reader, fast-reader and slow-observer decodes
// once and returns what does not hold.
func computeProblems(t *testing.T) []string {
	const n, layers = 6, 4
	const delay = 10 * time.Millisecond
	var problems []string
	fail := func(format string, args ...any) { problems = append(problems, fmt.Sprintf(format, args...)) }
	// A first run brings the model file into the page cache (other
	// processes may have evicted it), so that neither measured run pays
	// for the disk.
	stepRows(t, n, 0, nil)
	slow := stepRows(t, n, delay, nil)
	fast := stepRows(t, n, 0, nil)
	var gaps []float64
	for _, r := range fast {
		if r.ComputeMS <= 0 {
			fail("step %d: compute_ms %.3f", r.Step, r.ComputeMS)
		}
		gaps = append(gaps, math.Abs(r.WallMS-r.ComputeMS-r.StallMS))
	}
	slices.Sort(gaps)
	if med := gaps[len(gaps)/2]; med > 2 {
		fail("median row: wall − compute − stall = %.2f ms unaccounted (rows %v)", med, fast)
	}
	get := func(f func(sink.TokenMetrics) float64) (float64, float64) { return sumMS(fast, f), sumMS(slow, f) }
	fs, ss := get(func(r sink.TokenMetrics) float64 { return r.StallMS })
	fc, sc := get(func(r sink.TokenMetrics) float64 { return r.ComputeMS })
	t.Logf("stall %.1f → %.1f ms, compute %.1f → %.1f ms", fs, ss, fc, sc)
	// Every layer of every step waits for at least one read 10 ms late.
	injected := float64(n * layers * delay / time.Millisecond)
	if fs >= ss {
		fail("stall %.1f ms with the fast reader, %.1f with the slow one: it must shrink with a faster reader", fs, ss)
	}
	if ss < injected {
		fail("slow reader: stall %.1f ms over %d steps, want ≥ %.0f", ss, n, injected)
	}
	// CPU contention (a loaded machine, the race detector) stretches compute
	// sections a little; compute derived from wall would take the injected
	// waits whole.
	if sc-fc > injected/4 {
		fail("slow reader: compute %.1f → %.1f ms grew with the %.0f ms of injected waits", fc, sc, injected)
	}
	// A 3 ms observer per layer: 12 ms a step that is neither compute nor stall.
	busy := stepRows(t, n, 0, func() { time.Sleep(3 * time.Millisecond) })
	for _, r := range busy {
		if gap := r.WallMS - r.ComputeMS - r.StallMS; gap < 10 {
			fail("step %d: wall %.2f, compute %.2f, stall %.2f: the observer's 12 ms were counted as compute or stall", r.Step, r.WallMS, r.ComputeMS, r.StallMS)
		}
	}
	return problems
}
