package warmstart

import (
	"slices"
	"testing"
)

// TestGuardReleasesALayerWhenThePipelineLeavesIt: keys stay protected
// through every wave of their layer's lookups and are released, all of
// them, when the batches move to another layer; a key without a layer is
// never protected.
func TestGuardReleasesALayerWhenThePipelineLeavesIt(t *testing.T) {
	var g Guard
	if g.Active() || g.Protect(Key{Layer: -1, Expert: 0}) {
		t.Fatal("a zero Guard is active, or protected a key without a layer")
	}
	g.Protect(Key{2, 0})
	g.Protect(Key{2, 1})
	g.Protect(Key{0, 3})
	for _, b := range []struct{ step, layer int }{{0, 0}, {0, 1}, {0, 2}, {0, 2}} {
		if got := g.Pass(b.step, b.layer); b.layer != 1 && len(got) > 0 || b.layer == 1 && !slices.Equal(got, []Key{{0, 3}}) {
			t.Fatalf("Pass(%d, %d) released %v", b.step, b.layer, got)
		}
	}
	if !g.Active() {
		t.Fatal("layer 2's keys were released while its lookups went on")
	}
	if got := g.Pass(1, 0); !slices.Equal(got, []Key{{2, 0}, {2, 1}}) || g.Active() {
		t.Fatalf("leaving layer 2 released %v (active %v), want both its keys and none left", got, g.Active())
	}
}
