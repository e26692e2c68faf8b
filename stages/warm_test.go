package stages

import (
	"context"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/pipe-engine/pipe/model"
	"github.com/pipe-engine/pipe/reader"
	"github.com/pipe-engine/pipe/warmstart"
)

// hookReads runs before and after around every read (nil: none).
type hookReads struct {
	reader.File
	before, after func(off int64, n int)
}

func (f hookReads) ReadAt(p []byte, off int64) (int, error) {
	if f.before != nil {
		f.before(off, len(p))
	}
	n, err := f.File.ReadAt(p, off)
	if f.after != nil {
		f.after(off, len(p))
	}
	return n, err
}

// hooked is cfg with every file read going through before and after.
func hooked(cfg Config, before, after func(off int64, n int)) Config {
	cfg.IO.Open = func(path string, direct bool) (reader.File, error) {
		f, err := reader.OpenOS(path, direct)
		if err != nil {
			return nil, err
		}
		return hookReads{File: f, before: before, after: after}, nil
	}
	return cfg
}

// TestWarmStartDuringDenseLoad: Inputs.WarmKeys is asked before the dense
// weights load and the warm reads run while they do — the dense load's last
// read waits until a warm read has completed, so warm reads that waited for
// the dense load would never complete (the hang guard fails the test), and
// Open returns with warm reads done — the budget holds, and the logits are
// bit-identical to a cold run.
func TestWarmStartDuringDenseLoad(t *testing.T) {
	ctx := context.Background()
	cold := baseCfg()
	want, err := decode(ctx, t, cold, 4)
	if err != nil {
		t.Fatal(err)
	}
	// A probe: how many reads the dense load makes, and where the experts are.
	var reads atomic.Int64
	probe, err := Open(ctx, hooked(baseCfg(), func(int64, int) { reads.Add(1) }, nil), Inputs{})
	if err != nil {
		t.Fatal(err)
	}
	denseReads, lay := reads.Load(), probe.layout
	probe.Close()
	isExpert := func(off int64, n int) bool {
		for _, exps := range lay.ranges {
			for _, rs := range exps {
				for _, r := range rs {
					if off < r.Off+r.Len && r.Off < off+int64(n) {
						return true
					}
				}
			}
		}
		return false
	}
	warmDone := make(chan struct{})
	var once sync.Once
	var dense atomic.Int64
	cfg := hooked(baseCfg(), func(off int64, n int) {
		if isExpert(off, n) || dense.Add(1) != denseReads {
			return
		}
		select { // the dense load's last read
		case <-warmDone:
		case <-time.After(time.Minute):
			t.Errorf("no warm read completed in a minute while the dense load waited for one")
		}
	}, func(off int64, n int) {
		if isExpert(off, n) {
			once.Do(func() { close(warmDone) })
		}
	})
	asked := 0
	changed, note := poke()
	in := Inputs{onWarm: note}
	in.WarmKeys = func(d *model.Desc) []warmstart.Key {
		asked++
		var keys []warmstart.Key
		for l, exps := range d.Experts {
			for x := range exps {
				keys = append(keys, warmstart.Key{Layer: l, Expert: x})
			}
		}
		return keys
	}
	e, err := Open(ctx, cfg, in)
	if err != nil {
		t.Fatal(err)
	}
	// The read is done (the dense load waited for it); its completion is
	// booked on the lane right after.
	waitWarm(t, e, changed, func(ws warmstart.Stats) bool { return ws.Completed > 0 })
	e.Close()
	if asked != 1 {
		t.Fatalf("WarmKeys asked %d times, want once", asked)
	}
	in.WarmKeys = func(d *model.Desc) []warmstart.Key {
		keys := []warmstart.Key{}
		for x := range d.Experts[0] {
			keys = append(keys, warmstart.Key{Layer: 0, Expert: x}, warmstart.Key{Layer: 2, Expert: x})
		}
		return keys
	}
	got, err := decodeIn(ctx, t, cfg, in, 4, func(e *Engine) {
		// the warm reads share the lanes with the decode's
		waitWarm(t, e, changed, func(ws warmstart.Stats) bool { return ws.Completed > 0 })
		ws := e.Metrics().Warm
		cs := cacheOf(e).Stats()
		if !e.Metrics().WarmStarted || ws.Completed == 0 {
			t.Errorf("warm start %v, stats %+v: want started and reads done (waited a minute)", e.Metrics().WarmStarted, ws)
		}
		if cs.PeakResidentBytes > cs.BudgetBytes {
			t.Errorf("peak resident %d > budget %d", cs.PeakResidentBytes, cs.BudgetBytes)
		}
	})
	if err != nil {
		t.Fatal(err)
	}
	if !sameBits(got, want) {
		t.Error("logits with a warm start differ from a cold run")
	}
}
