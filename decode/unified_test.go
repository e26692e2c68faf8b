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
	const pool, n = 40, 16
	prompts := [][]int32{p[0:4], p[4:8], p[8:12]}
	want := soloRuns(t, m, prompts, n) // no Session runs while a Batch is open
	long := soloRuns(t, m, [][]int32{p[:4]}, model.GrowStep+8)[0]
	big := newBatch(t, m, BatchOptions{Slots: 2, Ctx: model.GrowStep + 16, Unified: true})
	res, err := big.Generate(context.Background(), Request{IDs: p[:4], Chain: greedyChain(t), MaxTokens: len(long)}, nil)
	if err != nil || !slices.Equal(res.Tokens, long) {
		t.Fatalf("a request over the per-slot split: %v, %d tokens equal to solo: %v", err, len(res.Tokens), slices.Equal(res.Tokens, long))
	}
	if info := big.Slots(); info[0].Ctx != model.GrowStep+16 || info[1].Ctx != model.GrowStep+16 {
		t.Fatalf("slots %+v: each should have the whole pool as its context", info)
	}
	big.Close()

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

// TestBatchPinSlot: a request pinned to a slot (llama-server's id_slot)
// runs there, waits while that slot is busy without holding back a later
// request for any slot, and a slot outside the batch is ErrNoSlot.
func TestBatchPinSlot(t *testing.T) {
	m := open(t, stages.StreamOn, 0)
	prompts := batchPrompts(t, 3)
	want := soloRuns(t, m, prompts, 4)
	b := newBatch(t, m, BatchOptions{Slots: 2, Ctx: 64})
	hold, held := make(chan struct{}), make(chan struct{})
	type out struct {
		slot int
		res  Result
		err  error
	}
	run := func(i int, pin bool, onToken func(Token) error, done chan<- out) {
		o := out{slot: -1}
		o.res, o.err = b.Generate(context.Background(), Request{IDs: prompts[i], Chain: greedyChain(t), MaxTokens: 4, PinSlot: pin, Slot: 1,
			OnSlot: func(id int) { o.slot = id }}, onToken)
		done <- o
	}
	a, pinned, free := make(chan out, 1), make(chan out, 1), make(chan out, 1)
	first := true
	go run(0, true, func(Token) error {
		if first {
			first = false
			close(held)
			<-hold
		}
		return nil
	}, a)
	<-held // slot 1 is busy now
	go run(1, true, nil, pinned)
	go run(2, false, nil, free)
	c := <-free // runs on slot 0 while the pinned request waits
	close(hold)
	ra, rb := <-a, <-pinned
	for i, o := range []out{ra, rb, c} {
		wantSlot := []int{1, 1, 0}[i]
		if o.err != nil || o.slot != wantSlot || !slices.Equal(o.res.Tokens, want[i]) {
			t.Errorf("request %d: slot %d (want %d), %v, %v (alone %v)", i, o.slot, wantSlot, o.err, o.res.Tokens, want[i])
		}
	}
	if _, err := b.Generate(context.Background(), Request{IDs: prompts[0], Chain: greedyChain(t), PinSlot: true, Slot: 2}, nil); !errors.Is(err, ErrNoSlot) {
		t.Fatalf("slot 2 of 2: %v, want ErrNoSlot", err)
	}
}

// TestBatchSteps: every pass is reported as a Step (BatchOptions.OnStep),
// the steps' bytes, stall and lookups are the engine's, and the requests'
// shares (Result) add up to the steps' — each pass's I/O split among its
// tokens, prompt chunks to PrefillReadBytes, generated tokens to
// DecodeReadBytes and Lookups.
func TestBatchSteps(t *testing.T) {
	const n = 6
	m := open(t, stages.StreamOn, 0)
	prompts := batchPrompts(t, 3)
	var mu sync.Mutex
	var steps []Step
	b := newBatch(t, m, BatchOptions{Slots: 3, Ctx: 64, Ubatch: 4, OnStep: func(s Step) {
		mu.Lock()
		steps = append(steps, s)
		mu.Unlock()
	}})
	c0 := b.Counters()
	var wg sync.WaitGroup
	res := make([]Result, len(prompts))
	for i, p := range prompts {
		wg.Add(1)
		go func() {
			defer wg.Done()
			var err error
			if res[i], err = b.Generate(context.Background(), Request{IDs: p, Chain: greedyChain(t), MaxTokens: n}, nil); err != nil {
				t.Error(err)
			}
		}()
	}
	wg.Wait()
	d := b.Counters().Sub(c0)
	mu.Lock()
	defer mu.Unlock()
	var sum Step
	shared, fed := 0, 0
	for i, s := range steps {
		if s.Pass != int64(i+1) || s.Seqs < 1 || s.Tokens < s.Seqs || s.PromptTokens > s.Tokens {
			t.Fatalf("step %d: %+v", i, s)
		}
		if s.Seqs > 1 {
			shared++
		}
		fed += s.Tokens
		sum.ReadBytes += s.ReadBytes
		sum.Stall += s.Stall
		sum.Lookups = sum.Lookups.Add(s.Lookups)
	}
	want := 0
	for _, p := range prompts {
		want += len(p) + n - 1 // the last token is not fed
	}
	all := d.Decode.Add(d.Prompt)
	if shared == 0 || fed != want || sum.ReadBytes != d.ReadBytes || sum.Stall != d.Stall || sum.Lookups != all || d.ReadBytes == 0 {
		t.Fatalf("%d steps (%d shared) fed %d tokens (want %d), read %d B, stall %v, lookups %+v; the engine: %d B, %v, %+v",
			len(steps), shared, fed, want, sum.ReadBytes, sum.Stall, sum.Lookups, d.ReadBytes, d.Stall, all)
	}
	var got Result
	for _, r := range res {
		got.PrefillReadBytes += r.PrefillReadBytes + r.DecodeReadBytes
		got.Lookups = got.Lookups.Add(r.Lookups)
		got.Stall += r.Stall
	}
	near := func(a, b int64) bool { return a-b <= int64(len(res)) && b-a <= int64(len(res)) } // each share rounded
	if !near(got.PrefillReadBytes, d.ReadBytes) || !near(int64(got.Stall), int64(d.Stall)) || got.Lookups.Total() > all.Total()+int64(3*len(res)) {
		t.Fatalf("the requests' shares: %d B, %v, %+v; the steps': %d B, %v, %+v", got.PrefillReadBytes, got.Stall, got.Lookups, d.ReadBytes, d.Stall, all)
	}
}
