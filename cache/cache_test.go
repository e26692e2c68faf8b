package cache

import (
	"context"
	"encoding/binary"
	"errors"
	"fmt"
	"math"
	"math/rand/v2"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"
	"unsafe"

	"go.uber.org/goleak"
)

func TestMain(m *testing.M) { goleak.VerifyTestMain(m) }

const slot = 2 * SlotAlign

// recPolicy wraps a Policy and records the calls the cache makes.
type recPolicy struct {
	Policy
	log []string
}

func (r *recPolicy) Batch(step, layer int) {
	r.log = append(r.log, fmt.Sprintf("batch %d/%d", step, layer))
	r.Policy.Batch(step, layer)
}
func (r *recPolicy) OnHit(k Key) { r.log = append(r.log, "hit "+k.String()); r.Policy.OnHit(k) }
func (r *recPolicy) OnAdmit(k Key, b int64) {
	r.log = append(r.log, fmt.Sprintf("admit %v %d", k, b))
	r.Policy.OnAdmit(k, b)
}
func (r *recPolicy) OnEvict(k Key) { r.log = append(r.log, "evict "+k.String()); r.Policy.OnEvict(k) }

func lru(t testing.TB) Policy {
	p, err := NewPolicy("lru", PolicyOptions{})
	if err != nil {
		t.Fatal(err)
	}
	return p
}

func newCache(t testing.TB, slots, transient int) (*Cache, *recPolicy) {
	t.Helper()
	rp := &recPolicy{Policy: lru(t)}
	c, err := New(Config{BudgetBytes: int64(slots)*slot + slot/2, SlotBytes: slot, Policy: rp, TransientSlots: transient})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		if err := c.Close(); err != nil {
			t.Errorf("Close: %v", err)
		}
	})
	return c, rp
}

// fill writes a pattern derived from k into b.
func fill(b []byte, k Key) {
	for i := 0; i+8 <= len(b); i += 8 {
		binary.LittleEndian.PutUint64(b[i:], uint64(k.Layer)<<40|uint64(k.Expert)<<20|uint64(i))
	}
}

func checkFill(b []byte, k Key) bool {
	for i := 0; i+8 <= len(b); i += 8 {
		if binary.LittleEndian.Uint64(b[i:]) != uint64(k.Layer)<<40|uint64(k.Expert)<<20|uint64(i) {
			return false
		}
	}
	return true
}

// get acquires k, fills it on a miss, waits for it and returns the handle.
func get(t testing.TB, c *Cache, k Key) (*Handle, Status) {
	t.Helper()
	h, st, err := c.Acquire(context.Background(), k, slot)
	if err != nil {
		t.Fatalf("Acquire(%v): %v", k, err)
	}
	if st == Miss {
		fill(h.Buf(), k)
		h.Complete(nil)
	}
	if err := h.Wait(context.Background()); err != nil {
		t.Fatalf("%v: %v", k, err)
	}
	if !checkFill(h.Buf(), k) {
		t.Fatalf("%v: slot holds wrong bytes", k)
	}
	return h, st
}

func use(t testing.TB, c *Cache, k Key) Status {
	h, st := get(t, c, k)
	h.Release()
	return st
}

func TestNewErrors(t *testing.T) {
	for _, cfg := range []Config{
		{BudgetBytes: 1 << 20, SlotBytes: 0, Policy: lru(t)},
		{BudgetBytes: 1 << 20, SlotBytes: 5000, Policy: lru(t)},
		{BudgetBytes: -1, SlotBytes: slot, Policy: lru(t)},
		{BudgetBytes: 1 << 20, SlotBytes: slot},
	} {
		if _, err := New(cfg); !errors.Is(err, ErrConfig) {
			t.Errorf("New(%+v): %v, want ErrConfig", cfg, err)
		}
	}
}

