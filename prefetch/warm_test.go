package prefetch

import (
	"context"
	"math/rand/v2"
	"os"
	"path/filepath"
	"slices"
	"sync"
	"testing"
	"time"

	"github.com/pipe-engine/pipe/cache"
	"github.com/pipe-engine/pipe/expert"
	"github.com/pipe-engine/pipe/reader"
	"github.com/pipe-engine/pipe/warmstart"
)

// hookFile is the model file with a hook that runs before every read (nil:
// none): the tests hold reads there — a disk that answers when told — and
// record their order.
type hookFile struct {
	f      *os.File
	before func(off int64)
}

func (h hookFile) ReadAt(p []byte, off int64) (int, error) {
	if h.before != nil {
		h.before(off)
	}
	return h.f.ReadAt(p, off)
}

func (h hookFile) Close() error { return h.f.Close() }

// hangGuard bounds the tests' waits for an event: reaching it fails the
// test loudly instead of hanging; it is no timing claim.
const hangGuard = 60 * time.Second

// heldReads is a disk whose reads wait until released: hook records each
// read's offset and holds it while held is set. started receives once per
// read begun (buffered; never blocks the reader).
type heldReads struct {
	mu      sync.Mutex
	offs    []int64
	held    bool
	release chan struct{}
	started chan struct{}
}

func newHeldReads(held bool) *heldReads {
	return &heldReads{held: held, release: make(chan struct{}), started: make(chan struct{}, 1024)}
}

func (h *heldReads) hook(off int64) {
	h.mu.Lock()
	h.offs = append(h.offs, off)
	held, rel := h.held, h.release
	h.mu.Unlock()
	select {
	case h.started <- struct{}{}:
	default:
	}
	if held {
		select {
		case <-rel:
		case <-time.After(hangGuard): // the test failed to release: let it end
		}
	}
}

// hold makes the reads that begin from now on wait for the next let.
func (h *heldReads) hold() {
	h.mu.Lock()
	h.held, h.release = true, make(chan struct{})
	h.mu.Unlock()
}

// let releases the held reads; later reads run at once.
func (h *heldReads) let() {
	h.mu.Lock()
	if h.held {
		close(h.release)
	}
	h.held = false
	h.mu.Unlock()
}

// waitStarted waits for a read to begin.
func (h *heldReads) waitStarted(t *testing.T) {
	t.Helper()
	select {
	case <-h.started:
	case <-time.After(hangGuard):
		t.Fatalf("no read began in %v", hangGuard)
	}
}

// offsets returns the offsets read so far, in the order the reads began.
func (h *heldReads) offsets() []int64 {
	h.mu.Lock()
	defer h.mu.Unlock()
	return slices.Clone(h.offs)
}

// warmSetup is setup with one lane over a file whose reads run before
// (nil: none) and budget slots.
func warmSetup(t *testing.T, budget int64, before func(off int64)) (*Planner, *cache.Cache, fileLayout, []byte, <-chan struct{}) {
	t.Helper()
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
		return hookFile{f: f, before: before}, err
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
	changed, note := poke()
	p.OnWarm(note)
	t.Cleanup(func() {
		p.Close()
		cancel()
		lanes.Close()
		if err := c.Close(); err != nil {
			t.Error(err)
		}
		files.Close()
	})
	return p, c, lay, data, changed
}

// keyAt maps a file offset back to the expert whose ranges hold it.
func keyAt(lay fileLayout, off int64) (cache.Key, bool) {
	for l, row := range lay.ranges {
		for e, rs := range row {
			for _, r := range rs {
				if off >= r.Off && off < r.Off+r.Len {
					return cache.Key{Layer: l, Expert: e}, true
				}
			}
		}
	}
	return cache.Key{}, false
}

