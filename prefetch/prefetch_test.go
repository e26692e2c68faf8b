package prefetch

import (
	"bytes"
	"context"
	"io"
	"math/rand/v2"
	"os"
	"path/filepath"
	"sync"
	"testing"
	"time"

	"github.com/pipe-engine/pipe/cache"
	"github.com/pipe-engine/pipe/expert"
	"github.com/pipe-engine/pipe/reader"
)

// fileLayout: expert e of layer l is three ranges of sizes 5000, 7000, 3000
// at unaligned offsets of a random file.
type fileLayout struct{ ranges [][][]reader.Range }

func (f fileLayout) ExpertRanges(l, e int) []reader.Range { return f.ranges[l][e] }

func setup(t *testing.T, budget int64) (*Planner, *cache.Cache, fileLayout, []byte, func()) {
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
	r := rand.New(rand.NewPCG(1, 1))
	for i := range data {
		data[i] = byte(r.Uint32())
	}
	path := filepath.Join(t.TempDir(), "model.bin")
	if err := os.WriteFile(path, data, 0o644); err != nil {
		t.Fatal(err)
	}
	files, err := reader.Open([]string{path}, reader.Options{})
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	lanes, err := reader.Start(ctx, files, reader.LaneOptions{Lanes: 2, Queue: 0})
	if err != nil {
		t.Fatal(err)
	}
	pol, _ := cache.NewPolicy("lru", cache.PolicyOptions{})
	var span int64
	for _, row := range lay.ranges {
		for _, rs := range row {
			span = max(span, reader.SpanBytes(rs))
		}
	}
	slot := cache.SlotSize(span)
	c, err := cache.New(cache.Config{BudgetBytes: budget * slot, SlotBytes: slot, Policy: pol, TransientSlots: 4})
	if err != nil {
		t.Fatal(err)
	}
	tp := &Temporal{last: make([][]int, layers)}
	p := New(c, lanes, lay, tp, 2)
	return p, c, lay, data, func() {
		p.Close()
		cancel()
		lanes.Close()
		if err := c.Close(); err != nil {
			t.Error(err)
		}
		files.Close()
	}
}

// consume takes n Ready values, checks every part against the file and
// releases them.
func consume(t *testing.T, ch chan expert.Ready, n int, layer int, lay fileLayout, data []byte) {
	t.Helper()
	for i := 0; i < n; i++ {
		select {
		case r := <-ch:
			if r.Err != nil {
				t.Fatal(r.Err)
			}
			for j, rg := range lay.ranges[layer][r.Expert] {
				if !bytes.Equal(r.Parts[j], data[rg.Off:rg.Off+rg.Len]) {
					t.Fatalf("layer %d expert %d part %d: wrong bytes", layer, r.Expert, j)
				}
			}
			r.Release()
		case <-time.After(hangGuard):
			t.Fatalf("no expert in %v (hang guard)", hangGuard)
		}
	}
}

func TestPlanHitsMissesAndBytes(t *testing.T) {
	p, _, lay, data, done := setup(t, 20)
	defer done()
	ctx := context.Background()
	plan := func(step, layer int, experts []int) {
		ch := make(chan expert.Ready, len(experts))
		if err := p.Plan(ctx, step, layer, experts, ch); err != nil {
			t.Fatal(err)
		}
		consume(t, ch, len(experts), layer, lay, data)
	}
	plan(1, 0, []int{3, 1, 4})
	if s := p.Stats(); s.Misses != 3 || s.Hits != 0 {
		t.Fatalf("first plan: %+v", s)
	}
	plan(2, 0, []int{1, 5, 3})
	if s := p.Stats(); s.Misses != 4 || s.Hits != 2 {
		t.Fatalf("second plan: %+v", s)
	}
}

