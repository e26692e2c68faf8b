package minimaxm2_test

import (
	"errors"
	"testing"

	"github.com/pipe-engine/pipe/model"
	"github.com/pipe-engine/pipe/model/gen"
	_ "github.com/pipe-engine/pipe/model/minimaxm2"
)

// TestPresets: both presets pass the family's checks, the real shape's
// file is the size of MiniMax-M2 (about 229B parameters) and a preset
// without the selection bias or with experts narrower than
// feed_forward_length is refused.
func TestPresets(t *testing.T) {
	var f gen.Family
	for _, a := range []string{"minimax-m2"} {
		mf, ok := model.Lookup(a)
		if !ok {
			t.Fatalf("%s not registered", a)
		}
		f = mf.(gen.Family)
	}
	var params int
	for _, p := range f.Presets() {
		if err := f.CheckPreset(&p); err != nil {
			t.Errorf("%s: %v", p.Name, err)
		}
		if p.Name != "minimax-m2" {
			continue
		}
		for _, ts := range f.Tensors(&p, p.Vocab) {
			n := 1
			for _, x := range ts.Dims {
				n *= int(x)
			}
			params += n
		}
		bad := p
		bad.ProbsBias = false
		if err := f.CheckPreset(&bad); !errors.Is(err, gen.ErrBadOptions) {
			t.Errorf("no exp_probs_b: %v", err)
		}
		bad = p
		bad.NFF = 2 * p.NFFExp
		if err := f.CheckPreset(&bad); !errors.Is(err, gen.ErrBadOptions) {
			t.Errorf("NFF != NFFExp: %v", err)
		}
	}
	if params < 228e9 || params > 230e9 {
		t.Errorf("minimax-m2 preset has %d parameters, want about 229e9", params)
	}
}
