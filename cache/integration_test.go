package cache_test

import (
	"bytes"
	"context"
	"fmt"
	"math/rand/v2"
	"os"
	"path/filepath"
	"sync"
	"testing"

	"github.com/pipe-engine/pipe/cache"
	"github.com/pipe-engine/pipe/reader"
)

// TestWithReaderLanes drives the cache the way the pipeline does: per
// (token, layer) a Batch, one Acquire per routed expert, reads for the misses
// submitted to reader lanes whose Done completes the handle, consumers that
// wait for Ready, check the bytes and Release. Budgets from 0 to all experts;
// every expert's bytes must equal the file's, whatever served them.
func TestWithReaderLanes(t *testing.T) {
	const layers, experts, k = 4, 8, 3
	sizes := [3]int64{5000, 5000, 7000} // gate, up, down of one expert
	var layerBytes int64
	for _, n := range sizes {
		layerBytes += n * experts
	}
	data := make([]byte, 1000+layers*layerBytes)
	rng := rand.New(rand.NewPCG(1, 2))
	for i := range data {
		data[i] = byte(rng.Uint32())
	}
	path := filepath.Join(t.TempDir(), "model.gguf")
	if err := os.WriteFile(path, data, 0o644); err != nil {
		t.Fatal(err)
	}
	ranges := func(l, e int) []reader.Range {
		base := 1000 + int64(l)*layerBytes
		var rs []reader.Range
		for _, n := range sizes {
			rs = append(rs, reader.Range{Shard: 0, Off: base + int64(e)*n, Len: n})
			base += n * experts
		}
		return rs
	}
	var spans []int64 // the slot must fit every expert: spans differ with alignment
	for l := range layers {
		for e := range experts {
			spans = append(spans, reader.SpanBytes(ranges(l, e)))
		}
	}
	slot := cache.SlotSize(spans...)
	ws := cache.TokenWorkingSet(layers, k, slot)

	files, err := reader.Open([]string{path}, reader.Options{})
	if err != nil {
		t.Fatal(err)
	}
	defer files.Close()
	for _, budgetSlots := range []int64{0, 2, layers*k - 1, layers * experts} {
		t.Run(fmt.Sprint("slots=", budgetSlots), func(t *testing.T) {
			pol, err := cache.NewPolicy("lru", cache.PolicyOptions{})
			if err != nil {
				t.Fatal(err)
			}
			c, err := cache.New(cache.Config{BudgetBytes: budgetSlots * slot, SlotBytes: slot, Policy: pol, TransientSlots: k})
			if err != nil {
				t.Fatal(err)
			}
			defer func() {
				if err := c.Close(); err != nil {
					t.Error(err)
				}
			}()
			if w := cache.CliffWarning(budgetSlots*slot, ws); (w != "") != (budgetSlots > 0 && budgetSlots < layers*k) {
				t.Errorf("cliff warning %q", w)
			}
			ctx := context.Background()
			lanes, err := reader.Start(ctx, files, reader.LaneOptions{Lanes: 2, Queue: 0})
			if err != nil {
				t.Fatal(err)
			}
			defer lanes.Close()
			route := rand.New(rand.NewPCG(uint64(budgetSlots), 7))
			driveSteps(t, c, lanes, route, ranges, data, layers, experts, k)
			s := c.Stats()
			if s.PeakResidentBytes > budgetSlots*slot {
				t.Errorf("peak resident %d over budget %d", s.PeakResidentBytes, budgetSlots*slot)
			}
			if budgetSlots == layers*experts && s.Evictions != 0 {
				t.Errorf("%d evictions with room for every expert", s.Evictions)
			}
			if budgetSlots == 0 && s.Hits != 0 {
				t.Errorf("%d hits with budget 0", s.Hits)
			}
			hit, _ := s.Lookups().HitPct()
			t.Logf("hit rate %.1f %%, %d misses, %d transient, %d evictions, lanes read %d bytes",
				hit, s.Misses, s.Transient, s.Evictions, lanes.Stats().Bytes)
		})
	}
}

// driveSteps runs 12 decode steps over layers: per layer a Batch and k of
// the experts routed at random, each acquired, its miss read by the lanes,
// and consumed as the FFN does (wait, check its bytes against data,
// release).
func driveSteps(t *testing.T, c *cache.Cache, lanes *reader.Lanes, route *rand.Rand, ranges func(l, e int) []reader.Range, data []byte, layers, experts, k int) {
	t.Helper()
	ctx := context.Background()
	for step := range 12 {
		for l := range layers {
			c.Batch(step, l)
			var wg sync.WaitGroup
			for _, e := range route.Perm(experts)[:k] {
				key := cache.Key{Layer: l, Expert: e}
				rs := ranges(l, e)
				h, st, err := c.Acquire(ctx, key, reader.SpanBytes(rs))
				if err != nil {
					t.Fatal(err)
				}
				if st == cache.Miss {
					err := lanes.Submit(ctx, reader.Request{Buf: h.Buf(), Ranges: rs, Label: fmt.Sprintf("layer %d expert %d", l, e),
						Done: h.Complete})
					if err != nil {
						h.Complete(err)
					}
				}
				wg.Go(func() { // the FFN side
					defer h.Release()
					if err := h.Wait(ctx); err != nil {
						t.Error(err)
						return
					}
					views, err := reader.Views(nil, h.Buf(), rs)
					if err != nil {
						t.Error(err)
						return
					}
					for i, r := range rs {
						if !bytes.Equal(views[i], data[r.Off:r.Off+r.Len]) {
							t.Errorf("%v range %d: wrong bytes", key, i)
						}
					}
				})
			}
			wg.Wait()
		}
	}
}
