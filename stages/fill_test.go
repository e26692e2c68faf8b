package stages

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"sync"
	"testing"
	"time"

	"github.com/rs/zerolog"

	"github.com/pipe-engine/pipe/reader"
	"github.com/pipe-engine/pipe/warmstart"
)

// syncBuffer is a log sink the engine's goroutines may write at once.
type syncBuffer struct {
	mu sync.Mutex
	b  bytes.Buffer
}

func (s *syncBuffer) Write(p []byte) (int, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.b.Write(p)
}

// events returns the logged JSON events named name.
func (s *syncBuffer) events(t *testing.T, name string) []map[string]any {
	t.Helper()
	s.mu.Lock()
	defer s.mu.Unlock()
	var out []map[string]any
	sc := bufio.NewScanner(bytes.NewReader(s.b.Bytes()))
	for sc.Scan() {
		var ev map[string]any
		if err := json.Unmarshal(sc.Bytes(), &ev); err != nil {
			t.Fatalf("log line %q: %v", sc.Text(), err)
		}
		if ev["event"] == name {
			out = append(out, ev)
		}
	}
	return out
}

// expertShape is the golden model's number of routed experts, one cache
// slot and the cache bytes of every expert (reader.SpanBytes).
func expertShape(t *testing.T) (count, slot, span int64) {
	t.Helper()
	e, err := Open(context.Background(), baseCfg(), Inputs{})
	if err != nil {
		t.Fatal(err)
	}
	defer e.Close()
	for _, exps := range e.layout.ranges {
		for _, rs := range exps {
			span += reader.SpanBytes(rs)
		}
	}
	return e.layout.count(), e.layout.slotBytes, span
}

// waitFilled waits for the engine's cache fill to complete (its channel,
// closed after the cache_fill event); the deadline is a hang guard.
func waitFilled(t *testing.T, e *Engine) {
	t.Helper()
	filled := e.src.(*streamSource).filled
	if filled == nil {
		t.Fatal("no cache fill was started")
	}
	select {
	case <-filled:
	case <-time.After(time.Minute):
		t.Fatalf("the cache fill did not complete in a minute: %+v", e.Metrics().Fill)
	}
}

// TestCacheFill: with a budget of exactly every expert, the cache fill
// reads every expert in the background — its cache_fill event names them
// and their bytes —, evicts nothing and stays within the budget, and then
// every lookup of a prompt and 4 decode steps hits; the logits are the
// mmap run's, bit for bit, as with --cache-fill off.
func TestCacheFill(t *testing.T) {
	ctx := context.Background()
	want, err := mmapLogits(ctx, t, 4)
	if err != nil {
		t.Fatal(err)
	}
	count, slot, span := expertShape(t)
	var logs syncBuffer
	cfg := baseCfg()
	cfg.Cache.Bytes = count * slot
	cfg.Log = zerolog.New(&logs)
	got, err := decodeWith(ctx, t, cfg, 4, func(e *Engine) {
		m := e.Metrics()
		if ps := m.Speculation; ps.Misses != 0 || ps.Joins != 0 || ps.Hits == 0 {
			t.Errorf("after the fill: %d hits, %d misses, %d joins; want every lookup a hit", ps.Hits, ps.Misses, ps.Joins)
		}
		if m.Fill.Used == 0 {
			t.Errorf("fill stats %+v: no filled expert was looked up", m.Fill)
		}
	}, func(e *Engine) {
		waitFilled(t, e)
		m, cs := e.Metrics(), cacheOf(e).Stats()
		if f := m.Fill; f.Completed != count || f.Bytes != span || f.Full || f.Withdrawn != 0 {
			t.Errorf("fill stats %+v: want %d experts, %d bytes", f, count, span)
		}
		if cs.ResidentEntries != int(count) || cs.Evictions != 0 || cs.PeakResidentBytes > cs.BudgetBytes {
			t.Errorf("cache %+v: want every expert resident, none evicted, within the budget", cs)
		}
		evs := logs.events(t, "cache_fill")
		if len(evs) != 1 || evs[0]["experts"] != float64(count) || evs[0]["bytes"] != float64(span) ||
			evs[0]["complete"] != true || evs[0]["ms"] == nil {
			t.Errorf("cache_fill events %v: want one, of %d experts and %d bytes, complete", evs, count, span)
		}
	})
	if err != nil {
		t.Fatal(err)
	}
	if !sameBits(got, want) {
		t.Error("logits with the cache fill differ from the mmap run")
	}
}

// TestCacheFillOnlyWhenEveryExpertFits: a budget one expert short of every
// expert fills nothing (a fill would have to evict), nor does --cache-fill
// off with a budget of every expert; both give the mmap run's logits.
func TestCacheFillOnlyWhenEveryExpertFits(t *testing.T) {
	ctx := context.Background()
	want, err := mmapLogits(ctx, t, 2)
	if err != nil {
		t.Fatal(err)
	}
	count, slot, _ := expertShape(t)
	for _, c := range []struct {
		name  string
		bytes int64
		fill  FillMode
	}{{"one expert short", (count - 1) * slot, FillAuto}, {"fill off", count * slot, FillOff}} {
		cfg := baseCfg()
		cfg.Cache.Bytes, cfg.Cache.Fill = c.bytes, c.fill
		var logs syncBuffer
		cfg.Log = zerolog.New(&logs)
		got, err := decodeWith(ctx, t, cfg, 2, func(e *Engine) {
			if f := e.Metrics().Fill; f != (warmstart.Stats{}) || e.src.(*streamSource).filled != nil {
				t.Errorf("%s: fill stats %+v, want no fill", c.name, f)
			}
			if cs := cacheOf(e).Stats(); cs.PeakResidentBytes > cs.BudgetBytes {
				t.Errorf("%s: peak resident %d > budget %d", c.name, cs.PeakResidentBytes, cs.BudgetBytes)
			}
		})
		if err != nil {
			t.Fatal(err)
		}
		if evs := logs.events(t, "cache_fill"); len(evs) != 0 {
			t.Errorf("%s: cache_fill logged: %v", c.name, evs)
		}
		if !sameBits(got, want) {
			t.Errorf("%s: logits differ from the mmap run", c.name)
		}
	}
}

