package prefetch

import (
	"context"
	"math/rand/v2"
	"os"
	"path/filepath"
	"sync/atomic"
	"testing"
	"time"

	"github.com/pipe-engine/pipe/cache"
	"github.com/pipe-engine/pipe/expert"
	"github.com/pipe-engine/pipe/reader"
	"github.com/pipe-engine/pipe/warmstart"
)

// slowFile delays every read, like a slow disk.
type slowFile struct {
	f       *os.File
	delay   time.Duration
	started *atomic.Int32 // reads begun (nil: not counted)
}

func (s slowFile) ReadAt(p []byte, off int64) (int, error) {
	if s.started != nil {
		s.started.Add(1)
	}
	time.Sleep(s.delay)
	return s.f.ReadAt(p, off)
}

func (s slowFile) Close() error { return s.f.Close() }

// warmSetup is setup with one lane over a slow file and budget slots.
func warmSetup(t *testing.T, budget int64, delay time.Duration) (*Planner, *cache.Cache, fileLayout, []byte) {
	t.Helper()
	p, c, lay, data, _ := warmSetupReads(t, budget, delay)
	return p, c, lay, data
}

// warmSetupReads is warmSetup that also returns the count of file reads
// begun.
func warmSetupReads(t *testing.T, budget int64, delay time.Duration) (*Planner, *cache.Cache, fileLayout, []byte, *atomic.Int32) {
	t.Helper()
	started := new(atomic.Int32)
	const layers, experts = 3, 6
	var lay fileLayout
	off := int64(123)
	for l := 0; l < layers; l++ {
		var row [][]reader.Range
		for e := 0; e < experts; e++ {
			var rs []reader.Range
			for _, n := range []int64{5000, 7000, 3000} {
				rs = append(rs, reader.Range{Off: off, Len: n})
				off += n + 17
			}
			row = append(row, rs)
		}
		lay.ranges = append(lay.ranges, row)
	}
	data := make([]byte, off+4096)
	r := rand.New(rand.NewPCG(2, 2))
	for i := range data {
		data[i] = byte(r.Uint32())
	}
	path := filepath.Join(t.TempDir(), "model.bin")
	if err := os.WriteFile(path, data, 0o644); err != nil {
		t.Fatal(err)
	}
	files, err := reader.Open([]string{path}, reader.Options{NoODirect: true, Open: func(p string, direct bool) (reader.File, error) {
		f, err := os.Open(p)
		return slowFile{f: f, delay: delay, started: started}, err
	}})
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	lanes, err := reader.Start(ctx, files, reader.LaneOptions{Lanes: 1, Queue: 0})
	if err != nil {
		t.Fatal(err)
	}
	pol, _ := cache.NewPolicy("lru", cache.PolicyOptions{})
	slot := cache.SlotSize(reader.SpanBytes(lay.ranges[0][0]) + 8192)
	c, err := cache.New(cache.Config{BudgetBytes: budget * slot, SlotBytes: slot, Policy: pol, TransientSlots: 4})
	if err != nil {
		t.Fatal(err)
	}
	p := New(c, lanes, lay, nil, 0)
	t.Cleanup(func() {
		p.Close()
		cancel()
		lanes.Close()
		if err := c.Close(); err != nil {
			t.Error(err)
		}
		files.Close()
	})
	return p, c, lay, data, started
}

func allKeys(layers, experts int) []warmstart.Key {
	var ks []warmstart.Key
	for l := 0; l < layers; l++ {
		for e := 0; e < experts; e++ {
			ks = append(ks, warmstart.Key{Layer: l, Expert: e})
		}
	}
	return ks
}

// TestWarmNeverDelaysDemand: with a slow disk and eight warm reads queued,
// demand reads of other experts find a resident slot at once (no wait, no
// transient slot, nothing evicted) and wait for at most the one warm read a
// lane has started, not for the queue; the budget is never exceeded.
func TestWarmNeverDelaysDemand(t *testing.T) {
	const delay = 100 * time.Millisecond
	p, c, lay, data := warmSetup(t, 14, delay)
	ctx := context.Background()
	done := make(chan warmstart.Stats, 1)
	go func() {
		st, err := p.Warm(ctx, allKeys(2, 6), 8) // layers 0 and 1
		if err != nil {
			t.Error(err)
		}
		done <- st
	}()
	time.Sleep(delay / 2) // a lane has started the first warm read; the rest queue
	t0 := time.Now()
	demand := []int{5, 4, 3}
	ch := make(chan expert.Ready, len(demand))
	if err := p.Plan(ctx, 1, 2, demand, ch); err != nil {
		t.Fatal(err)
	}
	consume(t, ch, len(demand), 2, lay, data)
	took := time.Since(t0)
	// Three demand reads (one pread round each) after at most the warm read
	// in progress; behind the queue it would be eight more rounds.
	if limit := 4*delay + 3*delay; took > limit {
		t.Errorf("demand took %v with warm reads queued, want < %v", took, limit)
	}
	st := <-done
	cs := c.Stats()
	if cs.Waits != 0 || cs.Transient != 0 || cs.Evictions != 0 {
		t.Errorf("demand waited for a slot or got a transient one: %+v", cs)
	}
	if cs.PeakResidentBytes > cs.BudgetBytes {
		t.Errorf("peak resident %d > budget %d", cs.PeakResidentBytes, cs.BudgetBytes)
	}
	if st.Issued != 11 || !st.Full {
		t.Errorf("warm stats %+v: want 11 reads (14 slots - 3 demand), stopped full", st)
	}
}