func TestHitMissStats(t *testing.T) {
	c, rp := newCache(t, 3, 2)
	a, b := Key{0, 1}, Key{0, 2}
	c.Batch(0, 0)
	if st := use(t, c, a); st != Miss {
		t.Fatalf("first use: %v", st)
	}
	if st := use(t, c, a); st != Hit {
		t.Fatalf("second use: %v", st)
	}
	c.Batch(0, 1)
	use(t, c, a)
	use(t, c, b)
	if !c.Contains(a) || !c.Contains(b) || c.Contains(Key{9, 9}) {
		t.Error("Contains disagrees")
	}
	h, _, err := c.Acquire(context.Background(), Key{1, 1}, slot+1)
	if !errors.Is(err, ErrSize) || h != nil {
		t.Errorf("oversized Acquire: %v", err)
	}
	s := c.Stats()
	want := Stats{Hits: 2, Misses: 2, BytesAdmitted: 2 * slot, ResidentBytes: 2 * slot, PeakResidentBytes: 2 * slot,
		ResidentEntries: 2, BudgetBytes: 3*slot + slot/2, SlotBytes: slot, Slots: 3, TransientSlots: 2}
	s.Mgmt = 0
	if s != want {
		t.Errorf("stats\n got %+v\nwant %+v", s, want)
	}
	if r, ok := s.Lookups().HitPct(); !ok || r != 50 {
		t.Errorf("hit rate = %v, %v; want 50", r, ok)
	}
	// OnHit once per key per batch, OnAdmit on the miss.
	wantLog := "batch 0/0|admit L0/E1 8192|batch 0/1|hit L0/E1|admit L0/E2 8192"
	if got := strings.Join(rp.log, "|"); got != wantLog {
		t.Errorf("policy calls\n got %s\nwant %s", got, wantLog)
	}
}

func TestEvictionFollowsPolicy(t *testing.T) {
	c, rp := newCache(t, 3, 1)
	step := 0
	batch := func(keys ...int) {
		c.Batch(step, 0)
		step++
		for _, e := range keys {
			use(t, c, Key{0, e})
		}
	}
	batch(1, 2, 3) // resident 1 2 3
	batch(1)       // LRU order: 2 3 1
	batch(4)       // evicts 2
	if c.Contains(Key{0, 2}) || !c.Contains(Key{0, 1}) || !c.Contains(Key{0, 3}) || !c.Contains(Key{0, 4}) {
		t.Fatalf("after evicting: %v", rp.log)
	}
	batch(5, 6) // evicts 3 then 1
	for e, want := range map[int]bool{1: false, 3: false, 4: true, 5: true, 6: true} {
		if c.Contains(Key{0, e}) != want {
			t.Errorf("expert %d resident = %v, want %v", e, !want, want)
		}
	}
	var ev []string
	for _, l := range rp.log {
		if strings.HasPrefix(l, "evict") {
			ev = append(ev, l)
		}
	}
	if got := strings.Join(ev, ","); got != "evict L0/E2,evict L0/E3,evict L0/E1" {
		t.Errorf("evictions %s", got)
	}
	if s := c.Stats(); s.Evictions != 3 || s.ResidentBytes != 3*slot || s.Transient != 0 {
		t.Errorf("stats %+v", s)
	}
}

