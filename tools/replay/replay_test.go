package replay

import (
	"bytes"
	"errors"
	"fmt"
	"os"
	"strings"
	"testing"

	"github.com/pipe-engine/pipe/cache"
)

// tok is one routed (token, layer) of a hand-written trace.
type tok struct {
	phase, step, layer int
	experts            []int
}

// mkTrace renders a route_trace v1 text with nLayer layers, nExpert experts,
// top-k, expert_bytes bytes[l] per layer.
func mkTrace(bytesPerLayer []int64, nExpert, k int, toks []tok) string {
	var b strings.Builder
	fmt.Fprintf(&b, "%s\n# model=/tmp/m.gguf arch=test n_layer=%d n_expert=%d n_expert_used=%d\n", Magic, len(bytesPerLayer), nExpert, k)
	for l, eb := range bytesPerLayer {
		fmt.Fprintf(&b, "# layer=%d expert_bytes=%d dense_bytes=100\n", l, eb)
	}
	b.WriteString(Columns + "\n")
	for _, t := range toks {
		for s, e := range t.experts {
			fmt.Fprintf(&b, "0,%d,%d,%d,%d,%d,0.5,0,%d\n", t.phase, t.step, t.layer, s, e, bytesPerLayer[t.layer])
		}
	}
	return b.String()
}

func compileString(t *testing.T, s string) *Sequence {
	t.Helper()
	tr, err := Read(strings.NewReader(s))
	if err != nil {
		t.Fatal(err)
	}
	return Compile(tr)
}

func run(t *testing.T, s *Sequence, policy string, budget int64, phase PhaseSel, seed int64) Result {
	t.Helper()
	p, err := cache.NewPolicy(policy, cache.PolicyOptions{Seed: seed, Layers: s.Header.NLayer, Future: s.Future()})
	if err != nil {
		t.Fatal(err)
	}
	r, err := Simulate(s, p, budget, phase)
	if err != nil {
		t.Fatal(err)
	}
	return r
}

// cyclicTrace: 3 layers, expert 0 at every layer, 4 decode tokens, 1 byte
// per expert: T = 3 bytes.
func cyclicTrace() string {
	var toks []tok
	for step := range 4 {
		for l := range 3 {
			toks = append(toks, tok{1, step, l, []int{0}})
		}
	}
	return mkTrace([]int64{1, 1, 1}, 4, 1, toks)
}

// freqTrace: 1 layer, decode experts 0,0,1,2,0,3,0,1,0,2.
func freqTrace() string {
	var toks []tok
	for step, e := range []int{0, 0, 1, 2, 0, 3, 0, 1, 0, 2} {
		toks = append(toks, tok{1, step, 0, []int{e}})
	}
	return mkTrace([]int64{1}, 4, 1, toks)
}

// prefillTrace: 2 layers (1 and 2 bytes per expert), top-2, a 3-token
// prompt (repeats inside each prefill batch) and 2 decode tokens.
func prefillTrace() string {
	return mkTrace([]int64{1, 2}, 4, 2, []tok{
		{0, 0, 0, []int{0, 1}}, {0, 1, 0, []int{1, 2}}, {0, 2, 0, []int{0, 1}},
		{0, 0, 1, []int{3, 0}}, {0, 1, 1, []int{3, 1}}, {0, 2, 1, []int{3, 0}},
		{1, 3, 0, []int{1, 2}}, {1, 3, 1, []int{3, 2}},
		{1, 4, 0, []int{0, 3}}, {1, 4, 1, []int{0, 1}},
	})
}

