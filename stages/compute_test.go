package stages

import (
	"context"
	"math"
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
	cfg.Cache.Bytes = 0
	cfg.Dense = dense.Mmap // dense bytes via mmap: only expert reads go through the slow file
	cfg.IO.Open = func(path string, direct bool) (reader.File, error) {
		f, err := reader.OpenOS(path, direct)
		if err != nil {
			return nil, err
		}
		return slowFile{File: f, delay: &delay}, nil
	}
	ctx := context.Background()
	e, err := Open(ctx, cfg)
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
		e.OnRoute = func(int, int, [][]int, [][]float32) { observer() }
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
// and without such time compute + stall accounts for wall within 2 ms a row.
func TestComputeMeasured(t *testing.T) {
	const n = 6
	fast := stepRows(t, n, 0, nil)
	for _, r := range fast {
		if r.ComputeMS <= 0 {
			t.Fatalf("step %d: compute_ms %.3f", r.Step, r.ComputeMS)
		}
		if d := r.WallMS - r.ComputeMS - r.StallMS; math.Abs(d) > 2 {
			t.Errorf("step %d: wall %.2f − compute %.2f − stall %.2f = %.2f ms unaccounted", r.Step, r.WallMS, r.ComputeMS, r.StallMS, d)
		}
	}
	const delay = 5 * time.Millisecond
	slow := stepRows(t, n, delay, nil)
	get := func(f func(sink.TokenMetrics) float64) (float64, float64) { return sumMS(fast, f), sumMS(slow, f) }
	fs, ss := get(func(r sink.TokenMetrics) float64 { return r.StallMS })
	fc, sc := get(func(r sink.TokenMetrics) float64 { return r.ComputeMS })
	// 4 layers × 2 experts routed per step, each read at least 5 ms late.
	if minStall := float64(n) * 4 * 5 / 2; ss-fs < minStall {
		t.Errorf("slow reader: stall %.1f → %.1f ms over %d steps, want it to grow by ≥ %.0f", fs, ss, n, minStall)
	}
	if sc > 2*fc+float64(n) {
		t.Errorf("slow reader: compute %.1f → %.1f ms: it must not grow with the stall", fc, sc)
	}
	// A 3 ms observer per layer: 12 ms a step that is neither compute nor stall.
	busy := stepRows(t, n, 0, func() { time.Sleep(3 * time.Millisecond) })
	for _, r := range busy {
		if gap := r.WallMS - r.ComputeMS - r.StallMS; gap < 10 {
			t.Errorf("step %d: wall %.2f, compute %.2f, stall %.2f: the observer's 12 ms were counted as compute or stall", r.Step, r.WallMS, r.ComputeMS, r.StallMS)
		}
	}
}
