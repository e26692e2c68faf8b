package prefetch

import (
	"context"
	"slices"
	"testing"
	"time"

	"github.com/pipe-engine/pipe/cache"
	"github.com/pipe-engine/pipe/expert"
	"github.com/pipe-engine/pipe/reader"
	"github.com/pipe-engine/pipe/warmstart"
)

// TestFillReadsEveryExpert: after a warm start of two keys, Fill with every
// other expert returns once they are all read — no waiting on the clock —
// and then every lookup of the model hits, with the right bytes; nothing
// was evicted and the resident bytes never exceeded the budget. The fill's
// reads are counted in FillStats (bytes: their cache spans), the warm
// start's in WarmStats.
func TestFillReadsEveryExpert(t *testing.T) {
	const layers, experts = 3, 6
	p, c, lay, data, w := warmSetup(t, layers*experts, nil)
	ctx := context.Background()
	hot := []warmstart.Key{{Layer: 1, Expert: 3}, {Layer: 0, Expert: 5}}
	if _, err := p.Warm(ctx, hot, 2); err != nil {
		t.Fatal(err)
	}
	waitWarm(t, p, w, func(ws warmstart.Stats) bool { return ws.Completed == 2 })
	var rest []warmstart.Key
	var bytes int64
	for _, k := range allKeys(layers, experts) {
		if !slices.Contains(hot, k) {
			rest = append(rest, k)
			bytes += reader.SpanBytes(lay.ranges[k.Layer][k.Expert])
		}
	}
	st, err := p.Fill(ctx, rest, 3)
	if err != nil {
		t.Fatal(err)
	}
	if n := int64(len(rest)); st.Issued != n || st.Completed != n || st.Full || st.Bytes != bytes {
		t.Fatalf("fill stats %+v: want %d reads of %d bytes in all completed, not full", st, n, bytes)
	}
	for l := range layers {
		ch := make(chan expert.Ready, experts)
		if err := p.Plan(ctx, 1, l, []int{0, 1, 2, 3, 4, 5}, ch); err != nil {
			t.Fatal(err)
		}
		consume(t, ch, experts, l, lay, data)
	}
	ps, cs := p.Stats(), c.Stats()
	if ps.Hits != layers*experts || ps.Misses != 0 || ps.Joins != 0 {
		t.Errorf("planner %+v: want every lookup a hit after the fill", ps)
	}
	if cs.Evictions != 0 || cs.PeakResidentBytes > cs.BudgetBytes || cs.ResidentEntries != layers*experts {
		t.Errorf("cache %+v: want every expert resident, none evicted, within the budget", cs)
	}
	if fs, ws := p.FillStats(), p.WarmStats(); fs.Used != int64(len(rest)) || ws.Used != 2 {
		t.Errorf("used: fill %d, warm %d; want %d, 2", fs.Used, ws.Used, len(rest))
	}
}

// TestFillStopsWithoutEviction: with one slot fewer than the experts, Fill
// stops at the first key without a free slot (Full) and evicts nothing; the
// resident bytes stay within the budget.
func TestFillStopsWithoutEviction(t *testing.T) {
	const layers, experts = 3, 6
	p, c, _, _, _ := warmSetup(t, layers*experts-1, nil)
	st, err := p.Fill(context.Background(), allKeys(layers, experts), 3)
	if err != nil {
		t.Fatal(err)
	}
	if !st.Full || st.Completed != layers*experts-1 {
		t.Errorf("fill stats %+v: want every free slot read, then full", st)
	}
	if cs := c.Stats(); cs.Evictions != 0 || cs.PeakResidentBytes > cs.BudgetBytes {
		t.Errorf("cache %+v: a fill must not evict nor exceed the budget", cs)
	}
}

// TestFillBehindDemandAndPrefetch: with fill reads queued behind the one a
// lane has started, a layer's demand reads are read next, then the
// pipeline's speculative reads, and only then the rest of the fill: a fill
// read never holds a routed or prefetched read in a queue.
func TestFillBehindDemandAndPrefetch(t *testing.T) {
	readsBehind(t, "fill", func(ctx context.Context, p *Planner) error {
		_, err := p.Fill(ctx, allKeys(2, 6), 4) // layers 0 and 1
		return err
	})
}