// TestHandComputed checks exact hit counts worked out by hand (see the
// comments) for every policy.
func TestHandComputed(t *testing.T) {
	cases := []struct {
		name, trace, policy string
		budget              int64
		phase               PhaseSel
		lookups, hits       int64
		bytesRead           int64
	}{
		// Cyclic, budget 2 < T = 3. LRU and LFU (all counts 1, LRU ties)
		// always evict the layer that runs next: 0 hits.
		{"cyclic", cyclicTrace(), "lru", 2, CountDecode, 12, 0, 12},
		{"cyclic", cyclicTrace(), "lfu", 2, CountDecode, 12, 0, 12},
		// Belady: evict L1, hit L0, evict L0, hit L2, evict L2, hit L1, …:
		// every other lookup after the first three hits (p3,5,7,9,11).
		{"cyclic", cyclicTrace(), "belady", 2, CountDecode, 12, 5, 7},
		// layer-lru: all values tie, the layer visited last is evicted
		// (its next visit is farthest): exactly Belady's choices.
		{"cyclic", cyclicTrace(), "layer-lru", 2, CountDecode, 12, 5, 7},
		// layer-lrfu (λ 0.1): L0 gains frequency first and stays; L1 and
		// L2 evict each other (expected next use 22.2 vs 42.8, 21.2 vs
		// 22.2, …): hits at L0 of tokens 1, 2, 3.
		{"cyclic", cyclicTrace(), "layer-lrfu", 2, CountDecode, 12, 3, 9},
		// layer (p = 0.15·fast + 0.0144·slow, next use lastBatch + 3/p):
		// b3 evicts L1 (20.25 vs 19.25), b5 L2 (21.25 vs 15.83), b6 L1
		// (16.83 vs 15.83), b8 L2, b9 L1, then at b11 L0's 18.90 beats
		// L2's 18.84, so L2 hits at b12: hits b4, b7, b10, b12.
		{"cyclic", cyclicTrace(), "layer", 2, CountDecode, 12, 4, 8},
		// Budget 3 = T: everything fits after the first token.
		{"cyclic-T", cyclicTrace(), "lru", 3, CountDecode, 12, 9, 3},
		{"cyclic-T", cyclicTrace(), "random", 3, CountDecode, 12, 9, 3},

		// Frequency trace, budget 2 entries.
		// LRU: hits at t1, t6, t8.
		{"freq", freqTrace(), "lru", 2, CountDecode, 10, 3, 7},
		{"freq", freqTrace(), "layer-lru", 2, CountDecode, 10, 3, 7},
		// LFU keeps expert 0 (count ≥ 2 from t1): hits t1, t4, t6, t8.
		{"freq", freqTrace(), "lfu", 2, CountDecode, 10, 4, 6},
		{"freq", freqTrace(), "layer-lrfu", 2, CountDecode, 10, 4, 6},
		// layer: at t3 expert 1 (one use, one visit ago: p 0.089) outranks
		// expert 0 (two uses, two and three visits ago: p 0.084), so 0 is
		// evicted and misses at t4; later 0 dominates: hits t1, t6, t8.
		{"freq", freqTrace(), "layer", 2, CountDecode, 10, 3, 7},
		{"freq", freqTrace(), "belady", 2, CountDecode, 10, 4, 6},
		// Budget 0: only the batch's own entry survives (never evict what
		// the batch touched), so only the back-to-back repeat hits.
		{"freq-0", freqTrace(), "lru", 0, CountDecode, 10, 1, 9},
		{"freq-0", freqTrace(), "random", 0, CountDecode, 10, 1, 9},
		{"freq-0", freqTrace(), "belady", 0, CountDecode, 10, 1, 9},
		{"freq-0", freqTrace(), "layer", 0, CountDecode, 10, 1, 9},
		// Budget 4: no eviction ever; 4 compulsory misses.
		{"freq-4", freqTrace(), "random", 4, CountDecode, 10, 6, 4},

		// Prefill batches: layer 0 looks up {0,1,2}, layer 1 {3,0,1}; decode
		// looks up 8 experts. Unbounded: decode hits all but L1/2 and L0/3.
		{"prefill", prefillTrace(), "lru", 100, CountDecode, 8, 6, 2 + 1},
		{"prefill-all", prefillTrace(), "lru", 100, CountAll, 14, 6, 3 + 6 + 2 + 1},
		// Budget 4 bytes: after prefill only layer 1's three (6 bytes,
		// touched) remain; then every decode lookup misses under LRU.
		{"prefill-4", prefillTrace(), "lru", 4, CountDecode, 8, 0, 12},
	}
	for _, c := range cases {
		t.Run(c.name+"/"+c.policy, func(t *testing.T) {
			s := compileString(t, c.trace)
			r := run(t, s, c.policy, c.budget, c.phase, 1)
			if r.Lookups != c.lookups || r.Hits != c.hits || r.BytesRead != c.bytesRead {
				t.Errorf("lookups/hits/bytes = %d/%d/%d, want %d/%d/%d", r.Lookups, r.Hits, r.BytesRead, c.lookups, c.hits, c.bytesRead)
			}
		})
	}
}

