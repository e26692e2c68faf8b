package decode

import (
	"context"
	"errors"
	"math"
	"slices"
	"testing"

	"github.com/pipe-engine/pipe/model"
	"github.com/pipe-engine/pipe/stages"
)

// scoreRows scores ids on s from `from` and returns copies of the rows.
func scoreRows(t *testing.T, s *Session, ids []int32, from int) [][]float32 {
	return scoreBatch(t, s, ids, from, 0)
}

func scoreBatch(t *testing.T, s *Session, ids []int32, from, batch int) [][]float32 {
	t.Helper()
	var rows [][]float32
	_, err := s.Score(context.Background(), ids, from, batch, func(pos int, l []float32) error {
		if pos != from+len(rows) {
			t.Fatalf("position %d after %d rows from %d", pos, len(rows), from)
		}
		rows = append(rows, slices.Clone(l))
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	return rows
}

// TestScoreRewindsAndSpansPasses: Score starts every sequence at position 0
// (scoring one sequence after another gives the bits of a fresh session),
// and a sequence longer than one prompt pass hands over the rows of the
// later pass only, with the bits of a score from position 0.
func TestScoreRewindsAndSpansPasses(t *testing.T) {
	m := open(t, stages.StreamOn, 0)
	g := loadGolden(t, "p1_village")
	seq := make([]int32, 0, 530)
	for len(seq) < 530 {
		seq = append(seq, g.PromptTokens...)
		seq = append(seq, g.GeneratedTokens...)
	}
	seq = seq[:530]
	s, err := m.NewSession(SessionOptions{Ctx: 530, Sampling: greedy})
	if err != nil {
		t.Fatal(err)
	}
	all := scoreRows(t, s, seq, 0)
	if len(all) != 530 {
		t.Fatalf("%d rows, want 530", len(all))
	}
	late := scoreRows(t, s, seq, 515) // the first pass (512 tokens) scores nothing
	for i, r := range late {
		if !slices.Equal(r, all[515+i]) {
			t.Fatalf("position %d: scoring from 515 differs from scoring from 0", 515+i)
		}
	}
	other := scoreRows(t, s, seq[7:40], 0)
	again := scoreRows(t, s, seq[:40], 0)
	for i := range again {
		if !slices.Equal(again[i], all[i]) {
			t.Fatalf("position %d: a sequence scored after another differs from the first score", i)
		}
	}
	if slices.Equal(other[5], all[5]) {
		t.Fatal("different sequences scored the same logits")
	}
	if _, err := s.Score(context.Background(), seq[:10], 0, 0, func(int, []float32) error { return nil }); err != nil {
		t.Fatal(err)
	}
	if got := s.Tokens(); !slices.Equal(got, seq[:10]) {
		t.Fatalf("session holds %v after Score", got)
	}
	long := append(slices.Clone(seq), seq[:5]...)
	if _, err := s.Score(context.Background(), long, 0, 0, func(int, []float32) error { return nil }); !errors.Is(err, model.ErrContextFull) {
		t.Fatalf("535 tokens in a 530 context: err %v", err)
	}
}

// TestScoreTokenByToken: one token a forward pass (as decode runs) scores
// the same logits as one prompt pass, bit for bit.
func TestScoreTokenByToken(t *testing.T) {
	m := open(t, stages.StreamOn, 0)
	g := loadGolden(t, "p1_village")
	seq := append(slices.Clone(g.PromptTokens), g.GeneratedTokens...)
	s, err := m.NewSession(SessionOptions{Ctx: len(seq), Sampling: greedy})
	if err != nil {
		t.Fatal(err)
	}
	pass := scoreBatch(t, s, seq, 3, 0)
	each := scoreBatch(t, s, seq, 3, 1)
	if len(each) != len(seq)-3 {
		t.Fatalf("%d rows", len(each))
	}
	worst := 0.0
	for i := range each {
		for j := range each[i] {
			worst = max(worst, math.Abs(float64(each[i][j]-pass[i][j])))
		}
	}
	if worst != 0 {
		t.Fatalf("token-by-token logits differ from the prompt pass's by %g", worst)
	}
}
