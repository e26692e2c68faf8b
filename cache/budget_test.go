package cache

import (
	"context"
	"errors"
	"os"
	"path/filepath"
	"runtime"
	"strings"
	"sync/atomic"
	"testing"
	"time"
)

// fakeRoots builds a fake /proc and cgroup tree from path → content.
func fakeRoots(t *testing.T, files map[string]string) (proc, cg string) {
	t.Helper()
	root := t.TempDir()
	for p, content := range files {
		full := filepath.Join(root, filepath.FromSlash(p))
		if err := os.MkdirAll(filepath.Dir(full), 0o755); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(full, []byte(content), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	return filepath.Join(root, "proc"), filepath.Join(root, "cg")
}

const meminfo = "MemTotal:       24683548 kB\nMemFree:        20000000 kB\nMemAvailable:   16777216 kB\nCached:          1000000 kB\n" // 16 GiB available

// autoBudgetCase is a machine's memory files (fakeRoots) and the budget,
// source and explanation AutoBudget gives with TestAutoBudget's options
// changed by opts.
type autoBudgetCase struct {
	name    string
	files   map[string]string
	opts    func(o *AutoOptions)
	budget  int64
	source  string
	explain []string
}

const gib = 1 << 30

var autoBudgetCases = []autoBudgetCase{
	{
		name: "v1 limit",
		files: map[string]string{
			"proc/meminfo":                                    meminfo,
			"proc/self/cgroup":                                "12:cpu,cpuacct:/x\n4:memory:/process_api/abc\n0::/\n",
			"cg/memory/memory.limit_in_bytes":                 "9223372036854771712\n",
			"cg/memory/process_api/abc/memory.limit_in_bytes": "8589934592\n", // 8 GiB
			"cg/memory/process_api/abc/memory.usage_in_bytes": "1610612736\n", // 1.5 GiB, 1 GiB of it inactive file
			"cg/memory/process_api/abc/memory.stat":           "cache 1073741824\ntotal_inactive_file 1073741824\n",
			"cg/memory/process_api/memory.limit_in_bytes":     "9223372036854771712\n",
		},
		budget:  8*gib - 512*mib - 1*gib - 256*mib - 512*mib,
		source:  "cgroup v1",
		explain: []string{"cgroup v1 limit 8192 MiB - used 512 MiB", "dense 1024 MiB", "KV 256 MiB", "floor 512 MiB"},
	},
	{
		name: "v1 ancestor is tighter",
		files: map[string]string{
			"proc/meminfo":                        meminfo,
			"proc/self/cgroup":                    "4:memory:/a/b\n",
			"cg/memory/a/b/memory.limit_in_bytes": "8589934592\n",
			"cg/memory/a/memory.limit_in_bytes":   "4294967296\n",
			"cg/memory/a/memory.usage_in_bytes":   "0\n",
		},
		budget: 4*gib - 1*gib - 256*mib - 512*mib,
		source: "cgroup v1",
	},
	{
		name: "v1 namespaced path falls back to the mount root",
		files: map[string]string{
			"proc/meminfo":                    meminfo,
			"proc/self/cgroup":                "4:memory:/docker/123\n",
			"cg/memory/memory.limit_in_bytes": "4294967296\n",
			"cg/memory/memory.usage_in_bytes": "0\n",
		},
		budget: 4*gib - 1*gib - 256*mib - 512*mib,
		source: "cgroup v1",
	},
	{
		name: "v1 unlimited uses MemAvailable",
		files: map[string]string{
			"proc/meminfo":                    meminfo,
			"proc/self/cgroup":                "4:memory:/\n",
			"cg/memory/memory.limit_in_bytes": "9223372036854771712\n",
		},
		budget:  16*gib - 1*gib - 256*mib - 512*mib,
		source:  "MemAvailable",
		explain: []string{"no cgroup limit; MemAvailable 16384 MiB"},
	},
	{
		name: "v2 limit, ceiling and slots",
		files: map[string]string{
			"proc/meminfo":                           meminfo,
			"proc/self/cgroup":                       "0::/user.slice/run.scope\n",
			"cg/cgroup.controllers":                  "cpu memory\n",
			"cg/user.slice/memory.max":               "max\n",
			"cg/user.slice/run.scope/memory.max":     "6442450944\n", // 6 GiB
			"cg/user.slice/run.scope/memory.current": "104857600\n",  // 100 MiB
			"cg/user.slice/run.scope/memory.stat":    "anon 1\ninactive_file 52428800\n",
		},
		opts:    func(o *AutoOptions) { o.CeilBytes = 4000 * mib; o.SlotBytes = 3 * mib },
		budget:  1333 * 3 * mib,
		source:  "cgroup v2",
		explain: []string{"cgroup v2 limit 6144 MiB - used 50 MiB", "clamped by --cache-ceil-mb to 4000 MiB", "1333 slots of 3 MiB"},
	},
	{
		name: "a model that fits: every expert",
		files: map[string]string{
			"proc/meminfo":     meminfo,
			"proc/self/cgroup": "0::/\n",
		},
		opts:    func(o *AutoOptions) { o.AllBytes = 900 * 3 * mib; o.SlotBytes = 3 * mib },
		budget:  900 * 3 * mib,
		source:  "MemAvailable",
		explain: []string{"clamped to every expert, 2700 MiB", "900 slots of 3 MiB"},
	},
	{
		name: "v2 on a hybrid system",
		files: map[string]string{
			"proc/meminfo":                  meminfo,
			"proc/self/cgroup":              "1:name=systemd:/\n0::/s\n",
			"cg/unified/cgroup.controllers": "memory\n",
			"cg/unified/s/memory.max":       "3221225472\n",
		},
		budget: 3*gib - 1*gib - 256*mib - 512*mib,
		source: "cgroup v2",
	},
	{
		name: "MemAvailable below the cgroup limit",
		files: map[string]string{
			"proc/meminfo":          "MemAvailable: 2097152 kB\n", // 2 GiB
			"proc/self/cgroup":      "0::/\n",
			"cg/cgroup.controllers": "memory\n",
			"cg/memory.max":         "8589934592\n",
		},
		budget:  2*gib - 1*gib - 256*mib - 512*mib,
		source:  "MemAvailable",
		explain: []string{"capped by MemAvailable 2048 MiB"},
	},
	{
		name: "nothing left",
		files: map[string]string{
			"proc/meminfo":     "MemFree: 1048576 kB\nCached: 524288 kB\n", // no MemAvailable: 1.5 GiB
			"proc/self/cgroup": "0::/\n",
		},
		budget:  0,
		source:  "MemAvailable",
		explain: []string{"MemAvailable 1536 MiB", "nothing left: budget 0"},
	},
}

func TestAutoBudget(t *testing.T) {
	opts := AutoOptions{DenseBytes: 1 * gib, KVBytes: 256 * mib, FloorBytes: 512 * mib}
	for _, tc := range autoBudgetCases {
		t.Run(tc.name, func(t *testing.T) {
			proc, cg := fakeRoots(t, tc.files)
			o := opts
			if tc.opts != nil {
				tc.opts(&o)
			}
			m, err := ReadMemory(proc, cg)
			if err != nil {
				t.Fatal(err)
			}
			a := AutoBudget(m, o)
			if a.Budget != tc.budget {
				t.Errorf("budget %d MiB, want %d MiB (%s)", a.Budget/mib, tc.budget/mib, a.Explain)
			}
			if !strings.HasPrefix(a.Source, tc.source) {
				t.Errorf("source %q, want %q", a.Source, tc.source)
			}
			for _, s := range tc.explain {
				if !strings.Contains(a.Explain, s) {
					t.Errorf("explanation %q lacks %q", a.Explain, s)
				}
			}
		})
	}
}

func TestAutoBudgetErrors(t *testing.T) {
	proc, cg := fakeRoots(t, map[string]string{"proc/other": ""})
	if _, err := ReadMemory(proc, cg); !errors.Is(err, ErrNoMemInfo) {
		t.Errorf("no meminfo, no cgroup: %v", err)
	}
}

func TestAutoBudgetReal(t *testing.T) {
	m, err := ReadMemory("", "")
	a := AutoBudget(m, AutoOptions{FloorBytes: DefaultFloorMB * mib})
	if err != nil {
		if _, serr := os.Stat("/proc/meminfo"); serr != nil {
			t.Skipf("no /proc/meminfo here: %v", serr)
		}
		t.Fatal(err)
	}
	if a.Budget < 0 || a.Available <= 0 || a.Explain == "" {
		t.Errorf("%+v", a)
	}
	t.Log(a.Explain)
}

func TestCliffWarning(t *testing.T) {
	ws := TokenWorkingSet(48, 8, SlotSize(2789376, 2790000)) // 48 layers, top-8
	if ws != 48*8*2793472 {
		t.Fatalf("working set %d", ws)
	}
	for _, tc := range []struct {
		budget int64
		want   []string
	}{
		{0, nil},
		{ws, nil},
		{ws + 1, nil},
		{1000 * mib, []string{"cache budget 1000 MiB", "is 23 MiB", "(2.2 %)", "working set of 1023 MiB", "at least 1023"}},
	} {
		w := CliffWarning(tc.budget, ws)
		if (w == "") != (tc.want == nil) {
			t.Errorf("budget %d: %q", tc.budget, w)
		}
		for _, s := range tc.want {
			if !strings.Contains(w, s) {
				t.Errorf("warning %q lacks %q", w, s)
			}
		}
	}
}

func TestSlotSize(t *testing.T) {
	for _, tc := range []struct {
		spans []int64
		want  int64
	}{{nil, 0}, {[]int64{1}, 4096}, {[]int64{4096, 100}, 4096}, {[]int64{3059712 + 8192, 3000000}, 3067904}} {
		if got := SlotSize(tc.spans...); got != tc.want {
			t.Errorf("SlotSize(%v) = %d, want %d", tc.spans, got, tc.want)
		}
	}
}

// TestPrefaultAll: after PrefaultAll the resident arena is faulted in
// whole, before any lookup (a cache that will fill: its first prompt's reads
// then land in present pages); without it nothing is faulted before the
// first slot is handed out.
func TestPrefaultAll(t *testing.T) {
	if runtime.GOOS != "linux" {
		t.Skip("the Prefaulter faults pages in on Linux only (MADV_POPULATE_WRITE)")
	}
	const slot, slots = 1 << 20, 40
	for _, all := range []bool{false, true} {
		pol, _ := NewPolicy("lru", PolicyOptions{})
		c, err := New(Config{BudgetBytes: slots * slot, SlotBytes: slot, Policy: pol})
		if err != nil {
			t.Fatal(err)
		}
		if !all {
			if f := c.Faulted(); f != 0 {
				t.Errorf("without PrefaultAll: %d bytes faulted before any lookup", f)
			}
		} else {
			c.PrefaultAll()
			deadline := time.Now().Add(time.Minute) // hang guard: the Prefaulter has no event to wait on
			for c.Faulted() < slots*slot && time.Now().Before(deadline) {
				time.Sleep(time.Millisecond)
			}
			if f := c.Faulted(); f != slots*slot {
				t.Errorf("with PrefaultAll: %d of %d bytes faulted after a minute", f, slots*slot)
			}
		}
		if err := c.Close(); err != nil {
			t.Fatal(err)
		}
	}
}

// TestWarmSlotsFirst: once the whole arena is being faulted in
// (PrefaultAll), a read never takes a free slot whose pages are not yet
// present while it can evict — it evicts the policy's victim and leaves
// the fresh slot to the Prefaulter — and takes a fresh slot rather than
// wait when nothing can be evicted; slots the Prefaulter has reached are
// taken before any eviction. A demand miss (Acquire) and a speculative
// read (Prefetch) alike. Before PrefaultAll every free slot goes first.
func TestWarmSlotsFirst(t *testing.T) {
	var faulted atomic.Int64
	setup := func(all bool) (*Cache, *recPolicy) {
		c, rp := newCache(t, 5, 1)
		c.res.faultFn = faulted.Load
		if all {
			c.PrefaultAll()
		}
		return c, rp
	}
	a, b, d, e := Key{0, 1}, Key{1, 1}, Key{2, 1}, Key{2, 2}
	for _, all := range []bool{false, true} {
		faulted.Store(slot) // the Prefaulter has reached the end of slot 0 only
		c, _ := setup(all)
		c.Batch(0, 0)
		use(t, c, a) // slot 0: warm
		c.Batch(0, 1)
		use(t, c, b) // slot 1 is fresh: after PrefaultAll, a is evicted for it
		wantEv := int64(0)
		if all {
			wantEv = 1
		}
		if ev := c.Stats().Evictions; ev != wantEv {
			t.Errorf("PrefaultAll %v: demand miss with a fresh free slot: %d evictions, want %d", all, ev, wantEv)
		}
		if c.Contains(a) == all {
			t.Errorf("PrefaultAll %v: a resident = %v", all, c.Contains(a))
		}
		// A speculative read: the same order.
		c.Batch(0, 2)
		h, ok, err := c.Prefetch(d, slot)
		if err != nil || !ok {
			t.Fatalf("Prefetch(%v): ok %v, %v", d, ok, err)
		}
		fill(h.Buf(), d)
		h.Complete(nil)
		h.Release()
		if ev := c.Stats().Evictions; ev != 2*wantEv {
			t.Errorf("PrefaultAll %v: prefetch with a fresh free slot: %d evictions, want %d", all, ev, 2*wantEv)
		}
		// Nothing evictable (d used in this batch, b pinned): a fresh slot, no wait.
		hb, _ := get(t, c, b)
		use(t, c, d)
		ctx, cancel := context.WithTimeout(context.Background(), time.Minute) // hang guard
		he, st, err := c.Acquire(ctx, e, slot)
		cancel()
		if err != nil || st != Miss {
			t.Fatalf("PrefaultAll %v: Acquire with only fresh slots free: %v, %v", all, st, err)
		}
		he.Complete(nil)
		he.Release()
		hb.Release()
		if ev := c.Stats().Evictions; ev != 2*wantEv {
			t.Errorf("PrefaultAll %v: %d evictions after the fresh slot, want %d", all, ev, 2*wantEv)
		}
		// The Prefaulter reached every slot: free slots go before eviction.
		faulted.Store(4 * slot)
		c.Batch(0, 3)
		use(t, c, Key{3, 1})
		if ev := c.Stats().Evictions; ev != 2*wantEv {
			t.Errorf("PrefaultAll %v: %d evictions with a warm free slot, want %d", all, ev, 2*wantEv)
		}
		if r, max := c.Stats().ResidentBytes, int64(5*slot); r > max {
			t.Errorf("resident %d bytes over the budget's %d", r, max)
		}
	}
}

// TestWarmWaitsForFaultedSlots: after PrefaultAll a warm-start read never
// takes a slot the Prefaulter has not reached (WarmNotFaulted), and Faulting
// is the channel that wakes its caller when the Prefaulter advances; before
// PrefaultAll, or once the slots are reached, it takes a free slot as before.
func TestWarmWaitsForFaultedSlots(t *testing.T) {
	var faulted atomic.Int64
	progress := make(chan struct{})
	for _, all := range []bool{false, true} {
		faulted.Store(slot) // the Prefaulter has reached the end of slot 0 only
		c, _ := newCache(t, 3, 1)
		c.res.faultFn = faulted.Load
		c.res.progressFn = func() <-chan struct{} { return progress }
		if all {
			c.PrefaultAll()
		}
		warm := func(k Key) WarmStatus {
			t.Helper()
			h, st, err := c.Warm(k, slot)
			if err != nil {
				t.Fatalf("PrefaultAll %v: Warm(%v): %v", all, k, err)
			}
			if h != nil {
				fill(h.Buf(), k)
				h.Complete(nil)
				h.Release()
			}
			return st
		}
		if st := warm(Key{0, 1}); st != WarmStarted {
			t.Fatalf("PrefaultAll %v: Warm into the faulted slot 0: %v", all, st)
		}
		want := WarmStarted
		if all {
			want = WarmNotFaulted
		}
		if st := warm(Key{0, 2}); st != want {
			t.Fatalf("PrefaultAll %v: Warm with only fresh slots free: %v, want %v", all, st, want)
		}
		if !all {
			continue
		}
		if ch := c.Faulting(); ch != progress {
			t.Fatal("Faulting is not the Prefaulter's progress channel")
		}
		faulted.Store(2 * slot) // the Prefaulter reached slot 1
		if st := warm(Key{0, 2}); st != WarmStarted {
			t.Fatalf("Warm once slot 1 is faulted: %v", st)
		}
		if r := c.Stats().ResidentBytes; r != 2*slot {
			t.Errorf("resident %d bytes, want %d", r, 2*slot)
		}
		if err := c.Close(); err != nil {
			t.Fatal(err)
		}
		select {
		case <-c.Faulting():
		default:
			t.Error("Faulting of a closed cache is not closed: a waiter would hang")
		}
	}
}

// TestGuessSkipsFreshSlotsDuringWarmStart: while warm-start entries wait
// for their layer, a speculative read (Prefetch) never takes a free slot
// the Prefaulter has not reached — its read would fault the pages in
// inside the system call — and gets no slot instead; a demand miss still
// gets one at once (it evicts), and the guess takes a fresh slot again
// once the warm layer has been passed and nothing is evictable.
func TestGuessSkipsFreshSlotsDuringWarmStart(t *testing.T) {
	var faulted atomic.Int64
	faulted.Store(slot) // the Prefaulter has reached the end of slot 0 only
	c, _ := newCache(t, 4, 0)
	c.res.faultFn = faulted.Load
	c.PrefaultAll()
	warmIn(t, c, Key{3, 0}) // slot 0, protected until layer 3 is passed
	c.Batch(0, 0)
	if h, ok, err := c.Prefetch(Key{1, 0}, slot); err != nil || ok {
		if ok {
			h.Release()
		}
		t.Fatalf("Prefetch with only fresh free slots during a warm start: ok %v err %v, want no slot", ok, err)
	}
	if r := c.Stats().ResidentBytes; r != slot {
		t.Fatalf("resident %d bytes after the refused guess, want %d", r, slot)
	}
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute) // hang guard: it must not wait
	defer cancel()
	h, st, err := c.Acquire(ctx, Key{0, 1}, slot)
	if err != nil || st != Miss {
		t.Fatalf("demand miss during the warm start: %v %v", st, err)
	}
	h.Complete(nil)
	h.Release()
	c.Batch(0, 3)
	c.Batch(0, 4) // layer 3 passed: the guard is no longer active
	h, _ = get(t, c, Key{3, 0})
	hm, _ := get(t, c, Key{0, 1}) // both pinned: nothing evictable
	h2, ok, err := c.Prefetch(Key{5, 0}, slot)
	if err != nil || !ok {
		t.Fatalf("Prefetch after the warm start with nothing evictable: ok %v err %v, want a fresh slot", ok, err)
	}
	h2.Complete(nil)
	h2.Release()
	h.Release()
	hm.Release()
	if r, max := c.Stats().ResidentBytes, int64(4*slot); r > max {
		t.Errorf("resident %d bytes over the budget's %d", r, max)
	}
}