func TestCompilePrefillBatches(t *testing.T) {
	s := compileString(t, prefillTrace())
	if len(s.Batches) != 6 || s.PrefillTokens != 3 || s.DecodeTokens != 2 {
		t.Fatalf("batches %d prefill %d decode %d, want 6, 3, 2", len(s.Batches), s.PrefillTokens, s.DecodeTokens)
	}
	b := s.Batches[0]
	var got []string
	for _, a := range b.Accesses {
		got = append(got, fmt.Sprintf("%d%v", a.Key.Expert, a.Repeat))
	}
	want := "0false 1false 1true 2false 0true 1true"
	if strings.Join(got, " ") != want || b.Tokens != 3 {
		t.Errorf("prefill batch 0 = %q (%d tokens), want %q (3 tokens)", strings.Join(got, " "), b.Tokens, want)
	}
	if f := s.Future(); len(f) != 6+6+2+2+2+2 {
		t.Errorf("future has %d entries, want 20", len(f))
	}
}

func TestPeakExceedsBudgetInsideBatch(t *testing.T) {
	s := compileString(t, prefillTrace())
	r := run(t, s, "lru", 4, CountDecode, 1)
	if r.PeakBytes != 9 {
		t.Errorf("peak %d bytes, want 9 (3 + 6 during prefill layer 1)", r.PeakBytes)
	}
}

func loadReal(t testing.TB, name string) *Sequence {
	t.Helper()
	f, err := os.Open("testdata/" + name + ".route.csv")
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	tr, err := Read(f)
	if err != nil {
		t.Fatal(err)
	}
	return Compile(tr)
}

func TestRealTraceShapes(t *testing.T) {
	for _, c := range []struct {
		name                    string
		layers, decode, prefill int
		workingSet              int64
	}{
		// Qwen: 48 layers, 24 of 3059712 and 24 of 2654208 bytes per expert.
		{"qwen", 48, 128, 28, 6 * (24*3059712 + 24*2654208)},
		// Gemma: 30 layers, 14 of 4336640 and 16 of 3593216 bytes per expert.
		{"gemma", 30, 128, 29, 6 * (14*4336640 + 16*3593216)},
	} {
		s := loadReal(t, c.name)
		if s.Header.NLayer != c.layers || s.DecodeTokens != c.decode || s.PrefillTokens != c.prefill || s.Header.WorkingSet() != c.workingSet {
			t.Errorf("%s: layers %d decode %d prefill %d T %d, want %d %d %d %d", c.name, s.Header.NLayer, s.DecodeTokens, s.PrefillTokens,
				s.Header.WorkingSet(), c.layers, c.decode, c.prefill, c.workingSet)
		}
		if got := len(s.Batches); got != c.layers+c.decode*c.layers {
			t.Errorf("%s: %d batches, want %d", c.name, got, c.layers+c.decode*c.layers)
		}
	}
}

