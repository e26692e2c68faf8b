package stages

import (
	"context"
	"testing"
	"time"

	"github.com/pipe-engine/pipe/model"
	"github.com/pipe-engine/pipe/reader"
	"github.com/pipe-engine/pipe/warmstart"
)

// slowReads delays every read, like a slow disk.
type slowReads struct {
	reader.File
	delay time.Duration
}

func (f slowReads) ReadAt(p []byte, off int64) (int, error) {
	time.Sleep(f.delay)
	return f.File.ReadAt(p, off)
}

// TestWarmStartDuringDenseLoad: Inputs.WarmKeys is asked before the dense
// weights load and the warm reads run while they do — with every read taking
// 5 ms (the dense load is one read per tensor, one at a time), warm reads
// have completed by the time Open returns — the budget holds, and the logits
// are bit-identical to a cold run.
func TestWarmStartDuringDenseLoad(t *testing.T) {
	ctx := context.Background()
	cold := baseCfg()
	want, err := decode(ctx, t, cold, 4)
	if err != nil {
		t.Fatal(err)
	}
	cfg := baseCfg()
	cfg.IO.Open = func(path string, direct bool) (reader.File, error) {
		f, err := reader.OpenOS(path, direct)
		if err != nil {
			return nil, err
		}
		return slowReads{f, 5 * time.Millisecond}, nil
	}
	asked := 0
	in := Inputs{}
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
	ws := e.Metrics().Warm
	e.Close()
	if asked != 1 || ws.Completed == 0 {
		t.Fatalf("WarmKeys asked %d times, %d warm reads done when Open returned (%+v): want once, and reads done during the dense load", asked, ws.Completed, ws)
	}
	in.WarmKeys = func(d *model.Desc) []warmstart.Key {
		keys := []warmstart.Key{}
		for x := range d.Experts[0] {
			keys = append(keys, warmstart.Key{Layer: 0, Expert: x}, warmstart.Key{Layer: 2, Expert: x})
		}
		return keys
	}
	got, err := decodeIn(ctx, t, cfg, in, 4, func(e *Engine) {
		ws := e.Metrics().Warm
		cs := cacheOf(e).Stats()
		if !e.Metrics().WarmStarted || ws.Completed == 0 {
			t.Errorf("warm start %v, stats %+v: want started and reads done", e.Metrics().WarmStarted, ws)
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
