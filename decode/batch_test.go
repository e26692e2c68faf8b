package decode

import (
	"context"
	"errors"
	"slices"
	"strings"
	"sync"
	"testing"

	"github.com/pipe-engine/pipe/model"
	"github.com/pipe-engine/pipe/sample"
	"github.com/pipe-engine/pipe/stages"
)

// batchPrompts are n different prompts: the golden prompt's suffixes.
func batchPrompts(t *testing.T, n int) [][]int32 {
	g := loadGolden(t, "p1_village")
	out := make([][]int32, n)
	for i := range out {
		out[i] = g.PromptTokens[i%len(g.PromptTokens):]
		if i >= len(g.PromptTokens) {
			t.Fatal("too many prompts")
		}
	}
	return out
}

// soloRuns generates greedily from each prompt alone, on a fresh session.
func soloRuns(t *testing.T, m *Model, prompts [][]int32, n int) [][]int32 {
	t.Helper()
	out := make([][]int32, len(prompts))
	for i, p := range prompts {
		s, err := m.NewSession(SessionOptions{Sampling: greedy, Ctx: len(p) + n})
		if err != nil {
			t.Fatal(err)
		}
		res, err := s.Generate(context.Background(), p, GenOptions{MaxTokens: n}, nil)
		if err != nil {
			t.Fatal(err)
		}
		out[i] = res.Tokens
	}
	return out
}

func greedyChain(t *testing.T) *sample.Chain {
	c, err := sample.NewChain(greedy, sample.Hooks{})
	if err != nil {
		t.Fatal(err)
	}
	return c
}

func newBatch(t *testing.T, m *Model, o BatchOptions) *Batch {
	t.Helper()
	b, err := m.NewBatch(o)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(b.Close)
	return b
}

// TestBatchMatchesSolo: 6 concurrent greedy requests on 3 slots (the rest
// queue), prompts fed in chunks of 4 beside decoding slots, each get the
// tokens and text they get alone — streaming and mapped.
func TestBatchMatchesSolo(t *testing.T) {
	const n = 8
	for _, mode := range []stages.StreamMode{stages.StreamOn, stages.StreamOff} {
		t.Run(string(mode), func(t *testing.T) {
			m := open(t, mode, 0)
			prompts := batchPrompts(t, 6)
			want := soloRuns(t, m, prompts, n)
			b := newBatch(t, m, BatchOptions{Slots: 3, Ctx: 64, Ubatch: 4})
			alone := 0 // the passes the requests take one by one
			for _, p := range prompts {
				alone += (len(p)+3)/4 + n - 1
			}
			f0 := m.Forwards()
			var wg sync.WaitGroup
			got := make([]Result, len(prompts))
			texts := make([]string, len(prompts))
			errs := make([]error, len(prompts))
			for i, p := range prompts {
				wg.Add(1)
				go func() {
					defer wg.Done()
					var sb strings.Builder
					got[i], errs[i] = b.Generate(context.Background(), Request{IDs: p, Chain: greedyChain(t), MaxTokens: n},
						func(tk Token) error { sb.WriteString(tk.Text); return nil })
					texts[i] = sb.String()
				}()
			}
			wg.Wait()
			if passes := int(m.Forwards() - f0); passes >= alone {
				t.Errorf("%d passes for requests that take %d one by one: nothing was batched", passes, alone)
			}
			for i := range prompts {
				if errs[i] != nil {
					t.Fatalf("request %d: %v", i, errs[i])
				}
				if !slices.Equal(got[i].Tokens, want[i]) {
					t.Errorf("request %d: batched %v, alone %v", i, got[i].Tokens, want[i])
				}
				st := m.Tokenizer().NewStream(false)
				var ws strings.Builder
				for _, id := range want[i] {
					ws.WriteString(st.Add(id))
				}
				if s := ws.String() + st.Flush(); texts[i] != s {
					t.Errorf("request %d: text %q, want %q", i, texts[i], s)
				}
				if got[i].PromptTokens != len(prompts[i]) || got[i].Stop != StopLength {
					t.Errorf("request %d: %d prompt tokens fed (want %d), stop %v", i, got[i].PromptTokens, len(prompts[i]), got[i].Stop)
				}
			}
			if info := b.Slots(); len(info) != 3 || info[0].Ctx != 64 {
				t.Errorf("slots %+v", info)
			}
		})
	}
}