// TestRealTraces: Belady bounds every policy at every budget, and the layer
// policy beats LRU below the working set T (where LRU is exactly 0 %).
func TestRealTraces(t *testing.T) {
	budgetsMiB := []int64{100, 300, 600, 1000, 2000, 4000}
	if testing.Short() {
		budgetsMiB = []int64{500}
	}
	pols := []string{"lru", "lfu", "random", "layer", "layer+admit", "layer-lrfu", "layer-lru"}
	for _, name := range []string{"qwen", "gemma"} {
		s := loadReal(t, name)
		T := s.Header.WorkingSet()
		for _, b := range budgetsMiB {
			bytes := b << 20
			opt := run(t, s, "belady", bytes, CountDecode, 1)
			hits := map[string]int64{}
			for _, p := range pols {
				r := run(t, s, p, bytes, CountDecode, 1)
				hits[p] = r.Hits
				if r.Hits > opt.Hits {
					t.Errorf("%s %d MiB: %s %d hits > belady %d", name, b, p, r.Hits, opt.Hits)
				}
			}
			if bytes < T {
				if hits["lru"] != 0 {
					t.Errorf("%s %d MiB < T: lru %d hits, want the 0 %% cliff", name, b, hits["lru"])
				}
				if hits["layer"] <= hits["lru"] || hits["layer"]*10 < opt.Hits*5 {
					t.Errorf("%s %d MiB < T: layer %d hits vs lru %d, belady %d: want > lru and ≥ half of belady", name, b, hits["layer"], hits["lru"], opt.Hits)
				}
			} else if hits["layer"] < hits["lru"] {
				t.Errorf("%s %d MiB ≥ T: layer %d hits < lru %d", name, b, hits["layer"], hits["lru"])
			}
		}
	}
}

// TestAdmissionReplay: on the real traces below the one-token working set,
// "layer+admit" refuses some misses, never exceeds the budget by more than
// "layer" does, and hits at least as often (the table in
// docs/measurements.md).
func TestAdmissionReplay(t *testing.T) {
	for _, name := range []string{"qwen", "gemma"} {
		s := loadReal(t, name)
		for _, b := range []int64{250 << 20, 500 << 20} {
			plain := run(t, s, "layer", b, CountDecode, 1)
			adm := run(t, s, "layer+admit", b, CountDecode, 1)
			if adm.Refused == 0 || plain.Refused != 0 {
				t.Errorf("%s %d MiB: refused %d with admission, %d without", name, b>>20, adm.Refused, plain.Refused)
			}
			if adm.Hits < plain.Hits || adm.PeakBytes > plain.PeakBytes {
				t.Errorf("%s %d MiB: admission %d hits peak %d, without %d hits peak %d", name, b>>20, adm.Hits, adm.PeakBytes, plain.Hits, plain.PeakBytes)
			}
		}
	}
}

func TestDeterminism(t *testing.T) {
	if testing.Short() {
		t.Skip("replays a real trace 10 times")
	}
	s := loadReal(t, "gemma")
	for _, p := range []string{"random", "layer", "lfu", "belady"} {
		a := run(t, s, p, 600<<20, CountAll, 42)
		b := run(t, s, p, 600<<20, CountAll, 42)
		if a != b {
			t.Errorf("%s: two runs differ: %+v vs %+v", p, a, b)
		}
	}
	a := run(t, s, "random", 600<<20, CountDecode, 1)
	b := run(t, s, "random", 600<<20, CountDecode, 2)
	if a.Hits == b.Hits && a.Evictions == b.Evictions && a.BytesRead == b.BytesRead {
		t.Errorf("random: seeds 1 and 2 give identical results (%d hits, %d evictions): the seed is not used", a.Hits, a.Evictions)
	}
}

func TestPolicyContractViolation(t *testing.T) {
	s := compileString(t, cyclicTrace())
	_, err := Simulate(s, badPolicy{}, 1, CountDecode)
	if !errors.Is(err, ErrPolicy) {
		t.Fatalf("err = %v, want ErrPolicy", err)
	}
}

// badPolicy always names a key that is not resident.
type badPolicy struct{}

