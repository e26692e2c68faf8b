package qwen35moe

import (
	"errors"
	"testing"

	"github.com/pipe-engine/pipe/gguf"
	"github.com/pipe-engine/pipe/model"
)

// TestCheckWideState: a delta-net head wider than 512 is accepted (the
// recurrence keeps no fixed-size scratch: kernels.DeltaRule takes any
// width), and a geometry whose inner size is not state size × value heads
// is still refused with ErrBadModel.
func TestCheckWideState(t *testing.T) {
	f, err := gguf.Open("../../testdata/golden/models/tiny-qwen35moe-F32.gguf")
	if err != nil {
		t.Fatal(err)
	}
	d, err := model.Describe(f)
	if err != nil {
		t.Fatal(err)
	}
	g := &d.HParams.SSM
	g.StateSize = 640
	g.InnerSize = g.StateSize * g.TimeStepRank
	if err := check(d); err != nil {
		t.Fatalf("state_size 640: %v", err)
	}
	g.InnerSize++
	if err := check(d); !errors.Is(err, model.ErrBadModel) {
		t.Fatalf("inner_size %d with state_size %d: %v, want ErrBadModel", g.InnerSize, g.StateSize, err)
	}
}