// Pinned entries and entries used in the current batch are never evicted;
// the miss is served by a transient slot, which is never cached.
func TestPinningAndTransient(t *testing.T) {
	c, _ := newCache(t, 2, 1)
	c.Batch(0, 0)
	ha, _ := get(t, c, Key{0, 1}) // pinned
	use(t, c, Key{0, 2})          // unpinned but touched in this batch
	h3, st := get(t, c, Key{0, 3})
	if st != Miss || !h3.Transient() {
		t.Fatalf("third key: %v transient=%v", st, h3.Transient())
	}
	if !c.Contains(Key{0, 1}) || !c.Contains(Key{0, 2}) || c.Contains(Key{0, 3}) {
		t.Fatal("a pinned or batch-touched entry was evicted, or a transient one cached")
	}
	// Transient pool exhausted: the next miss waits until ctx ends (ctx is
	// cancelled once the Acquire waits on it).
	ctx := waitingCtx()
	if _, _, err := c.Acquire(ctx, Key{0, 4}, slot); !errors.Is(err, context.Canceled) {
		t.Fatalf("Acquire with no slot: %v", err)
	}
	// A new batch makes expert 2 evictable: a waiting Acquire gets its slot.
	got := make(chan Status, 1)
	go func() {
		h, st, err := c.Acquire(context.Background(), Key{0, 4}, slot)
		if err != nil {
			t.Error(err)
			got <- Miss
			return
		}
		fill(h.Buf(), Key{0, 4})
		h.Complete(nil)
		h.Release()
		got <- st
	}()
	waitStats(t, c, func(s Stats) bool { return s.Waits == 2 }) // it waits for a slot
	c.Batch(0, 1)
	if st := <-got; st != Miss {
		t.Fatalf("waiting Acquire: %v", st)
	}
	if c.Contains(Key{0, 2}) || !c.Contains(Key{0, 4}) || !c.Contains(Key{0, 1}) {
		t.Fatal("wrong victim")
	}
	h3.Release()
	ha.Release()
	if c.Contains(Key{0, 3}) {
		t.Fatal("transient entry cached")
	}
	if st := use(t, c, Key{0, 3}); st != Miss {
		t.Fatalf("transient key looked up again: %v", st)
	}
	s := c.Stats()
	if s.Transient != 1 || s.Waits != 2 || s.ResidentBytes != 2*slot || s.PeakResidentBytes != 2*slot {
		t.Errorf("stats %+v", s)
	}
}

// waitStats polls c's statistics until ok holds; it fails the test after a
// minute (a hang guard, no timing claim).
func waitStats(t *testing.T, c *Cache, ok func(Stats) bool) {
	t.Helper()
	for deadline := time.Now().Add(time.Minute); !ok(c.Stats()); time.Sleep(time.Millisecond) {
		if time.Now().After(deadline) {
			t.Fatalf("stats %+v: not there after a minute", c.Stats())
		}
	}
}

func TestBudgetZero(t *testing.T) {
	c, rp := newCache(t, 0, 2)
	for i := range 3 {
		c.Batch(i, 0)
		if st := use(t, c, Key{0, 1}); st != Miss {
			t.Fatalf("round %d: %v", i, st)
		}
	}
	s := c.Stats()
	if s.Misses != 3 || s.Transient != 3 || s.PeakResidentBytes != 0 || s.Slots != 0 {
		t.Errorf("stats %+v", s)
	}
	for _, l := range rp.log {
		if !strings.HasPrefix(l, "batch") {
			t.Errorf("policy saw %q with budget 0", l)
		}
	}
}

func TestSingleFlight(t *testing.T) {
	c, _ := newCache(t, 4, 1)
	const n = 16
	k := Key{2, 7}
	var misses, inflight, hits, in atomic.Int32
	var wg sync.WaitGroup
	start, allIn := make(chan struct{}), make(chan struct{})
	for range n {
		wg.Go(func() {
			<-start
			h, st, err := c.Acquire(context.Background(), k, slot)
			if in.Add(1) == n {
				close(allIn)
			}
			if err != nil {
				t.Error(err)
				return
			}
			defer h.Release()
			switch st {
			case Miss:
				misses.Add(1)
				<-allIn // a read slow enough that every other lookup joins it
				fill(h.Buf(), k)
				h.Complete(nil)
			case InFlight:
				inflight.Add(1)
			case Hit:
				hits.Add(1)
			}
			<-h.Ready()
			if h.Err() != nil || !checkFill(h.Buf(), k) {
				t.Errorf("%v: err %v or wrong bytes", st, h.Err())
			}
		})
	}
	close(start)
	wg.Wait()
	if misses.Load() != 1 || inflight.Load() != n-1 || hits.Load() != 0 {
		t.Errorf("misses %d in-flight %d hits %d", misses.Load(), inflight.Load(), hits.Load())
	}
	if s := c.Stats(); s.Misses != 1 || s.Joins != int64(inflight.Load()) {
		t.Errorf("stats %+v", s)
	}
}

