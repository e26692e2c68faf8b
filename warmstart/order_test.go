package warmstart

import (
	"slices"
	"testing"
)

// TestOrderFollowsTheLayers: warm keys are taken layer by layer, from
// the layer after the last one looked up, wrapping around, hottest first
// within a layer — and the pipeline moving on moves the start.
func TestOrderFollowsTheLayers(t *testing.T) {
	keys := []Key{{Layer: 2, Expert: 5}, {Layer: 0, Expert: 3}, {Layer: 1, Expert: 1}, {Layer: 2, Expert: 0}, {Layer: 0, Expert: 4}, {Layer: 1, Expert: 2}}
	q := NewOrder(keys)
	var got []Key
	last := []int{-1, -1, -1, 2, 2, 0}
	for i := 0; ; i++ {
		k, ok := q.Next(last[min(i, len(last)-1)])
		if !ok {
			break
		}
		got = append(got, k)
	}
	want := []Key{{Layer: 0, Expert: 3}, {Layer: 0, Expert: 4}, {Layer: 1, Expert: 1}, {Layer: 1, Expert: 2}, {Layer: 2, Expert: 5}, {Layer: 2, Expert: 0}}
	// from the third key on, layer 0 is empty: after layer 2 comes layer 1, after layer 0 layer 2
	if !slices.Equal(got, want) {
		t.Errorf("order %v, want %v", got, want)
	}
	q = NewOrder(keys)
	if k, _ := q.Next(0); k != (Key{Layer: 1, Expert: 1}) {
		t.Errorf("after layer 0 the first key is %v, want L1/E1", k)
	}
	if k, _ := q.Next(1); k != (Key{Layer: 2, Expert: 5}) {
		t.Errorf("after layer 1 the first key is %v, want L2/E5", k)
	}
	if k, _ := q.Next(2); k != (Key{Layer: 0, Expert: 3}) {
		t.Errorf("after the last layer the first key is %v, want L0/E3 (wrapped)", k)
	}
}
