package stages

import (
	"context"
	"math"
	"sync"
	"testing"
	"time"

	"github.com/pipe-engine/pipe/dense"
	"github.com/pipe-engine/pipe/ffn"
	"github.com/pipe-engine/pipe/model"
	"github.com/pipe-engine/pipe/sink"
)

// fakeClock is the accounting's clock in a test (Inputs.clock): it moves
// when advanced and by tick at every reading (0: only when advanced).
type fakeClock struct {
	mu   sync.Mutex
	now  time.Time
	tick time.Duration
}

func newFakeClock(tick time.Duration) *fakeClock {
	return &fakeClock{now: time.Unix(1000, 0), tick: tick}
}

func (c *fakeClock) read() time.Time {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.now = c.now.Add(c.tick)
	return c.now
}

func (c *fakeClock) advance(d time.Duration) {
	c.mu.Lock()
	c.now = c.now.Add(d)
	c.mu.Unlock()
}

// stepRows decodes n steps on cfg with one compute thread and returns their
// metrics; the accounting reads clk, and observer, when set, runs on the
// decode goroutine after each layer's routing.
func stepRows(t *testing.T, cfg Config, clk *fakeClock, n int, observer func()) []sink.TokenMetrics {
	t.Helper()
	cfg.Threads = 1
	ctx := context.Background()
	e, err := Open(ctx, cfg, Inputs{clock: clk.read})
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

// TestComputeMeasured: a step's wall, stall and compute are read from the
// engine's clock, and compute_ms is the measured time of the compute
// sections, not wall − stall. On a fake clock that only a slow route
// observer moves (3 ms per layer, time outside compute and outside the
// wait for experts), a streamed step with no cache (every expert read, the
// FFN stage waiting on the lanes) has wall exactly 12 ms and stall and
// compute exactly 0: no section reads the wall clock, and the observer's
// time is in wall alone. On a clock that also ticks at every reading, a
// mapped step (every reading on the decode goroutine, in a fixed order) has
// compute above 0 and the same stall and compute with the observer as
// without, its wall longer by exactly the observer's 12 ms.
func TestComputeMeasured(t *testing.T) {
	const n, layers, obs = 6, 4, 3 * time.Millisecond
	stream := baseCfg()
	stream.Cache.Bytes = NoCache
	stream.Dense = dense.Mmap
	clk := newFakeClock(0)
	for _, r := range stepRows(t, stream, clk, n, func() { clk.advance(obs) }) {
		if r.WallMS != ms(layers*obs) || r.StallMS != 0 || r.ComputeMS != 0 {
			t.Errorf("streamed step %d: wall %v, stall %v, compute %v ms; want %v, 0, 0 (only the observer moved the clock)", r.Step, r.WallMS, r.StallMS, r.ComputeMS, ms(layers*obs))
		}
	}
	mapped := baseCfg()
	mapped.Stream = StreamOff
	plain := stepRows(t, mapped, newFakeClock(time.Microsecond), n, nil)
	clk = newFakeClock(time.Microsecond)
	slow := stepRows(t, mapped, clk, n, func() { clk.advance(obs) })
	for i, a := range plain {
		b := slow[i]
		if a.ComputeMS <= 0 || a.StallMS != 0 {
			t.Errorf("mapped step %d: compute %v ms, stall %v ms; want compute > 0, no stall", a.Step, a.ComputeMS, a.StallMS)
		}
		if b.ComputeMS != a.ComputeMS || b.StallMS != a.StallMS {
			t.Errorf("mapped step %d: compute %v → %v ms, stall %v → %v ms with the observer: it must count in neither", a.Step, a.ComputeMS, b.ComputeMS, a.StallMS, b.StallMS)
		}
		if d := b.WallMS - a.WallMS; math.Abs(d-ms(layers*obs)) > 1e-9 {
			t.Errorf("mapped step %d: wall %v → %v ms, want %v ms more", a.Step, a.WallMS, b.WallMS, ms(layers*obs))
		}
	}
}

// TestMeterTake: a step's stall is the FFN stage's waits, its compute the
// FFN stage's compute plus the model's sections since the last take.
func TestMeterTake(t *testing.T) {
	var m meter
	m.timings.Attention = 5 // before the step: not its
	m.take()
	m.add(ffn.Stats{Stall: 7, Compute: 11})
	m.add(ffn.Stats{Stall: 13, Compute: 17})
	m.timings.Attention += 19
	m.timings.Router += 23
	m.timings.LMHead += 29
	m.timings.Embed += 31
	if s, c := m.take(); s != 20 || c != 11+17+19+23+29+31 {
		t.Fatalf("take = %v, %v; want 20ns, %v", s, c, time.Duration(11+17+19+23+29+31))
	}
	if s, c := m.take(); s != 0 || c != 0 {
		t.Fatalf("second take = %v, %v; want 0, 0", s, c)
	}
	if m.stall != 20 || m.experts != 28 {
		t.Fatalf("cumulative stall %v, experts %v; want 20ns, 28ns", m.stall, m.experts)
	}
}