// TestBatchCancelFreesSlot: a request cancelled mid-generation ends with
// its context's error within one more token, a queued request cancelled
// ends too, and the one slot then serves the next request in full.
func TestBatchCancelFreesSlot(t *testing.T) {
	const n = 8
	m := open(t, stages.StreamOn, 0)
	prompts := batchPrompts(t, 2)
	want := soloRuns(t, m, prompts, n)
	b := newBatch(t, m, BatchOptions{Slots: 1, Ctx: 64})
	ctx, cancel := context.WithCancel(context.Background())
	qctx, qcancel := context.WithCancel(context.Background())
	queued := make(chan error, 1)
	seen := 0
	res, err := b.Generate(ctx, Request{IDs: prompts[0], Chain: greedyChain(t), MaxTokens: 40}, func(Token) error {
		if seen++; seen == 2 {
			go func() {
				_, err := b.Generate(qctx, Request{IDs: prompts[1], Chain: greedyChain(t), MaxTokens: n}, nil)
				queued <- err
			}()
			qcancel()
			cancel()
		}
		return nil
	})
	if !errors.Is(err, context.Canceled) || len(res.Tokens) > 3 {
		t.Fatalf("cancelled request: %v after %d tokens, want context.Canceled within 3", err, len(res.Tokens))
	}
	if err := <-queued; !errors.Is(err, context.Canceled) {
		t.Fatalf("cancelled queued request: %v", err)
	}
	got, err := b.Generate(context.Background(), Request{IDs: prompts[1], Chain: greedyChain(t), MaxTokens: n}, nil)
	if err != nil || !slices.Equal(got.Tokens, want[1]) {
		t.Fatalf("next request: %v %v, want %v", err, got.Tokens, want[1])
	}
}

// TestBatchPrefixSlot: a request goes to the slot whose cache holds its
// prompt's prefix (feeding only the rest) and continues as a whole-prompt
// run would; one without a shared prefix goes to the least recently used
// slot; MayReuse false feeds it all; an ErrStop token is not fed.
func TestBatchPrefixSlot(t *testing.T) {
	const n = 6
	m := open(t, stages.StreamOn, 0)
	g := loadGolden(t, "p1_village")
	a, other := g.PromptTokens[:len(g.PromptTokens)-3], g.PromptTokens[5:]
	whole := g.PromptTokens
	want := soloRuns(t, m, [][]int32{whole}, n)[0]
	b := newBatch(t, m, BatchOptions{Slots: 2, Ctx: 64, Similarity: 0.5})
	run := func(ids []int32, may func(int, []int32) bool) (Result, int) {
		t.Helper()
		got := -1
		res, err := b.Generate(context.Background(), Request{IDs: ids, Chain: greedyChain(t), MaxTokens: n, MayReuse: may,
			OnSlot: func(id int) { got = id }}, func(Token) error { return ErrStop })
		if err != nil {
			t.Fatal(err)
		}
		return res, got
	}
	_, sa := run(a, nil)
	_, so := run(other, nil)
	if sa == so {
		t.Fatalf("a prompt sharing nothing went to the busy-last slot %d again", sa)
	}
	if info := b.Slots(); info[sa].Tokens != len(a) {
		t.Fatalf("slot %d holds %d tokens, want the prompt's %d (the ErrStop token is not fed)", sa, info[sa].Tokens, len(a))
	}
	res, err := b.Generate(context.Background(), Request{IDs: whole, Chain: greedyChain(t), MaxTokens: n,
		OnSlot: func(id int) {
			if id != sa {
				t.Errorf("the extended prompt went to slot %d, not %d which holds its prefix", id, sa)
			}
		}}, nil)
	if err != nil {
		t.Fatal(err)
	}
	if res.PromptTokens != len(whole)-len(a) || !slices.Equal(res.Tokens, want) {
		t.Fatalf("fed %d prompt tokens (want %d), generated %v, want %v", res.PromptTokens, len(whole)-len(a), res.Tokens, want)
	}
	res, _ = run(whole, func(int, []int32) bool { return false })
	if res.PromptTokens != len(whole) {
		t.Fatalf("MayReuse false: fed %d prompt tokens, want all %d", res.PromptTokens, len(whole))
	}
}

// TestBatchClose: Close ends a running request with ErrBatchClosed, and a
// Generate after Close is refused with it.
func TestBatchClose(t *testing.T) {
	m := open(t, stages.StreamOn, 0)
	b, err := m.NewBatch(BatchOptions{Slots: 2, Ctx: 64})
	if err != nil {
		t.Fatal(err)
	}
	closed := make(chan struct{})
	_, err = b.Generate(context.Background(), Request{IDs: batchPrompts(t, 1)[0], Chain: greedyChain(t), MaxTokens: 40}, func(Token) error {
		select {
		case <-closed:
		default:
			go func() { b.Close(); close(closed) }()
		}
		return nil
	})
	if !errors.Is(err, ErrBatchClosed) {
		t.Fatalf("running request: %v, want ErrBatchClosed", err)
	}
	<-closed
	if _, err := b.Generate(context.Background(), Request{IDs: []int32{1}, Chain: greedyChain(t)}, nil); !errors.Is(err, ErrBatchClosed) {
		t.Fatalf("after Close: %v", err)
	}
	small, err := m.NewBatch(BatchOptions{Slots: 1, Ctx: 8})
	if err != nil {
		t.Fatal(err)
	}
	defer small.Close()
	long := make([]int32, 9)
	for _, r := range []Request{{IDs: long, MaxTokens: -1}, {IDs: long[:6], MaxTokens: 3}} {
		r.Chain = greedyChain(t)
		if _, err := small.Generate(context.Background(), r, nil); !errors.Is(err, model.ErrContextFull) {
			t.Errorf("%d prompt tokens + %d in a context of 8: %v, want ErrContextFull", len(r.IDs), r.MaxTokens, err)
		}
	}
	for _, o := range []BatchOptions{{Slots: 0, Ctx: 64}, {Slots: 2, Ctx: 1}, {Slots: 1, Ctx: 8, Similarity: 2}} {
		if _, err := m.NewBatch(o); !errors.Is(err, stages.ErrConfig) {
			t.Errorf("%+v: %v, want ErrConfig", o, err)
		}
	}
}

