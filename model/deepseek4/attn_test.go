package deepseek4

import (
	"slices"
	"sort"
	"testing"
)

// TestPartialTopTies: the indexer's choice among tied scores is the one
// libstdc++'s std::partial_sort (ggml's top_k op) makes — the expected
// sets were printed by that std::partial_sort (g++ 12) on these arrays.
// A stable sort by score chooses {2, 6} on the second row (p2_capital's
// step 25 of the golden runs met such a tie: TestGoldenRuns fails there
// with a stable sort).
func TestPartialTopTies(t *testing.T) {
	for _, c := range []struct {
		score []float32
		k     int
		want  []int
	}{
		{[]float32{0, 0, 1, 2, 3}, 1, []int{4}},
		{[]float32{1, 1, 2, 2, 1, 0, 3, 2}, 2, []int{3, 6}},
		{[]float32{3, 3, 0, 1, 0, 1, 0, 3, 1, 3, 0}, 3, []int{0, 1, 7}},
		{[]float32{1, 0, 0, 0, 1, 2, 3, 2, 0, 3, 2, 2, 3, 3}, 4, []int{6, 9, 12, 13}},
		{[]float32{2, 3, 0, 1, 1, 2, 1, 0, 3, 0, 1, 1, 0, 1, 1, 1, 3}, 1, []int{1}},
		{[]float32{2, 2, 2, 2, 3, 0, 1, 1, 1, 3, 0, 0, 2, 1, 0, 0, 3, 2, 2, 2}, 2, []int{4, 9}},
	} {
		got := partialTop(c.score, c.k)
		sort.Ints(got)
		if !slices.Equal(got, c.want) {
			t.Errorf("partialTop(%v, %d) = %v, want %v", c.score, c.k, got, c.want)
		}
	}
}