func TestFailedAndAbandonedReads(t *testing.T) {
	boom := errors.New("EIO at offset 123")
	for _, tc := range []struct {
		name string
		end  func(h *Handle)
		want error
	}{
		{"failed", func(h *Handle) { h.Complete(boom); h.Release() }, boom},
		{"abandoned", func(h *Handle) { h.Release() }, ErrAbandoned},
	} {
		t.Run(tc.name, func(t *testing.T) {
			c, rp := newCache(t, 2, 1)
			k := Key{1, 1}
			h, st, err := c.Acquire(context.Background(), k, slot)
			if err != nil || st != Miss {
				t.Fatalf("%v %v", st, err)
			}
			w, st, err := c.Acquire(context.Background(), k, slot)
			if err != nil || st != InFlight {
				t.Fatalf("%v %v", st, err)
			}
			tc.end(h)
			if err := w.Wait(context.Background()); !errors.Is(err, tc.want) {
				t.Errorf("waiter sees %v, want %v", err, tc.want)
			}
			if c.Contains(k) {
				t.Error("failed entry resident")
			}
			if s := c.Stats(); s.ResidentBytes != slot {
				t.Errorf("slot of the failed read freed while a waiter pins it: %+v", s)
			}
			w.Release()
			if s := c.Stats(); s.ResidentBytes != 0 {
				t.Errorf("slot not freed: %+v", s)
			}
			if st := use(t, c, k); st != Miss {
				t.Errorf("after a failed read: %v, want a new Miss", st)
			}
			c.Batch(0, 0)
			use(t, c, Key{5, 5})
			use(t, c, Key{5, 6}) // evicts k
			if n := strings.Count(strings.Join(rp.log, "|"), "evict L1/E1"); n != 2 {
				t.Errorf("OnEvict for L1/E1 %d times, want 2 (failure, eviction): %v", n, rp.log)
			}
			wantFailed, wantAbandoned := int64(1), int64(0)
			if errors.Is(tc.want, ErrAbandoned) {
				wantFailed, wantAbandoned = 0, 1
			}
			if s := c.Stats(); s.Failed != wantFailed || s.Abandoned != wantAbandoned || s.Evictions != 1 {
				t.Errorf("stats %+v, want %d failed, %d abandoned", s, wantFailed, wantAbandoned)
			}
		})
	}
}

func TestCloseLifecycle(t *testing.T) {
	c, err := New(Config{BudgetBytes: 4 * slot, SlotBytes: slot, Policy: lru(t)})
	if err != nil {
		t.Fatal(err)
	}
	h, _ := get(t, c, Key{0, 0})
	if err := c.Close(); !errors.Is(err, ErrBusy) {
		t.Fatalf("Close with a pinned handle: %v", err)
	}
	h.Release()
	h.Release() // extra Release ignored
	if err := c.Close(); err != nil {
		t.Fatal(err)
	}
	if err := c.Close(); err != nil {
		t.Fatal(err)
	}
	if _, _, err := c.Acquire(context.Background(), Key{0, 0}, slot); !errors.Is(err, ErrClosed) {
		t.Errorf("Acquire after Close: %v", err)
	}
}

func TestSlotsAligned(t *testing.T) {
	c, _ := newCache(t, 3, 2)
	var hs []*Handle
	for e := range 5 {
		h, _ := get(t, c, Key{0, e})
		if uintptr(unsafe.Pointer(&h.Buf()[0]))%SlotAlign != 0 || len(h.Buf()) != slot || cap(h.Buf()) != slot {
			t.Errorf("slot %d: misaligned or wrong size", e)
		}
		hs = append(hs, h)
	}
	for _, h := range hs {
		h.Release()
	}
}