func TestSpeculateWarmsTheCache(t *testing.T) {
	p, c, lay, data, done := setup(t, 20)
	defer done()
	ctx := context.Background()
	ch := make(chan expert.Ready, 2)
	// token 1 routes layer 1 to {2, 0}; the temporal policy predicts the same at token 2
	if err := p.Plan(ctx, 1, 1, []int{2, 0}, ch); err != nil {
		t.Fatal(err)
	}
	consume(t, ch, 2, 1, lay, data)
	// evict nothing (budget 20); speculate layer 2, which has no history: nothing
	p.Speculate(2, 2)
	if s := p.Stats(); s.Speculative != 0 {
		t.Fatalf("speculated without history: %+v", s)
	}
	ch = make(chan expert.Ready, 2)
	if err := p.Plan(ctx, 1, 2, []int{4, 5}, ch); err != nil {
		t.Fatal(err)
	}
	consume(t, ch, 2, 2, lay, data)
	// a small cache: make room by filling; then speculation for layer 2 reads 4 and 5 again only if evicted
	p.Speculate(3, 2)
	s := p.Stats()
	if s.Speculative+s.SpeculativeSkipped != 2 {
		t.Fatalf("want 2 predictions handled, got %+v", s)
	}
	if !c.Contains(cache.Key{Layer: 2, Expert: 4}) {
		t.Fatal("predicted expert not resident")
	}
}

func TestNextLayerGuess(t *testing.T) {
	n := &NextLayer{}
	n.SetGuess(3, []int{7, 1, 9})
	if g := n.Predict(0, 3, 2); len(g) != 2 || g[0] != 7 || g[1] != 1 {
		t.Fatalf("predict %v", g)
	}
	if g := n.Predict(0, 4, 2); g != nil {
		t.Fatalf("guess for another layer: %v", g)
	}
	if _, err := NewPolicy("nope", 2); err == nil {
		t.Fatal("unknown policy accepted")
	}
	pp, _ := NewPolicy("popular", 2)
	pp.Observe(0, 1, []int{3, 4})
	pp.Observe(1, 1, []int{4, 5})
	if g := pp.Predict(2, 1, 2); g[0] != 4 || g[1] != 3 {
		t.Fatalf("popular %v", g)
	}
}

// gatedFile serves reads from data once open is closed.
type gatedFile struct {
	data    []byte
	open    chan struct{}
	started chan struct{} // one value per read
}

func (g *gatedFile) ReadAt(p []byte, off int64) (int, error) {
	g.started <- struct{}{}
	<-g.open
	if off >= int64(len(g.data)) {
		return 0, io.EOF
	}
	n := copy(p, g.data[off:])
	if n < len(p) {
		return n, io.EOF
	}
	return n, nil
}
func (g *gatedFile) Close() error { return nil }