// TestBatchSlotFile: a slot saved after a request, erased and restored
// holds its tokens again, and a request extending them reuses them and
// generates what the whole prompt does; an action on a busy slot waits for
// its request to end (as llama-server defers it) and one whose context
// ends while it waits never runs; an unknown slot and a file of another
// context are refused; a Session restores a slot's file.
func TestBatchSlotFile(t *testing.T) {
	const n = 6
	m := open(t, stages.StreamOn, 0)
	g := loadGolden(t, "p1_village")
	head, whole := g.PromptTokens[:10], g.PromptTokens
	want := soloRuns(t, m, [][]int32{whole}, n)[0]
	sess, err := m.NewSession(SessionOptions{Sampling: greedy, Ctx: 64})
	if err != nil {
		t.Fatal(err)
	}
	b := newBatch(t, m, BatchOptions{Slots: 2, Ctx: 64, Similarity: 0.1})
	deferred := make(chan struct{}, 2)
	b.onDefer = func() { deferred <- struct{}{} }
	slotOf := -1
	type done struct {
		f   SlotFile
		n   int
		err error
	}
	saveDone, eraseDone := make(chan done, 1), make(chan done, 1)
	var saveBuf strings.Builder
	seen := 0
	if _, err := b.Generate(context.Background(), Request{IDs: head, Chain: greedyChain(t), MaxTokens: 3, IgnoreEOS: true,
		OnSlot: func(id int) { slotOf = id }}, func(Token) error {
		if seen++; seen > 1 {
			return nil
		}
		go func() { f, err := b.SaveSlot(context.Background(), slotOf, &saveBuf); saveDone <- done{f: f, err: err} }()
		<-deferred
		ctx, cancel := context.WithCancel(context.Background())
		go func() { n, err := b.EraseSlot(ctx, slotOf); eraseDone <- done{n: n, err: err} }()
		<-deferred
		cancel()
		if e := <-eraseDone; !errors.Is(e.err, context.Canceled) {
			t.Errorf("an erase whose context ended while it waited: %d %v", e.n, e.err)
		}
		return nil
	}); err != nil {
		t.Fatal(err)
	}
	if d := <-saveDone; d.err != nil || d.f.Tokens != len(head)+2 {
		t.Fatalf("a save deferred while the slot was busy: %+v %v, want the %d tokens the request left", d.f, d.err, len(head)+2)
	}
	if got := b.Slots()[slotOf].Tokens; got != len(head)+2 {
		t.Fatalf("the abandoned erase ran: %d tokens left", got)
	}
	if _, err := b.Generate(context.Background(), Request{IDs: head, Chain: greedyChain(t), MaxTokens: 1, PinSlot: true, Slot: slotOf, NoCache: true}, nil); err != nil {
		t.Fatal(err)
	}
	var file strings.Builder
	saved, err := b.SaveSlot(context.Background(), slotOf, &file)
	if err != nil || saved.Tokens != len(head) || saved.Bytes != int64(file.Len()) {
		t.Fatalf("save: %+v (%d bytes written) %v", saved, file.Len(), err)
	}
	if erased, err := b.EraseSlot(context.Background(), slotOf); err != nil || erased != len(head) || b.Slots()[slotOf].Tokens != 0 {
		t.Fatalf("erase: %d %v, %d tokens left", erased, err, b.Slots()[slotOf].Tokens)
	}
	if got, err := b.RestoreSlot(context.Background(), slotOf, strings.NewReader(file.String())); err != nil || got != saved {
		t.Fatalf("restore: %+v %v, want %+v", got, err, saved)
	}
	res, err := b.Generate(context.Background(), Request{IDs: whole, Chain: greedyChain(t), MaxTokens: n}, nil)
	if err != nil || res.PromptTokens != len(whole)-len(head) || !slices.Equal(res.Tokens, want) {
		t.Fatalf("after the restore: %v, fed %d, generated %v, want %v", err, res.PromptTokens, res.Tokens, want)
	}
	if _, err := b.SaveSlot(context.Background(), 7, &file); !errors.Is(err, ErrNoSlot) {
		t.Fatalf("slot 7: %v", err)
	}
	if got, err := sess.Restore(strings.NewReader(file.String())); err != nil || got != saved || len(sess.Tokens()) != len(head) {
		t.Fatalf("session restore: %+v %v", got, err)
	}
	small, err := m.NewBatch(BatchOptions{Slots: 1, Ctx: 4})
	if err != nil {
		t.Fatal(err)
	}
	defer small.Close()
	if _, err := small.RestoreSlot(context.Background(), 0, strings.NewReader(file.String())); !errors.Is(err, model.ErrStateFile) || small.Slots()[0].Tokens != 0 {
		t.Fatalf("restore into a smaller context: %v", err)
	}
}
