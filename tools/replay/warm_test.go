package replay

import (
	"bytes"
	"errors"
	"slices"
	"strings"
	"testing"

	"github.com/pipe-engine/pipe/warmstart"
)

// warmTrace: 1 layer, 8 experts of 1 byte, top-1 decode, 8 tokens: the first
// half routes 0,0,1,0, the second 0,1,2,0.
func warmTrace() string {
	var toks []tok
	for step, e := range []int{0, 0, 1, 0, 0, 1, 2, 0} {
		toks = append(toks, tok{1, step, 0, []int{e}})
	}
	return mkTrace([]int64{1}, 8, 1, toks)
}

// TestWarmStartHandComputed: with a budget of 2 bytes, the hot set of the
// first half is {0 (3 uses), 1 (1 use)}; cold, the second half (0,1,2,0)
// never hits (2 evicts 0 under lru); warm-started with {0, 1} it hits 0 and
// 1, then 2 evicts 0 (the least recent): 2 of 4; continued, the first half
// left {1, 0}: the same 2 of 4.
func TestWarmStartHandComputed(t *testing.T) {
	s := compileString(t, warmTrace())
	first, second := Split(s)
	if first.DecodeTokens != 4 || second.DecodeTokens != 4 {
		t.Fatalf("split %d + %d decode tokens", first.DecodeTokens, second.DecodeTokens)
	}
	if hot := HotSet(first).Hottest(10); !slices.Equal(hot, []warmstart.Key{{Layer: 0, Expert: 0}, {Layer: 0, Expert: 1}}) {
		t.Fatalf("hot set %v", hot)
	}
	if h := Head(second, 2); h.DecodeTokens != 2 || len(h.Batches) != 2 {
		t.Fatalf("head: %d tokens, %d batches", h.DecodeTokens, len(h.Batches))
	}
	r, err := WarmStart("warm", s, WarmOptions{Policies: []string{"lru"}, Budgets: []int64{2}, FirstTokens: 2})
	if err != nil {
		t.Fatal(err)
	}
	x := r.Rows[0]
	if x.Preloaded != 2 || x.ColdHead != 0 || x.WarmHead != 100 || x.ContinuedHead != 100 ||
		x.ColdAll != 0 || x.WarmAll != 50 || x.ContinuedAll != 50 {
		t.Errorf("row %+v", x)
	}
	var b bytes.Buffer
	if err := r.Write(&b, true); err != nil || !strings.Contains(b.String(), "| lru | 0.0000019073486328125 | 2 | 0.0 | 100.0 | 100.0 | 0.0 | 50.0 | 50.0 |") {
		t.Errorf("markdown (%v):\n%s", err, b.String())
	}
	if _, err := WarmStart("warm", s, WarmOptions{Policies: []string{"belady"}, Budgets: []int64{2}}); !errors.Is(err, ErrOptions) {
		t.Errorf("belady: %v", err)
	}
}

// TestWarmStartRealTraces: on the real traces a warm start never hits less
// than a cold start in the head window, preloads within the budget, and a
// continued cache is at least as good as a warm start at a large budget.
func TestWarmStartRealTraces(t *testing.T) {
	for _, name := range []string{"qwen", "gemma"} {
		s := loadReal(t, name)
		r, err := WarmStart(name, s, WarmOptions{Policies: []string{"lru", "layer"}, Budgets: []int64{2000 << 20, 6000 << 20}})
		if err != nil {
			t.Fatal(err)
		}
		for _, x := range r.Rows {
			eb := s.Header.Layers[0].ExpertBytes
			if x.WarmHead < x.ColdHead || int64(x.Preloaded)*min(eb, 2654208) > int64(x.BudgetMiB)<<20 {
				t.Errorf("%s %+v", name, x)
			}
			if x.BudgetMiB == 6000 && (x.WarmHead < x.ColdHead+10 || x.ContinuedHead < x.WarmHead) {
				t.Errorf("%s at 6000 MiB: %+v: want warm ≥ cold + 10 points, continued ≥ warm", name, x)
			}
		}
	}
}