// TestSettleWithdrawsWrongGuesses: once a layer is routed, its speculative
// reads that were wrong and still queued are withdrawn (no read, the slot
// freed), and the right one still queued is promoted and served; every byte
// the FFN gets is the file's.
func TestSettleWithdrawsWrongGuesses(t *testing.T) {
	_, _, lay, data, done := setup(t, 20) // for the layout and the data
	done()
	g := &gatedFile{data: data, open: make(chan struct{}), started: make(chan struct{}, 64)}
	files, err := reader.Open([]string{"gated"}, reader.Options{NoODirect: true, Open: func(string, bool) (reader.File, error) { return g, nil }})
	if err != nil {
		t.Fatal(err)
	}
	defer files.Close()
	ctx := context.Background()
	lanes, err := reader.Start(ctx, files, reader.LaneOptions{Lanes: 1, Queue: 0})
	if err != nil {
		t.Fatal(err)
	}
	defer lanes.Close()
	pol, _ := cache.NewPolicy("lru", cache.PolicyOptions{})
	slot := cache.SlotSize(reader.SpanBytes(lay.ranges[0][0]) + reader.BlockSize)
	c, err := cache.New(cache.Config{BudgetBytes: 20 * slot, SlotBytes: slot, Policy: pol, TransientSlots: 4})
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	nl := &NextLayer{}
	p := New(c, lanes, lay, nl, 3)
	defer p.Close()

	ch0 := make(chan expert.Ready, 1)
	if err := p.Plan(ctx, 1, 0, []int{5}, ch0); err != nil { // occupies the only lane
		t.Fatal(err)
	}
	<-g.started
	nl.SetGuess(1, []int{0, 1, 2})
	p.Speculate(1, 1)
	p.Settle(1, []int{1, 4})
	for _, e := range []int{0, 2} {
		if c.Contains(cache.Key{Layer: 1, Expert: e}) {
			t.Errorf("withdrawn guess %d still in the cache", e)
		}
	}
	ch1 := make(chan expert.Ready, 2)
	if err := p.Plan(ctx, 1, 1, []int{1, 4}, ch1); err != nil {
		t.Fatal(err)
	}
	close(g.open)
	consume(t, ch0, 1, 0, lay, data)
	consume(t, ch1, 2, 1, lay, data)
	s := p.Stats()
	if s.Speculative != 3 || s.SpeculativeUsed != 1 || s.SpeculativeWithdrawn != 2 || s.SpeculativePromoted != 1 || s.Joins != 1 || s.Misses != 2 {
		t.Errorf("planner stats %+v", s)
	}
	if cs := c.Stats(); cs.Abandoned != 2 || cs.Failed != 0 {
		t.Errorf("cache stats: %d abandoned, %d failed; want 2, 0", cs.Abandoned, cs.Failed)
	}
	if ls := lanes.Stats(); ls.Reads != 3 {
		t.Errorf("%d reads served, want 3 (expert 5, expert 1 promoted, expert 4)", ls.Reads)
	}
}

// TestSpeculateSetAnyLane: a prompt pass's guessed set (anyLane) is read by
// every lane at once, whatever --prefetch-lanes (SpecLanes 1 here): the
// three guesses' nine range reads all start while none can finish.
func TestSpeculateSetAnyLane(t *testing.T) {
	_, _, lay, data, done := setup(t, 20) // for the layout and the data
	done()
	g := &gatedFile{data: data, open: make(chan struct{}), started: make(chan struct{}, 64)}
	files, err := reader.Open([]string{"gated"}, reader.Options{NoODirect: true, Open: func(string, bool) (reader.File, error) { return g, nil }})
	if err != nil {
		t.Fatal(err)
	}
	defer files.Close()
	lanes, err := reader.Start(context.Background(), files, reader.LaneOptions{Lanes: 3, SpecLanes: 1})
	if err != nil {
		t.Fatal(err)
	}
	defer lanes.Close()
	open := sync.OnceFunc(func() { close(g.open) })
	defer open() // before Close: a lane still in a gated read would keep it waiting
	pol, _ := cache.NewPolicy("lru", cache.PolicyOptions{})
	slot := cache.SlotSize(reader.SpanBytes(lay.ranges[0][0]) + reader.BlockSize)
	c, err := cache.New(cache.Config{BudgetBytes: 20 * slot, SlotBytes: slot, Policy: pol, TransientSlots: 4})
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	p := New(c, lanes, lay, nil, 0)
	defer p.Close()
	p.SpeculateSet(1, []int{0, 1, 2}, true)
	for i := range 9 {
		select {
		case <-g.started:
		case <-time.After(hangGuard):
			t.Fatalf("%d of the 3 guesses' 9 range reads started on 3 lanes (hang guard)", i)
		}
	}
	open()
	for e := range 3 {
		h, st, err := c.Acquire(context.Background(), cache.Key{Layer: 1, Expert: e}, reader.SpanBytes(lay.ranges[1][e]))
		if err != nil || st == cache.Miss {
			t.Fatalf("guess %d: %v, %v; want a hit or a join", e, st, err)
		}
		if err := h.Wait(context.Background()); err != nil {
			t.Fatal(err)
		}
		h.Release()
	}
	if s := p.Stats(); s.Speculative != 3 {
		t.Errorf("planner stats %+v, want 3 speculative reads", s)
	}
}