// TestCacheFillCancel: ending the engine's context while a fill read is
// held on the disk ends every other fill read before that read ends —
// withdrawn, or failed by a lane with the context's error, none read — so
// the fill does not run on; it logs no cache_fill event, and Close waits
// for the fill's goroutine (goleak in TestMain).
func TestCacheFillCancel(t *testing.T) {
	count, slot, _ := expertShape(t)
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	probe, err := Open(ctx, baseCfg(), Inputs{})
	if err != nil {
		t.Fatal(err)
	}
	starts := map[int64]bool{} // where an expert's reads begin (its ranges' widened starts)
	for _, exps := range probe.layout.ranges {
		for _, rs := range exps {
			for _, r := range rs {
				off, _ := reader.Widen(r.Off, r.Len)
				starts[off] = true
			}
		}
	}
	probe.Close()
	started, release := make(chan struct{}, 1), make(chan struct{})
	var once sync.Once
	let := func() { once.Do(func() { close(release) }) }
	defer let()
	cfg := hooked(baseCfg(), func(off int64, _ int) {
		if !starts[off] {
			return // the dense load's reads run
		}
		select {
		case started <- struct{}{}:
		default:
		}
		select {
		case <-release:
		case <-time.After(time.Minute): // hang guard: the test failed
		}
	}, nil)
	cfg.Cache.Bytes = count * slot
	var logs syncBuffer
	cfg.Log = zerolog.New(&logs)
	changed, note := poke()
	e, err := Open(ctx, cfg, Inputs{onWarm: note})
	if err != nil {
		t.Fatal(err)
	}
	defer e.Close()
	planner := e.src.(*streamSource).planner
	<-started // a fill read is held
	guard := time.After(time.Minute)
	for e.Metrics().Fill.Issued < 2 { // and another one waits behind it
		select {
		case <-changed:
		case <-guard:
			t.Fatalf("a single fill read offered in a minute: %+v", e.Metrics().Fill)
		}
	}
	cancel()
	for { // every fill read but the held one ends, unread
		f := e.Metrics().Fill
		if f.Completed != 0 {
			t.Fatalf("fill stats %+v: a read completed while the disk held every fill read", f)
		}
		if f.Issued > 1 && f.Withdrawn+f.Failed == f.Issued-1 {
			break
		}
		select {
		case <-changed:
		case <-guard:
			t.Fatalf("the fill's reads did not end a minute after the context ended: %+v", f)
		}
	}
	let()
	e.Close()
	if f := planner.FillStats(); f.Completed+f.Withdrawn+f.Failed != f.Issued || f.Completed == count {
		t.Errorf("fill stats %+v: want the fill stopped", f)
	}
	if evs := logs.events(t, "cache_fill"); len(evs) != 0 {
		t.Errorf("cache_fill logged after the context ended: %v", evs)
	}
}

// TestCacheFillAfterDenseLoad: the cache fill's first read begins only
// after the dense load's last one (the fill must not take the disk from
// the load, and so delay the first token), and the fill still completes.
func TestCacheFillAfterDenseLoad(t *testing.T) {
	count, slot, _ := expertShape(t)
	ctx := context.Background()
	var mu sync.Mutex
	denseSeen, expertEarly := 0, 0
	var starts map[int64]bool
	probeCfg := hooked(baseCfg(), func(int64, int) { mu.Lock(); denseSeen++; mu.Unlock() }, nil)
	probeCfg.Cache.Fill = FillOff
	probe, err := Open(ctx, probeCfg, Inputs{})
	if err != nil {
		t.Fatal(err)
	}
	denseReads := denseSeen // nothing but the dense load reads: no fill, no warm start, no run
	starts = map[int64]bool{}
	for _, exps := range probe.layout.ranges {
		for _, rs := range exps {
			for _, r := range rs {
				off, _ := reader.Widen(r.Off, r.Len)
				starts[off] = true
			}
		}
	}
	probe.Close()
	denseSeen = 0
	cfg := hooked(baseCfg(), func(off int64, _ int) {
		mu.Lock()
		defer mu.Unlock()
		switch {
		case !starts[off]:
			denseSeen++
		case denseSeen < denseReads:
			expertEarly++
		}
	}, nil)
	cfg.Cache.Bytes = count * slot
	e, err := Open(ctx, cfg, Inputs{})
	if err != nil {
		t.Fatal(err)
	}
	defer e.Close()
	waitFilled(t, e)
	mu.Lock()
	defer mu.Unlock()
	if denseReads == 0 || denseSeen != denseReads || expertEarly != 0 {
		t.Errorf("%d of %d dense reads, %d fill reads began before the dense load's last read", denseSeen, denseReads, expertEarly)
	}
	if f := e.Metrics().Fill; f.Completed != count {
		t.Errorf("fill stats %+v: want %d experts read", f, count)
	}
}