// TestWarmFillsFreeSlotsOnly: a warm start fills the free slots layer by
// layer from the layer after the last one looked up (hottest first within a
// layer), stops when the cache is full without evicting, and the warmed
// experts are hits with the right bytes.
func TestWarmFillsFreeSlotsOnly(t *testing.T) {
	p, c, lay, data := warmSetup(t, 5, time.Millisecond)
	ctx := context.Background()
	// Layer 0 experts 0..2 are used first: they are resident before the warm start.
	ch := make(chan expert.Ready, 3)
	if err := p.Plan(ctx, 1, 0, []int{0, 1, 2}, ch); err != nil {
		t.Fatal(err)
	}
	consume(t, ch, 3, 0, lay, data)
	keys := []warmstart.Key{{Layer: 1, Expert: 4}, {Layer: 0, Expert: 1}, {Layer: 2, Expert: 2}, {Layer: 1, Expert: 0}}
	st, err := p.Warm(ctx, keys, 2)
	if err != nil {
		t.Fatal(err)
	}
	if st.Issued != 2 || !st.Full {
		t.Fatalf("warm stats %+v: want 2 reads into the 2 free slots, then full", st)
	}
	deadline := time.Now().Add(5 * time.Second)
	for p.WarmStats().Completed < 2 && time.Now().Before(deadline) {
		time.Sleep(time.Millisecond)
	}
	cs := c.Stats()
	if cs.Evictions != 0 || cs.ResidentEntries != 5 {
		t.Fatalf("cache %+v: a warm start must not evict", cs)
	}
	for _, k := range []cache.Key{{Layer: 1, Expert: 4}, {Layer: 1, Expert: 0}} {
		ch := make(chan expert.Ready, 1)
		if err := p.Plan(ctx, 2, k.Layer, []int{k.Expert}, ch); err != nil {
			t.Fatal(err)
		}
		consume(t, ch, 1, k.Layer, lay, data)
	}
	if ps, ws := p.Stats(), p.WarmStats(); ps.Hits != 2 || ws.Used != 2 {
		t.Errorf("planner %+v warm %+v: want the 2 warmed experts as hits", ps, ws)
	}
}

// TestWarmWithdrawnOnCancel: ending the warm start's context takes back the
// reads no lane has started; their slots are free again.
func TestWarmWithdrawnOnCancel(t *testing.T) {
	p, c, _, _, started := warmSetupReads(t, 12, 50*time.Millisecond)
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan warmstart.Stats, 1)
	go func() {
		st, _ := p.Warm(ctx, allKeys(3, 6), 6)
		done <- st
	}()
	// Cancel once the lane is reading the first expert (not once a read is
	// issued: on a loaded machine the lane may not have taken it yet, and
	// then every read is withdrawn).
	for wait := time.Now().Add(5 * time.Second); started.Load() == 0; time.Sleep(time.Millisecond) {
		if time.Now().After(wait) {
			t.Fatal("no warm read issued within 5 s")
		}
	}
	cancel()
	st := <-done
	deadline := time.Now().Add(5 * time.Second)
	for {
		ws := p.WarmStats()
		if ws.Completed+ws.Withdrawn == ws.Issued {
			st = ws
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("warm reads never finished: %+v", ws)
		}
		time.Sleep(time.Millisecond)
	}
	if st.Withdrawn == 0 || st.Completed == 0 {
		t.Errorf("warm stats %+v: want the started read completed and the queued ones withdrawn", st)
	}
	if cs := c.Stats(); cs.ResidentEntries != int(st.Completed) || cs.Abandoned != st.Withdrawn {
		t.Errorf("cache %+v: %d completed reads should be resident, %d abandoned", cs, st.Completed, st.Withdrawn)
	}
}
