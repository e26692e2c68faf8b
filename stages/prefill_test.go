package stages

import (
	"context"
	"runtime"
	"testing"

	"github.com/pipe-engine/pipe/cache"
	"github.com/pipe-engine/pipe/model"
	"github.com/pipe-engine/pipe/reader"
)

// TestPrefillPassOverBudget: a prefill pass whose routed experts are many
// times the cache budget — and whose every layer routes to more experts than
// the budget holds (one slot, or none) — neither deadlocks nor thrashes:
// each routed expert is read exactly once per layer of the pass (the lanes
// read the sum of the distinct routed experts' spans), resident bytes never
// pass the budget, and the logits are the mmap run's, bit for bit.
func TestPrefillPassOverBudget(t *testing.T) {
	ctx := context.Background()
	want, err := mmapLogits(ctx, t, 0)
	if err != nil {
		t.Fatal(err)
	}
	probe, err := Open(ctx, baseCfg(), Inputs{})
	if err != nil {
		t.Fatal(err)
	}
	slot := probe.layout.slotBytes
	probe.Close()
	for _, slots := range []int64{0, 1} {
		cfg := baseCfg()
		cfg.Cache.Bytes = slots * slot // 0: auto, every expert
		cfg.Cache.Fill = FillOff       // the pass's own reads only
		e, err := Open(ctx, cfg, Inputs{})
		if err != nil {
			t.Fatal(err)
		}
		routed := map[cache.Key]bool{}
		maxLayer := 0
		e.Observe(func(step, layer int, ids [][]int, _ [][]float32) {
			n := 0
			for _, tok := range ids {
				for _, x := range tok {
					k := cache.Key{Layer: layer, Expert: x}
					if !routed[k] {
						routed[k] = true
						n++
					}
				}
			}
			maxLayer = max(maxLayer, n)
		})
		s, err := e.NewSession(len(prompt), model.KVF32)
		if err != nil {
			t.Fatal(err)
		}
		rows, wall, err := s.Prefill(ctx, prompt, false)
		if err != nil {
			t.Fatal(err)
		}
		// the breakdown: stall and compute are disjoint times of the decode
		// goroutine; the lanes were busy reading
		if pt := s.PrefillTimes(); pt.Compute <= 0 || pt.IOBusy <= 0 || pt.Stall+pt.Compute > wall {
			t.Errorf("budget %d slots: prefill times %+v for a %v prefill", slots, pt, wall)
		}
		_, read := lanesOf(e).Totals()
		var distinct int64
		for k := range routed {
			distinct += reader.SpanBytes(e.layout.ranges[k.Layer][k.Expert])
		}
		cs := cacheOf(e).Stats()
		e.Close()
		t.Logf("budget %d slots: %d routed experts, up to %d in a layer, %d bytes read", slots, len(routed), maxLayer, read)
		if int64(len(routed))*slot <= 2*cfg.Cache.Bytes || int64(maxLayer) <= slots {
			t.Fatalf("budget %d slots: the prompt routes to %d experts, at most %d in a layer: not over budget", slots, len(routed), maxLayer)
		}
		if read != distinct {
			t.Errorf("budget %d slots: the pass read %d bytes, the distinct routed experts are %d", slots, read, distinct)
		}
		if cs.PeakResidentBytes > cs.BudgetBytes {
			t.Errorf("budget %d slots: peak resident %d > budget %d", slots, cs.PeakResidentBytes, cs.BudgetBytes)
		}
		if !sameBits(rows, want) {
			t.Errorf("budget %d slots: logits differ from the mmap run", slots)
		}
	}
}

// TestPrefillPassesCompose: a prompt fed in several prefill passes (each
// continuing the KV cache, as Prefill does past PrefillChunk tokens) gives
// the logits of one pass, bit for bit, for every position.
func TestPrefillPassesCompose(t *testing.T) {
	ctx := context.Background()
	run := func(cuts ...int) [][]float32 {
		t.Helper()
		e, err := Open(ctx, baseCfg(), Inputs{})
		if err != nil {
			t.Fatal(err)
		}
		defer e.Close()
		s, err := e.NewSession(len(prompt), model.KVF32)
		if err != nil {
			t.Fatal(err)
		}
		var out [][]float32
		from := 0
		for _, to := range append(cuts, len(prompt)) {
			rows, _, err := s.Prefill(ctx, prompt[from:to], true)
			if err != nil {
				t.Fatal(err)
			}
			for _, r := range rows {
				out = append(out, append([]float32(nil), r...))
			}
			from = to
		}
		return out
	}
	one := run()
	if len(one) != len(prompt) {
		t.Fatalf("%d rows for %d tokens", len(one), len(prompt))
	}
	for _, cuts := range [][]int{{1}, {6}, {4, 9}, {1, 2, 3, 5, 8, 12}} {
		if !sameBits(run(cuts...), one) {
			t.Errorf("passes cut at %v: logits differ from one pass", cuts)
		}
	}
}

// TestPromptPrefetch: with Prefetch.Prompt a prompt pass reads the experts
// the next layer's router picks for this layer's inputs before that layer
// looks them up — the guesses are issued and routed to, and later layers'
// lookups find them — the logits stay the mmap run's, and the pass runs with
// PromptProcs Ps beyond the compute threads, put back for decode.
func TestPromptPrefetch(t *testing.T) {
	ctx := context.Background()
	want, err := mmapLogits(ctx, t, 2)
	if err != nil {
		t.Fatal(err)
	}
	t.Setenv("GOMAXPROCS", "") // unset: the engine may choose
	defer runtime.GOMAXPROCS(runtime.GOMAXPROCS(1))
	for _, on := range []bool{false, true} {
		cfg := baseCfg()
		cfg.Cache.Bytes = 30 << 20 // every expert: a guess is never evicted before its layer
		cfg.Cache.Fill = FillOff   // the guesses are read, not the fill
		cfg.Prefetch.NoPrompt = !on
		var procs []int // GOMAXPROCS seen at each routed layer
		got, err := decodeWith(ctx, t, cfg, 2, func(e *Engine) {
			ps := e.Metrics().Speculation
			t.Logf("prompt prefetch %v: %+v", on, ps)
			switch {
			case !on && ps.Speculative != 0:
				t.Errorf("prompt prefetch off: %d speculative reads", ps.Speculative)
			case on && (ps.Speculative == 0 || ps.SpeculativeUsed == 0 || ps.Hits+ps.Joins == 0):
				t.Errorf("prompt prefetch on: %d guesses read, %d routed to, %d hits and %d joins", ps.Speculative, ps.SpeculativeUsed, ps.Hits, ps.Joins)
			}
		}, func(e *Engine) {
			e.Observe(func(int, int, [][]int, [][]float32) { procs = append(procs, runtime.GOMAXPROCS(0)) })
		})
		if err != nil {
			t.Fatal(err)
		}
		if !sameBits(got, want) {
			t.Errorf("prompt prefetch %v: logits differ from the mmap run", on)
		}
		nl := len(procs) / 3 // layers: the prompt pass, then 2 steps
		if wantP := cfg.Threads + PromptProcs; procs[0] != wantP || procs[nl-1] != wantP || procs[nl] != 1 || procs[len(procs)-1] != 1 {
			t.Errorf("GOMAXPROCS per layer %v: want %d in the prompt pass, 1 in decode", procs, wantP)
		}
	}
	if runtime.GOMAXPROCS(0) != 1 {
		t.Errorf("GOMAXPROCS %d after the runs, was 1", runtime.GOMAXPROCS(0))
	}
}
