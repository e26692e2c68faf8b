package stages

import (
	"sync/atomic"
	"testing"
	"time"

	"github.com/pipe-engine/pipe/reader"
)

// latchFile holds expert reads while armed: a read waits until the cache
// shows only its own pin left (the FFN has computed and released everything
// else) or until patience runs out, and records which came first.
type latchFile struct {
	reader.File
	armed    *atomic.Bool
	pinned   func() int
	patience time.Duration
	released *atomic.Int64 // reads that saw the other experts released
	waited   *atomic.Int64 // reads that ran out of patience
}

func (f latchFile) ReadAt(p []byte, off int64) (int, error) {
	if f.armed.Load() {
		deadline := time.Now().Add(f.patience)
		for f.pinned() > 1 && time.Now().Before(deadline) {
			time.Sleep(time.Millisecond)
		}
		if f.pinned() <= 1 {
			f.released.Add(1)
		} else {
			f.waited.Add(1)
		}
	}
	return f.File.ReadAt(p, off)
}

// overlapRun routes layer 0 twice with a one-slot cache: the first pass
// reads both routed experts and keeps the first resident, so the second pass
// has one hit and one miss, whose read is held by a latch. It returns
// whether the miss's read saw the hit computed and released first.
func overlapRun(t *testing.T, overlap bool, patience time.Duration) (released, waited int64) {
	t.Helper()
	var armed atomic.Bool
	var rel, wait atomic.Int64
	var e *Engine
	c := baseCfg()
	c.NoOverlap = !overlap
	c.Dense = "mmap" // only expert reads go through the latch
	c.IO.Lanes = 1
	c.IO.Open = func(path string, direct bool) (reader.File, error) {
		f, err := reader.OpenOS(path, direct)
		if err != nil {
			return nil, err
		}
		return latchFile{File: f, armed: &armed, pinned: func() int { return cacheOf(e).Stats().Pinned },
			patience: patience, released: &rel, waited: &wait}, nil
	}
	// Size the budget to one slot once the slot size is known.
	probe, _ := moeCase(t, c)
	c.Cache.Bytes = probe.layout.slotBytes
	probe.Close()
	e, run := moeCase(t, c)
	defer e.Close()
	if err := run(0); err != nil {
		t.Fatal(err)
	}
	before := cacheOf(e).Stats()
	armed.Store(true)
	if err := run(0); err != nil {
		t.Fatal(err)
	}
	after := cacheOf(e).Stats()
	if after.Hits-before.Hits != 1 || after.Misses-before.Misses != 1 {
		t.Fatalf("second pass: %d hits, %d misses; want 1 and 1", after.Hits-before.Hits, after.Misses-before.Misses)
	}
	return rel.Load(), wait.Load()
}

// TestHitComputedBeforeSlowMiss: with overlap the FFN computes a layer's
// cache hit (and releases it) while the layer's miss is still being read;
// with --overlap=false it waits for the whole layer, holding the hit. With
// overlap the latch's patience is a hang guard (a minute); without, the
// release it waits for must never come, so any patience shows it.
func TestHitComputedBeforeSlowMiss(t *testing.T) {
	// counts are per pread: a miss is several (one per projection)
	if rel, wait := overlapRun(t, true, time.Minute); rel == 0 || wait != 0 {
		t.Errorf("overlap: the miss's read saw the hit released %d times, ran out of patience %d times", rel, wait)
	}
	if rel, wait := overlapRun(t, false, 200*time.Millisecond); rel != 0 || wait == 0 {
		t.Errorf("--overlap=false: the hit was released before the miss was read (%d, %d): the layer was not serialised", rel, wait)
	}
}