// readOrder is the experts in the order their first read began.
func readOrder(t *testing.T, lay fileLayout, offs []int64) []cache.Key {
	t.Helper()
	var ks []cache.Key
	for _, off := range offs {
		k, ok := keyAt(lay, off)
		if !ok {
			t.Fatalf("a read at %d is in no expert", off)
		}
		if !slices.Contains(ks, k) {
			ks = append(ks, k)
		}
	}
	return ks
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

// TestWarmNeverDelaysDemand: with warm reads queued behind the one a lane
// has started, demand reads of other experts find a resident slot at once
// (no wait, no transient slot, nothing evicted) and are read next, before
// any queued warm read; the budget is never exceeded. The disk holds the
// first warm read until the demand is planned, so the order is exact.
func TestWarmNeverDelaysDemand(t *testing.T) {
	disk := newHeldReads(true)
	p, c, lay, data, _ := warmSetup(t, 14, disk.hook)
	ctx := context.Background()
	done := make(chan warmstart.Stats, 1)
	go func() {
		st, err := p.Warm(ctx, allKeys(2, 6), 8) // layers 0 and 1
		if err != nil {
			t.Error(err)
		}
		done <- st
	}()
	disk.waitStarted(t) // a lane has started the first warm read; the rest queue
	demand := []int{5, 4, 3}
	ch := make(chan expert.Ready, len(demand))
	if err := p.Plan(ctx, 1, 2, demand, ch); err != nil { // queues the demand reads
		t.Fatal(err)
	}
	disk.let()
	consume(t, ch, len(demand), 2, lay, data)
	st := <-done
	order := readOrder(t, lay, disk.offsets())
	if len(order) < 4 || order[0].Layer == 2 {
		t.Fatalf("reads began in the order %v: want a warm read, then the demand", order)
	}
	for i, e := range demand {
		if !slices.Contains(order[1:4], cache.Key{Layer: 2, Expert: e}) {
			t.Errorf("demand L2/E%d (%d) was not among the three reads after the first warm one: %v", e, i, order)
		}
	}
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

// TestWarmBehindGuesses: with warm reads queued behind the one a lane has
// started, a layer's demand reads are read next, then a prompt pass's
// guesses, and only then the rest of the warm start: a warm read never
// holds a routed or guessed read in a queue (a warm-started prompt pass
// reads what it routes as a cold one would).
func TestWarmBehindGuesses(t *testing.T) {
	readsBehind(t, "warm start", func(ctx context.Context, p *Planner) error {
		_, err := p.Warm(ctx, allKeys(2, 6), 4) // layers 0 and 1
		return err
	})
}

// TestWarmFillsFreeSlotsOnly: a warm start fills the free slots layer by
// layer from the layer after the last one looked up (hottest first within a
// layer), stops when the cache is full without evicting, and the warmed
// experts are hits with the right bytes.
func TestWarmFillsFreeSlotsOnly(t *testing.T) {
	p, c, lay, data, w := warmSetup(t, 5, nil)
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
	waitWarm(t, p, w, func(ws warmstart.Stats) bool { return ws.Completed == 2 })
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

// waitWarm waits until the warm statistics satisfy ok, looking again at
// every change the planner signals on changed (its OnWarm hook, poke); it
// fails the test after hangGuard.
func waitWarm(t *testing.T, p *Planner, changed <-chan struct{}, ok func(warmstart.Stats) bool) warmstart.Stats {
	t.Helper()
	guard := time.After(hangGuard)
	for {
		ws := p.WarmStats()
		if ok(ws) {
			return ws
		}
		select {
		case <-changed:
		case <-guard:
			t.Fatalf("warm reads never got there in %v: %+v", hangGuard, ws)
		}
	}
}

// poke is a hook that leaves a token in a channel of capacity one at every
// call and never blocks: a waiter that looks after each token it takes
// misses no change.
func poke() (<-chan struct{}, func()) {
	ch := make(chan struct{}, 1)
	return ch, func() {
		select {
		case ch <- struct{}{}:
		default:
		}
	}
}

// TestWarmWithdrawnOnCancel: ending the warm start's context takes back the
// reads no lane has started; their slots are free again. The disk holds the
// read a lane has started until the warm start has returned.
func TestWarmWithdrawnOnCancel(t *testing.T) {
	disk := newHeldReads(true)
	p, c, _, _, w := warmSetup(t, 12, disk.hook)
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan warmstart.Stats, 1)
	go func() {
		st, _ := p.Warm(ctx, allKeys(3, 6), 6)
		done <- st
	}()
	disk.waitStarted(t) // the lane is reading the first expert
	// Cancel only once a read waits behind it in the queue: Warm may not
	// have offered the second read yet when the first one starts.
	waitWarm(t, p, w, func(ws warmstart.Stats) bool { return ws.Issued >= 2 })
	cancel()
	<-done
	disk.let()
	st := waitWarm(t, p, w, func(ws warmstart.Stats) bool { return ws.Completed+ws.Withdrawn == ws.Issued })
	if st.Withdrawn == 0 || st.Completed != 1 {
		t.Errorf("warm stats %+v: want the started read completed and the queued ones withdrawn", st)
	}
	if cs := c.Stats(); cs.ResidentEntries != int(st.Completed) || cs.Abandoned != st.Withdrawn {
		t.Errorf("cache %+v: %d completed reads should be resident, %d abandoned", cs, st.Completed, st.Withdrawn)
	}
}