// TestConcurrentBudget hammers the cache from many goroutines with random
// keys, sizes and hold times: resident bytes never exceed the budget, every
// reader sees its own key's bytes (a slot is never reused while pinned), and
// the counters add up. Run with -race.
func TestConcurrentBudget(t *testing.T) {
	const slots, workers = 5, 8
	c, err := New(Config{BudgetBytes: slots*slot + 100, SlotBytes: slot, Policy: lru(t), TransientSlots: 3})
	if err != nil {
		t.Fatal(err)
	}
	defer func() {
		if err := c.Close(); err != nil {
			t.Error(err)
		}
	}()
	iters := 400
	if testing.Short() {
		iters = 100
	}
	var lookups atomic.Int64
	var wg sync.WaitGroup
	for w := range workers {
		wg.Go(func() {
			rng := rand.New(rand.NewPCG(uint64(w), 3))
			for i := range iters {
				if rng.IntN(16) == 0 {
					c.Batch(i, w)
				}
				k := Key{rng.IntN(3), rng.IntN(6)}
				h, st, err := c.Acquire(context.Background(), k, slot)
				if err != nil {
					t.Error(err)
					return
				}
				lookups.Add(1)
				if st == Miss {
					if rng.IntN(20) == 0 {
						h.Complete(errors.New("injected"))
						h.Release()
						continue
					}
					fill(h.Buf(), k)
					h.Complete(nil)
				}
				if err := h.Wait(context.Background()); err == nil {
					if !checkFill(h.Buf(), k) {
						t.Errorf("%v (%v): slot overwritten while pinned", k, st)
					}
				}
				if s := c.Stats(); s.ResidentBytes > s.BudgetBytes {
					t.Errorf("resident %d > budget %d", s.ResidentBytes, s.BudgetBytes)
				}
				if rng.IntN(4) == 0 {
					time.Sleep(time.Duration(rng.IntN(100)) * time.Microsecond)
				}
				h.Release()
			}
		})
	}
	wg.Wait()
	s := c.Stats()
	if s.PeakResidentBytes > s.BudgetBytes || s.PeakResidentBytes != slots*slot {
		t.Errorf("peak resident %d, budget %d", s.PeakResidentBytes, s.BudgetBytes)
	}
	if s.Hits+s.Joins+s.Misses != lookups.Load() {
		t.Errorf("hits %d + joins %d + misses %d != lookups %d", s.Hits, s.Joins, s.Misses, lookups.Load())
	}
	t.Logf("%+v", s)
}

func BenchmarkAcquireRelease(b *testing.B) {
	c, err := New(Config{BudgetBytes: 64 * slot, SlotBytes: slot, Policy: lru(b)})
	if err != nil {
		b.Fatal(err)
	}
	defer c.Close()
	rng := rand.New(rand.NewPCG(1, 2))
	ctx := context.Background()
	b.ReportAllocs()
	for i := 0; b.Loop(); i++ {
		if i%8 == 0 {
			c.Batch(i, 0)
		}
		h, st, err := c.Acquire(ctx, Key{rng.IntN(4), rng.IntN(32)}, slot)
		if err != nil {
			b.Fatal(err)
		}
		if st == Miss {
			h.Complete(nil)
		}
		h.Release()
	}
	b.ReportMetric(float64(c.Stats().Mgmt.Nanoseconds())/float64(b.N), "mgmt-ns/op")
}

