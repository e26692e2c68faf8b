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
