package stages

import (
	"context"
	"testing"

	"github.com/pipe-engine/pipe/metrics"
	"github.com/pipe-engine/pipe/model"
)

// TestPrefillLayers: a prompt pass reports one row per MoE layer, in layer
// order, and the rows add up to the pass's own totals — stall and slot wait
// to PrefillTimes', lookups to the engine's prompt lookups, bytes read and
// lane time to the lanes' — so the per-layer accounting is the counters'
// one definition split by layer, not a second one; with no expert cache
// (transient slots only) and with one.
func TestPrefillLayers(t *testing.T) {
	ctx := context.Background()
	for _, budget := range []int64{0, 4 << 20} {
		cfg := baseCfg()
		cfg.Cache.Bytes = budget
		if budget == 0 {
			cfg.Cache.Bytes = NoCache
		}
		e, err := Open(ctx, cfg, Inputs{})
		if err != nil {
			t.Fatal(err)
		}
		var layers []int
		e.Observe(func(_, layer int, _ [][]int, _ [][]float32) { layers = append(layers, layer) })
		s, err := e.NewSession(len(prompt), model.KVF32)
		if err != nil {
			t.Fatal(err)
		}
		if _, _, err := s.Prefill(ctx, prompt, false); err != nil {
			t.Fatal(err)
		}
		pt := s.PrefillTimes()
		m := e.Metrics().Counters
		cs := cacheOf(e).Stats()
		busy, read := lanesOf(e).Totals()
		var sum metrics.Layer
		for i, l := range pt.Layers {
			if l.Pass != 0 || l.Tokens != len(prompt) || i >= len(layers) || l.Layer != layers[i] {
				t.Errorf("budget %d: row %d %+v: want pass 0, %d tokens, layer %v", budget, i, l, len(prompt), layers)
			}
			sum.Wall += l.Wall
			sum.Compute += l.Compute
			sum.Counters = addCounters(sum.Counters, l.Counters)
		}
		e.Close()
		t.Logf("budget %d: %d rows, sum %+v; slot waits %d", budget, len(pt.Layers), sum, cs.Waits)
		if len(pt.Layers) != len(layers) || len(layers) == 0 {
			t.Fatalf("budget %d: %d rows for %d MoE layers", budget, len(pt.Layers), len(layers))
		}
		if sum.Stall != pt.Stall || sum.SlotWait != pt.SlotWait || sum.SlotWait != cs.WaitTime {
			t.Errorf("budget %d: rows' stall %v, slot wait %v; the pass's %v, %v; the cache's wait %v", budget, sum.Stall, sum.SlotWait, pt.Stall, pt.SlotWait, cs.WaitTime)
		}
		if sum.Prompt != m.Prompt || sum.ReadBytes != read || sum.IOBusy != busy {
			t.Errorf("budget %d: rows' lookups %+v, read %d, busy %v; the engine's %+v, the lanes' %d, %v", budget, sum.Prompt, sum.ReadBytes, sum.IOBusy, m.Prompt, read, busy)
		}
		if sum.Compute <= 0 || sum.Compute > pt.Compute || sum.Compute+sum.Stall > sum.Wall {
			t.Errorf("budget %d: rows' compute %v stall %v wall %v; the pass's compute %v", budget, sum.Compute, sum.Stall, sum.Wall, pt.Compute)
		}
	}
}

// addCounters is a + b for the fields a layer row carries.
func addCounters(a, b metrics.Counters) metrics.Counters {
	a.Prompt = a.Prompt.Add(b.Prompt)
	a.ReadBytes += b.ReadBytes
	a.IOBusy += b.IOBusy
	a.Stall += b.Stall
	a.SlotWait += b.SlotWait
	a.Mgmt += b.Mgmt
	return a
}