func TestPrefetch(t *testing.T) {
	c, rp := newCache(t, 2, 1)
	c.Batch(0, 0)
	k := Key{1, 4}
	h, ok, err := c.Prefetch(k, slot)
	if err != nil || !ok {
		t.Fatalf("Prefetch into an empty cache: %v %v", ok, err)
	}
	if _, ok, _ := c.Prefetch(k, slot); ok {
		t.Error("second Prefetch of a key in flight started a read")
	}
	w, st, err := c.Acquire(context.Background(), k, slot)
	if err != nil || st != InFlight {
		t.Fatalf("demand during the prefetch read: %v %v", st, err)
	}
	fill(h.Buf(), k)
	h.Complete(nil)
	h.Release()
	if err := w.Wait(context.Background()); err != nil || !checkFill(w.Buf(), k) {
		t.Fatalf("joined prefetch: %v", err)
	}
	w.Release()
	if st := use(t, c, k); st != Hit {
		t.Errorf("after the prefetch: %v", st)
	}
	// The other slot is filled and pinned; the prefetched key was touched in
	// this batch: nothing is free or evictable, and Prefetch never uses a
	// transient slot nor waits.
	hp, _ := get(t, c, Key{0, 0})
	if _, ok, err := c.Prefetch(Key{2, 2}, slot); ok || err != nil {
		t.Errorf("Prefetch with no free slot: %v %v", ok, err)
	}
	hp.Release()
	if _, _, err := c.Prefetch(k, slot+1); !errors.Is(err, ErrSize) {
		t.Errorf("oversized prefetch: %v", err)
	}
	s := c.Stats()
	if s.Prefetches != 1 || s.Misses != 1 || s.Joins != 1 || s.Hits != 1 || s.Transient != 0 {
		t.Errorf("stats %+v", s)
	}
	// The join waited for the prefetch's read: it is not a hit (one hit of
	// three lookups), as in the CSV and /metrics.
	if pct, ok := s.Lookups().HitPct(); !ok || math.Abs(pct-100.0/3) > 1e-9 {
		t.Errorf("hit rate %v %%, want 33.3 (a join is not a hit)", pct)
	}
	if got := strings.Join(rp.log, "|"); got != "batch 0/0|admit L1/E4 8192|admit L0/E0 8192" {
		t.Errorf("policy calls %s", got)
	}
}

// TestHitAllocatesNothing: a hit reuses a released handle, and a reissued
// handle pins its own entry.
func TestHitAllocatesNothing(t *testing.T) {
	c, err := New(Config{BudgetBytes: 4 * slot, SlotBytes: slot, Policy: lru(t)})
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	for _, k := range []Key{{0, 0}, {0, 1}} {
		h, _ := get(t, c, k)
		h.Complete(nil)
		h.Release()
	}
	ctx := context.Background()
	hit := func() {
		h, st, err := c.Acquire(ctx, Key{0, 0}, slot)
		if err != nil || st != Hit {
			t.Fatalf("Acquire: %v %v", st, err)
		}
		h.Release()
	}
	hit()
	if n := testing.AllocsPerRun(100, hit); n != 0 {
		t.Errorf("%.1f allocations per hit", n)
	}
	a, _, _ := c.Acquire(ctx, Key{0, 0}, slot)
	a.Release()
	b, _, _ := c.Acquire(ctx, Key{0, 1}, slot)
	if b.Key() != (Key{0, 1}) {
		t.Fatalf("reissued handle names %v", b.Key())
	}
	b.Release()
	if st := c.Stats(); st.Hits < 100 {
		t.Errorf("hits %d", st.Hits)
	}
}

// warmIn reads k into the cache as a warm start does.
func warmIn(t *testing.T, c *Cache, k Key) {
	t.Helper()
	h, st, err := c.Warm(k, slot)
	if err != nil || st != WarmStarted {
		t.Fatalf("Warm(%v): %v %v", k, st, err)
	}
	fill(h.Buf(), k)
	h.Complete(nil)
	h.Release()
}

