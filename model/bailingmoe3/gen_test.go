package bailingmoe3_test

import (
	"errors"
	"strings"
	"testing"

	"github.com/pipe-engine/pipe/model"
	"github.com/pipe-engine/pipe/model/gen"
)

// TestPresets: both presets pass the family's checks; the real shape has
// Ling-3.0-flash's layer pattern (35 KDA layers, MLA at every sixth) and
// its size (llama.cpp's LLM_TYPE_124B_A5_1B: about 124B parameters
// without the NextN layer, block 42, which carries the nextn tensors); a preset without the selection bias or with
// a latent width that is not KVLoraRank + NRot is refused.
func TestPresets(t *testing.T) {
	mf, ok := model.Lookup("bailingmoe3")
	if !ok {
		t.Fatal("bailingmoe3 not registered")
	}
	f := mf.(gen.Family)
	var params, kda, nextn int
	for _, p := range f.Presets() {
		if err := f.CheckPreset(&p); err != nil {
			t.Errorf("%s: %v", p.Name, err)
		}
		if p.Name != "ling-3.0-flash" {
			continue
		}
		for _, ts := range f.Tensors(&p, p.Vocab) {
			if ts.Layer == 42 && ts.Name == gen.Blk(42, "nextn.eh_proj.weight") {
				nextn++
			}
			if ts.Layer >= 42 && strings.HasPrefix(ts.Name, "blk.") {
				continue
			}
			n := 1
			for _, x := range ts.Dims {
				n *= int(x)
			}
			params += n
			if ts.Name == gen.Blk(ts.Layer, "ssm_f_a.weight") {
				kda++
			}
		}
		bad := p
		bad.ProbsBias = false
		if err := f.CheckPreset(&bad); !errors.Is(err, gen.ErrBadOptions) {
			t.Errorf("no exp_probs_b: %v", err)
		}
		bad = p
		bad.HeadDim = p.KVLoraRank
		if err := f.CheckPreset(&bad); !errors.Is(err, gen.ErrBadOptions) {
			t.Errorf("HeadDim %d: %v", bad.HeadDim, err)
		}
	}
	if nextn != 1 {
		t.Errorf("ling-3.0-flash writes %d NextN layers at block 42, want 1", nextn)
	}
	if kda != 35 {
		t.Errorf("ling-3.0-flash has %d KDA layers, want 35", kda)
	}
	if params < 123e9 || params > 125e9 {
		t.Errorf("ling-3.0-flash preset has %d parameters, want about 124e9", params)
	}
	t.Logf("ling-3.0-flash: %d parameters", params)
}