// readsBehind checks that the reads start offers (of layers 0 and 1) wait
// behind a layer-2 demand and the guesses that follow it, all queued while
// a lane holds start's first read: the disk holds that read until both
// are queued, so the order is exact.
func readsBehind(t *testing.T, what string, start func(context.Context, *Planner) error) {
	t.Helper()
	disk := newHeldReads(true)
	p, _, lay, data, _ := warmSetup(t, 18, disk.hook)
	ctx := context.Background()
	done := make(chan error, 1)
	go func() { done <- start(ctx, p) }()
	disk.waitStarted(t) // a lane has started the first read; the rest queue
	demand := []int{5, 4}
	ch := make(chan expert.Ready, len(demand))
	if err := p.Plan(ctx, 1, 2, demand, ch); err != nil {
		t.Fatal(err)
	}
	p.SpeculateSet(2, []int{0, 1}, true)
	disk.let()
	consume(t, ch, len(demand), 2, lay, data)
	select {
	case err := <-done:
		if err != nil {
			t.Fatal(err)
		}
	case <-time.After(hangGuard):
		t.Fatalf("the %s did not return in %v", what, hangGuard)
	}
	order := readOrder(t, lay, disk.offsets())
	if len(order) < 5 || order[0].Layer == 2 {
		t.Fatalf("reads began in the order %v: want a %s read first", order, what)
	}
	want := []cache.Key{{Layer: 2, Expert: 5}, {Layer: 2, Expert: 4}, {Layer: 2, Expert: 0}, {Layer: 2, Expert: 1}}
	if !slices.Equal(order[1:5], want) {
		t.Errorf("reads after the first %s read: %v, want the demand then the guesses %v", what, order[1:5], want)
	}
	for _, k := range order[5:] {
		if k.Layer == 2 {
			t.Errorf("a layer-2 read %v came after %s reads: %v", k, what, order)
		}
	}
}

// TestFillCancel: ending the fill's context makes Fill return while a read
// it offered is still held on the disk — it does not wait for it — and the
// reads no lane had started are withdrawn, their slots free again.
func TestFillCancel(t *testing.T) {
	disk := newHeldReads(true)
	p, c, _, _, w := warmSetup(t, 18, disk.hook)
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan warmstart.Stats, 1)
	go func() {
		st, _ := p.Fill(ctx, allKeys(3, 6), 6)
		done <- st
	}()
	disk.waitStarted(t)
	waitStats(t, p.FillStats, w, func(s warmstart.Stats) bool { return s.Issued >= 2 })
	cancel()
	select {
	case <-done:
	case <-time.After(hangGuard):
		t.Fatalf("Fill did not return in %v after its context ended", hangGuard)
	}
	disk.let()
	st := waitStats(t, p.FillStats, w, func(s warmstart.Stats) bool { return s.Completed+s.Withdrawn == s.Issued })
	if st.Withdrawn == 0 || st.Completed != 1 {
		t.Errorf("fill stats %+v: want the started read completed and the queued ones withdrawn", st)
	}
	if cs := c.Stats(); cs.ResidentEntries != int(st.Completed) || cs.Evictions != 0 {
		t.Errorf("cache %+v: %d completed reads should be resident", cs, st.Completed)
	}
}

// waitStats is waitWarm for any of the planner's warmstart.Stats (get).
func waitStats(t *testing.T, get func() warmstart.Stats, changed <-chan struct{}, ok func(warmstart.Stats) bool) warmstart.Stats {
	t.Helper()
	guard := time.After(hangGuard)
	for {
		s := get()
		if ok(s) {
			return s
		}
		select {
		case <-changed:
		case <-guard:
			t.Fatalf("reads never got there in %v: %+v", hangGuard, s)
		}
	}
}
