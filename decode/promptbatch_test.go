package decode

import (
	"context"
	"math"
	"slices"
	"strings"
	"testing"

	"github.com/pipe-engine/pipe/stages"
)

// TestPromptBatch: GenOptions.Batch cuts the prompt pass into batches
// (llama.cpp's n_batch), OnPrompt sees each with the tokens fed so far,
// and the first logits and the generated tokens are the same bits whatever
// the batch (1, 7, a whole-prompt one, the default).
func TestPromptBatch(t *testing.T) {
	m := open(t, stages.StreamOn, 256)
	ids, _, err := m.Encode(Prompt{Text: strings.Repeat("This is a test ", 12)})
	if err != nil {
		t.Fatal(err)
	}
	type run struct {
		logits []uint32
		toks   []int32
		fed    []int
	}
	gen := func(batch int) run {
		s, err := m.NewSession(SessionOptions{Sampling: greedy})
		if err != nil {
			t.Fatal(err)
		}
		var r run
		o := GenOptions{MaxTokens: 4, Batch: batch, OnPrompt: func(fed int) error { r.fed = append(r.fed, fed); return nil }}
		o.OnLogits = func(l []float32) error {
			if r.logits == nil {
				for _, v := range l {
					r.logits = append(r.logits, math.Float32bits(v))
				}
			}
			return nil
		}
		res, err := s.Generate(context.Background(), ids, o, nil)
		if err != nil {
			t.Fatal(err)
		}
		r.toks = res.Tokens
		return r
	}
	base := gen(0)
	if want := []int{len(ids)}; !slices.Equal(base.fed, want) {
		t.Errorf("default batch: fed %v, want %v", base.fed, want)
	}
	for _, b := range []int{1, 7, len(ids)} {
		r := gen(b)
		var want []int
		for f := b; f < len(ids)+b; f += b {
			want = append(want, min(f, len(ids)))
		}
		if !slices.Equal(r.fed, want) {
			t.Errorf("batch %d: fed %v, want %v", b, r.fed, want)
		}
		if !slices.Equal(r.logits, base.logits) || !slices.Equal(r.toks, base.toks) {
			t.Errorf("batch %d: logits or tokens %v differ from the default batch's %v", b, r.toks, base.toks)
		}
	}
}

// TestBatchOnPrompt: a Batch request's OnPrompt sees its slot's start
// (cached, 0) and then each Batch of the prompt fed (passes of Ubatch 4,
// reports at the 8-token boundaries and the end), all before the first
// token; the tokens are those the request gets alone. The same prompt
// again reuses the slot's cache: the start reports it as cached.
func TestBatchOnPrompt(t *testing.T) {
	m := open(t, stages.StreamOn, 0)
	p := batchPrompts(t, 1)[0][:13] // passes of 4: reports at 8 and 13
	want := soloRuns(t, m, [][]int32{p}, 3)[0]
	b := newBatch(t, m, BatchOptions{Slots: 1, Ctx: 64, Ubatch: 4})
	gen := func() (reports [][2]int) {
		tokens := 0
		onPrompt := func(cached, fed int) error {
			if tokens > 0 {
				t.Errorf("prompt report (%d, %d) after a token", cached, fed)
			}
			reports = append(reports, [2]int{cached, fed})
			return nil
		}
		res, err := b.Generate(context.Background(), Request{IDs: p, Chain: greedyChain(t), MaxTokens: 3, Batch: 8, OnPrompt: onPrompt},
			func(Token) error { tokens++; return nil })
		if err != nil {
			t.Fatal(err)
		}
		if !slices.Equal(res.Tokens, want) {
			t.Errorf("tokens %v, alone %v", res.Tokens, want)
		}
		return reports
	}
	got := gen()
	t.Logf("prompt of %d tokens: reports %v", len(p), got)
	wantR := [][2]int{{0, 0}}
	for f := 8; f < len(p)+8; f += 8 {
		wantR = append(wantR, [2]int{0, min(f, len(p))})
	}
	if !slices.Equal(got, wantR) {
		t.Errorf("reports %v, want %v (prompt of %d)", got, wantR, len(p))
	}
	got = gen()
	if len(got) < 2 || got[0][0] <= 0 || got[0][1] != 0 || got[len(got)-1][0]+got[len(got)-1][1] != len(p) {
		t.Errorf("cached prompt's reports %v (prompt of %d)", got, len(p))
	}
}
