package decode

import (
	"context"
	"math"
	"runtime"
	"testing"

	"github.com/pipe-engine/pipe/sample"
	"github.com/pipe-engine/pipe/stages"
)

// genMallocs is the heap allocations of one Generate of n tokens on a new
// session of m (prompt ids, sampling p, callback on every token).
func genMallocs(t *testing.T, m *Model, p sample.Params, ids []int32, n int) uint64 {
	t.Helper()
	s, err := m.NewSession(SessionOptions{Sampling: p, Ctx: len(ids) + 200})
	if err != nil {
		t.Fatal(err)
	}
	var got int
	on := func(Token) error { got++; return nil }
	var a, b runtime.MemStats
	runtime.ReadMemStats(&a)
	if _, err := s.Generate(context.Background(), ids, GenOptions{MaxTokens: n, IgnoreEOS: true}, on); err != nil {
		t.Fatal(err)
	}
	runtime.ReadMemStats(&b)
	if got != n {
		t.Fatalf("%d tokens, want %d", got, n)
	}
	return b.Mallocs - a.Mallocs
}

// TestDecodeTokenAllocs: the library decode loop — forward pass, sampling,
// the sink's row, the callback — allocates almost nothing per generated
// token beyond the token's text, measured as the difference between a
// long and a short generation.
func TestDecodeTokenAllocs(t *testing.T) {
	m := open(t, stages.StreamOn, 256)
	ids, _, err := m.Encode(Prompt{Text: "Once upon a time"})
	if err != nil {
		t.Fatal(err)
	}
	for name, p := range map[string]sample.Params{
		"greedy": greedy,
		"temp":   {Temp: 0.8, TopK: 40, TopP: 0.95, MinP: 0.05, RepeatPenalty: 1, Seed: 1},
	} {
		t.Run(name, func(t *testing.T) {
			genMallocs(t, m, p, ids, 40) // warm: every expert the runs route to is resident
			// The process-wide malloc count also sees the engine's other
			// goroutines (sink, planner, lanes), whose allocations depend on
			// scheduling; the least of three measurements is the loop's own.
			per := math.Inf(1)
			for range 3 {
				short := genMallocs(t, m, p, ids, 8)
				long := genMallocs(t, m, p, ids, 72)
				per = min(per, float64(int64(long)-int64(short))/64)
			}
			t.Logf("%.2f allocations per token", per)
			if per > 2 {
				t.Errorf("%.2f allocations per decode token", per)
			}
		})
	}
}