func (badPolicy) Name() string                                  { return "bad" }
func (badPolicy) Batch(int, int)                                {}
func (badPolicy) OnHit(cache.Key)                               {}
func (badPolicy) OnAdmit(cache.Key, int64)                      {}
func (badPolicy) OnEvict(cache.Key)                             {}
func (badPolicy) Victim(func(cache.Key) bool) (cache.Key, bool) { return cache.Key{Layer: 99}, true }

func TestSweepAndReport(t *testing.T) {
	s := compileString(t, freqTrace())
	rep, err := Sweep("freq", s, SweepOptions{Policies: []string{"LRU", "lfu", "belady"}, Budgets: []int64{2, 4}, Phase: CountDecode})
	if err != nil {
		t.Fatal(err)
	}
	if got := rep.Results[0][0]; got.Policy != "lru" || got.Hits != 3 || got.Lookups != 10 {
		t.Errorf("lru@2 = %+v, want 3/10 hits", got)
	}
	if got := rep.Results[1][1]; got.Hits != 6 {
		t.Errorf("lfu@4 hits %d, want 6", got.Hits)
	}
	for _, f := range []string{"text", "markdown", "json"} {
		var buf bytes.Buffer
		if err := rep.Write(&buf, f); err != nil {
			t.Fatal(err)
		}
		out := buf.String()
		pct := "30.0"
		if f == "json" {
			pct = `"hit_pct": 30,`
		}
		for _, want := range []string{"lru", "belady", pct} {
			if !strings.Contains(out, want) {
				t.Errorf("%s output lacks %q:\n%s", f, want, out)
			}
		}
	}
	if err := rep.Write(&bytes.Buffer{}, "xml"); !errors.Is(err, ErrOptions) {
		t.Errorf("format xml: err = %v, want ErrOptions", err)
	}
	if _, err := Sweep("freq", s, SweepOptions{Policies: []string{"fifo"}, Budgets: []int64{2}}); !errors.Is(err, cache.ErrUnknownPolicy) || !strings.Contains(err.Error(), "layer") {
		t.Errorf("unknown policy: err = %v, want ErrUnknownPolicy listing the valid names", err)
	}
}

func TestParseBudgets(t *testing.T) {
	got, err := ParseBudgets("250, 0.5,1e3")
	if err != nil || len(got) != 3 || got[0] != 250<<20 || got[1] != 1<<19 || got[2] != 1000<<20 {
		t.Errorf("ParseBudgets = %v, %v", got, err)
	}
	for _, bad := range []string{"", "x", "-1", "1,,y"} {
		if _, err := ParseBudgets(bad); !errors.Is(err, ErrOptions) {
			t.Errorf("ParseBudgets(%q) err = %v, want ErrOptions", bad, err)
		}
	}
	if _, err := ParsePhaseSel("prefill"); err == nil {
		t.Error("ParsePhaseSel(prefill) accepted")
	}
}

func BenchmarkSimulate(b *testing.B) {
	s := loadReal(b, "qwen")
	fut := s.Future()
	var n int64
	for i := range s.Batches {
		n += int64(len(s.Batches[i].Accesses))
	}
	for _, p := range []string{"lru", "lfu", "random", "layer", "layer-lrfu", "layer-lru", "belady"} {
		b.Run(p, func(b *testing.B) {
			for b.Loop() {
				pol, err := cache.NewPolicy(p, cache.PolicyOptions{Seed: 1, Layers: s.Header.NLayer, Future: fut})
				if err != nil {
					b.Fatal(err)
				}
				if _, err := Simulate(s, pol, 500<<20, CountDecode); err != nil {
					b.Fatal(err)
				}
			}
			b.ReportMetric(float64(b.Elapsed().Nanoseconds())/float64(int64(b.N)*n), "ns/access")
		})
	}
}

func mustPolicy(t testing.TB, name string, s *Sequence) cache.Policy {
	t.Helper()
	p, err := cache.NewPolicy(name, cache.PolicyOptions{Layers: s.Header.NLayer, Future: s.Future()})
	if err != nil {
		t.Fatal(err)
	}
	return p
}
