package deepseek4_test

import (
	"errors"
	"strings"
	"testing"

	"github.com/pipe-engine/pipe/model"
	"github.com/pipe-engine/pipe/model/gen"
)

// TestPresets: both presets pass the family's checks; the real shape has
// DeepSeek-V4-Flash's layer pattern (2 window-only layers, 21 CSA layers
// with an indexer, 20 HCA layers, 3 hash-routed layers) and its size (284B
// parameters without the MTP layer, as deepseek-ai names the model); a
// preset with two KV heads is refused.
func TestPresets(t *testing.T) {
	mf, ok := model.Lookup("deepseek4")
	if !ok {
		t.Fatal("deepseek4 not registered")
	}
	f := mf.(gen.Family)
	var params, idx, hca, hash int
	for _, p := range f.Presets() {
		if err := f.CheckPreset(&p); err != nil {
			t.Errorf("%s: %v", p.Name, err)
		}
		if p.Name != "deepseek-v4-flash" {
			continue
		}
		for _, ts := range f.Tensors(&p, p.Vocab) {
			n := 1
			for _, x := range ts.Dims {
				n *= int(x)
			}
			params += n
			switch {
			case strings.HasSuffix(ts.Name, "indexer.proj.weight"):
				idx++
			case strings.HasSuffix(ts.Name, "attn_compressor_ape.weight") && ts.Dims[1] == 128:
				hca++
			case strings.HasSuffix(ts.Name, "ffn_gate_tid2eid.weight"):
				hash++
			}
		}
		bad := p
		bad.NHeadKV = 2
		if err := f.CheckPreset(&bad); !errors.Is(err, gen.ErrBadOptions) {
			t.Errorf("two KV heads: %v", err)
		}
	}
	if idx != 21 || hca != 20 || hash != 3 {
		t.Errorf("deepseek-v4-flash: %d CSA, %d HCA, %d hash layers; want 21, 20, 3", idx, hca, hash)
	}
	if params < 280e9 || params > 288e9 {
		t.Errorf("deepseek-v4-flash preset has %d parameters, want about 284e9", params)
	}
	t.Logf("deepseek-v4-flash: %d parameters", params)
}
