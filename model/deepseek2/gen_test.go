package deepseek2

import (
	"testing"

	"github.com/pipe-engine/pipe/model/gen"
)

// TestLayerCutSaysPlainQuery: a layer cut of deepseek-v2-lite (no low-rank
// query) writes attention.q_lora_rank 0, without which llama.cpp, which
// tells the lite variant by its 26 or 27 layers, refuses the cut ("key not
// found in model: deepseek2.attention.q_lora_rank"); the whole preset is
// written without the key, as the converter writes V2-Lite.
func TestLayerCutSaysPlainQuery(t *testing.T) {
	var lite gen.Preset
	for _, p := range (Family{}).Presets() {
		if p.Name == "deepseek-v2-lite" {
			lite = p
		}
	}
	if lite.QLoraRank != 0 || lite.NLayer != 27 {
		t.Fatalf("deepseek-v2-lite preset: q_lora_rank %d, %d layers; want 0 and 27", lite.QLoraRank, lite.NLayer)
	}
	qLora := func(p gen.Preset) (uint32, bool) {
		for _, kv := range (Family{}).Metadata(&p) {
			if kv.Key == "attention.q_lora_rank" {
				return kv.Value.(uint32), true
			}
		}
		return 0, false
	}
	if v, ok := qLora(lite); ok {
		t.Errorf("whole deepseek-v2-lite: attention.q_lora_rank %d written, want none", v)
	}
	cut := lite
	cut.NLayer = 8
	if v, ok := qLora(cut); !ok || v != 0 {
		t.Errorf("deepseek-v2-lite cut to 8 layers: attention.q_lora_rank %d (written %v), want 0", v, ok)
	}
}
