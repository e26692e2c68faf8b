package warmstart

import (
	"errors"
	"io/fs"
	"path/filepath"
	"slices"
	"testing"
)

// TestRunSavesItsRoutingsPlusTheDecayedHotSet: a run without a hot set
// starts cold (fs.ErrNotExist) and saves nothing until a token is routed;
// the next run reads what it saved, warm-starts from its hottest experts and
// saves its own counts plus Decay × the earlier ones.
func TestRunSavesItsRoutingsPlusTheDecayedHotSet(t *testing.T) {
	path := filepath.Join(t.TempDir(), "m.hot")
	shape := []int{3, 3}
	r, err := Start(path, hotID, shape)
	if !errors.Is(err, fs.ErrNotExist) || r == nil || r.Loaded() || r.Hottest() != nil || r.Path() != path {
		t.Fatalf("first run: %v %+v", err, r)
	}
	if saved, err := r.Save(""); saved || err != nil {
		t.Fatalf("Save with no routing: %v %v, want nothing written", saved, err)
	}
	r.Add(1, [][]int{{2, 0}, {2}})
	if saved, err := r.Save(""); !saved || err != nil {
		t.Fatalf("Save: %v %v", saved, err)
	}
	r2, err := Start(path, hotID, shape)
	if err != nil || !r2.Loaded() {
		t.Fatalf("second run: %v", err)
	}
	if got := r2.Hottest(); !slices.Equal(got, []Key{{1, 2}, {1, 0}}) {
		t.Errorf("Hottest %v", got)
	}
	r2.Add(0, [][]int{{1}})
	if h := r2.HotSet(); !slices.Equal(h.Pop[0], []float64{0, 1, 0}) || !slices.Equal(h.Pop[1], []float64{Decay, 0, 2 * Decay}) {
		t.Errorf("HotSet %v", h.Pop)
	}
	if _, err := Start(path, ModelID{Size: 1}, shape); !errors.Is(err, ErrStale) {
		t.Errorf("another model's run: %v, want ErrStale", err)
	}
}
