package decode

import (
	"context"
	"errors"
	"slices"
	"sync"
	"testing"

	"github.com/pipe-engine/pipe/model"
	"github.com/pipe-engine/pipe/stages"
)

// TestBatchUnifiedPool: with BatchOptions.Unified the slots share one pool
// of Ctx positions. A request longer than Ctx/Slots runs (past a GrowStep
// of rows) and equals its solo run; an idle slot's cache is dropped when a
// request needs its room; three concurrent requests that together overflow
// the pool end the one holding the most with ErrPoolFull while the other two
// complete as they do alone.
func TestBatchUnifiedPool(t *testing.T) {
	m := open(t, stages.StreamOn, 0)
	g := loadGolden(t, "p1_village")
	p := g.PromptTokens
	long := soloRuns(t, m, [][]int32{p[:4]}, model.GrowStep+8)[0]
	big := newBatch(t, m, BatchOptions{Slots: 2, Ctx: model.GrowStep + 16, Unified: true})
	res, err := big.Generate(context.Background(), Request{IDs: p[:4], Chain: greedyChain(t), MaxTokens: len(long)}, nil)
	if err != nil || !slices.Equal(res.Tokens, long) {
		t.Fatalf("a request over the per-slot split: %v, %d tokens equal to solo: %v", err, len(res.Tokens), slices.Equal(res.Tokens, long))
	}
	if info := big.Slots(); info[0].Ctx != model.GrowStep+16 || info[1].Ctx != model.GrowStep+16 {
		t.Fatalf("slots %+v: each should have the whole pool as its context", info)
	}

	const pool, n = 40, 16
	prompts := [][]int32{p[0:4], p[4:8], p[8:12]}
	want := soloRuns(t, m, prompts, n)
	b := newBatch(t, m, BatchOptions{Slots: 3, Ctx: pool, Unified: true})
	first := -1
	if _, err := b.Generate(context.Background(), Request{IDs: p[:4], Chain: greedyChain(t), MaxTokens: 30,
		OnSlot: func(id int) { first = id }}, nil); err != nil {
		t.Fatal(err)
	}
	res, err = b.Generate(context.Background(), Request{IDs: prompts[1], Chain: greedyChain(t), MaxTokens: n}, nil)
	if err != nil || !slices.Equal(res.Tokens, want[1]) {
		t.Fatalf("a request needing an idle slot's room: %v, %v, want %v", err, res.Tokens, want[1])
	}
	if info := b.Slots(); info[first].Tokens != 0 {
		t.Fatalf("the idle slot %d still holds %d tokens beside a request that needed its room", first, info[first].Tokens)
	}

	var started, wg sync.WaitGroup
	started.Add(len(prompts))
	got := make([]Result, len(prompts))
	errs := make([]error, len(prompts))
	for i, pr := range prompts {
		wg.Add(1)
		go func() {
			defer wg.Done()
			seen := false
			got[i], errs[i] = b.Generate(context.Background(), Request{IDs: pr, Chain: greedyChain(t), MaxTokens: n, NoCache: true},
				func(Token) error {
					if !seen { // all three hold the pool before any goes on
						seen = true
						started.Done()
						started.Wait()
					}
					return nil
				})
		}()
	}
	wg.Wait()
	failed := 0
	for i := range prompts {
		switch {
		case errors.Is(errs[i], ErrPoolFull) && errors.Is(errs[i], model.ErrContextFull):
			failed++
		case errs[i] != nil:
			t.Errorf("request %d: %v", i, errs[i])
		case !slices.Equal(got[i].Tokens, want[i]):
			t.Errorf("request %d: %v, alone %v", i, got[i].Tokens, want[i])
		}
	}
	if failed != 1 {
		t.Fatalf("%d requests ended with ErrPoolFull; want 1 (3 × %d positions in a pool of %d, 2 fit)", failed, 4+n-1, pool)
	}
}
