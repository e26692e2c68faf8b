package nemotronh_test

import (
	"errors"
	"testing"

	"github.com/pipe-engine/pipe/model"
	"github.com/pipe-engine/pipe/model/gen"
)

// TestPresets: both presets pass the family's checks; the real shape's
// file has Nemotron 3 Nano's 31.6B parameters (NVIDIA's model card: 31.6B
// total) in 23 Mamba-2, 6 attention and 23 MoE blocks; its Mamba-2 in_proj
// is 10304 wide (2·4096 + 2·8·128 + 64); a preset without the shared
// expert or with Mamba-2 heads not in whole groups is refused.
func TestPresets(t *testing.T) {
	mf, ok := model.Lookup("nemotron_h_moe")
	if !ok {
		t.Fatal("nemotron_h_moe not registered")
	}
	f := mf.(gen.Family)
	var params int
	for _, p := range f.Presets() {
		if err := f.CheckPreset(&p); err != nil {
			t.Errorf("%s: %v", p.Name, err)
		}
		if p.Name != "nemotron-3-nano-30b-a3b" {
			continue
		}
		for _, ts := range f.Tensors(&p, p.Vocab) {
			n := 1
			for _, x := range ts.Dims {
				n *= int(x)
			}
			params += n
			if ts.Name == "blk.0.ssm_in.weight" && ts.Dims[1] != 10304 {
				t.Errorf("ssm_in is %v", ts.Dims)
			}
		}
		bad := p
		bad.NFFShExp = 0
		if err := f.CheckPreset(&bad); !errors.Is(err, gen.ErrBadOptions) {
			t.Errorf("no shared expert: %v", err)
		}
		bad = p
		bad.Hybrid.KeyHeads = 7
		if err := f.CheckPreset(&bad); !errors.Is(err, gen.ErrBadOptions) {
			t.Errorf("64 heads in 7 groups: %v", err)
		}
	}
	if params < 31.5e9 || params > 31.7e9 {
		t.Errorf("nemotron-3-nano-30b-a3b preset has %d parameters, want about 31.6e9", params)
	}
}