// TestWarmEntriesSparedUntilTheirLayer: a warm-started expert of a layer
// ahead is not the victim of a miss while another entry can go (LRU alone
// would evict it: it is the oldest), keeps its bytes until its layer's
// lookup hits it, and becomes an ordinary entry once the pipeline has passed
// its layer; when every eligible entry is protected a miss still gets a slot
// at once.
func TestWarmEntriesSparedUntilTheirLayer(t *testing.T) {
	c, _ := newCache(t, 3, 1)
	warmIn(t, c, Key{2, 0})
	warmIn(t, c, Key{2, 1})
	c.Batch(0, 0)
	h, st := get(t, c, Key{0, 0}) // the free slot
	h.Release()
	c.Batch(0, 1)
	h, st = get(t, c, Key{1, 0}) // evicts L0/E0, not the older warm L2/E0
	h.Release()
	if st != Miss || c.Contains(Key{0, 0}) || !c.Contains(Key{2, 0}) || !c.Contains(Key{2, 1}) {
		t.Fatalf("after the layer-1 miss: L0/E0 %v L2/E0 %v L2/E1 %v; want the warm entries kept", c.Contains(Key{0, 0}), c.Contains(Key{2, 0}), c.Contains(Key{2, 1}))
	}
	c.Batch(0, 2)
	h, st = get(t, c, Key{2, 0})
	if st != Hit || !checkFill(h.Buf(), Key{2, 0}) {
		t.Fatalf("L2/E0 in its layer: %v (bytes ok %v), want a hit", st, checkFill(h.Buf(), Key{2, 0}))
	}
	h.Release()
	c.Batch(1, 0) // layer 2 passed: L2/E1 (never used) is ordinary now, and the LRU victim
	h, _ = get(t, c, Key{0, 5})
	h.Release()
	if c.Contains(Key{2, 1}) {
		t.Error("an unused warm entry stayed protected after its layer was passed")
	}

	// every eligible entry protected: the miss still evicts one at once
	c2, _ := newCache(t, 2, 0)
	warmIn(t, c2, Key{3, 0})
	warmIn(t, c2, Key{3, 1})
	c2.Batch(0, 0)
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute) // hang guard: it must not wait
	defer cancel()
	h, st, err := c2.Acquire(ctx, Key{0, 0}, slot)
	if err != nil || st != Miss {
		t.Fatalf("miss with only protected entries: %v %v", st, err)
	}
	h.Complete(nil)
	h.Release()
	if cs := c2.Stats(); cs.Evictions != 1 || cs.Waits != 0 {
		t.Errorf("stats %+v: want one eviction and no wait", cs)
	}

	// a speculative read evicts nothing while a warm entry is protected
	c3, _ := newCache(t, 3, 0)
	warmIn(t, c3, Key{3, 0})
	warmIn(t, c3, Key{3, 1})
	c3.Batch(0, 0)
	h, _ = get(t, c3, Key{0, 0}) // an ordinary entry, evictable once released
	h.Release()
	c3.Batch(0, 1)
	if h, ok, err := c3.Prefetch(Key{1, 0}, slot); err != nil || ok {
		if ok {
			h.Release()
		}
		t.Fatalf("Prefetch while warm entries are protected: ok %v err %v, want no slot", ok, err)
	}
	if !c3.Contains(Key{0, 0}) {
		t.Fatal("a Prefetch evicted while warm entries were protected")
	}
	c3.Batch(0, 3)
	c3.Batch(0, 4) // layer 3 passed: its entries are ordinary
	h, ok, err := c3.Prefetch(Key{5, 0}, slot)
	if err != nil || !ok {
		t.Fatalf("Prefetch once the warm layer was passed: ok %v err %v", ok, err)
	}
	h.Complete(nil)
	h.Release()
	if cs := c3.Stats(); cs.Evictions != 1 || !c3.Contains(Key{5, 0}) {
		t.Errorf("stats %+v: want the guess in an evicted entry's slot", cs)
	}
}

// waitingCtx is a context cancelled as soon as a waiter asks for its Done
// channel: a call that must block until its context ends returns when it
// blocks, without a timeout to pick.
func waitingCtx() context.Context {
	ctx, cancel := context.WithCancel(context.Background())
	return &cancelOnWait{Context: ctx, cancel: cancel}
}

type cancelOnWait struct {
	context.Context
	cancel context.CancelFunc
}

func (c *cancelOnWait) Done() <-chan struct{} {
	c.cancel()
	return c.Context.Done()
}
