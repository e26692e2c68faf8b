package archs_test

import (
	"testing"

	"github.com/pipe-engine/pipe/gguf"
	"github.com/pipe-engine/pipe/model"
	"github.com/pipe-engine/pipe/model/family"
	"github.com/pipe-engine/pipe/model/gen"
)

// TestStateBytes: the per-sequence state every family reports for its
// tiny golden model, at 512 positions of F16 and 4096 of F32, is what the
// engine sized before families answered it (the HParams formula), written
// out per family.
func TestStateBytes(t *testing.T) {
	kv := func(layers, row, pos, elem int) int64 { return int64(layers * row * pos * elem) }
	for _, c := range []struct {
		file     string
		f16, f32 int64
	}{
		// 3 layers × K,V of 4 heads × 64
		{"tiny-olmoe-F32.gguf", kv(3, 2*4*64, 512, 2), kv(3, 2*4*64, 4096, 4)},
		// 3 layers × K,V of 2 heads × 64
		{"tiny-qwen2moe-F32.gguf", kv(3, 2*2*64, 512, 2), kv(3, 2*2*64, 4096, 4)},
		// 4 layers × K,V of 2 heads × 64
		{"tiny-qwen3moe-F32.gguf", kv(4, 2*2*64, 512, 2), kv(4, 2*2*64, 4096, 4)},
		{"tiny-gptoss-Q8_0.gguf", kv(4, 2*2*64, 512, 2), kv(4, 2*2*64, 4096, 4)},
		// 2 attention layers × K,V of 2 heads × 64, 2 short-conv layers ×
		// (l_cache 3 - 1) × n_embd 256 float32
		{"tiny-lfm2moe-F32.gguf", kv(2, 2*2*64, 512, 2) + 2*2*256*4, kv(2, 2*2*64, 4096, 4) + 2*2*256*4},
		// 4 layers × the latent (kv_lora_rank 64 + n_rot 32)
		{"tiny-deepseek2-F32.gguf", kv(4, 64+32, 512, 2), kv(4, 64+32, 4096, 4)},
		// as the HParams formula sized them
		{"tiny-gemma4-F32.gguf", 1572864, 25165824},
		{"tiny-qwen35moe-F32.gguf", 563200, 8427520},
	} {
		f, err := gguf.Open("../../testdata/golden/models/" + c.file)
		if err != nil {
			t.Fatal(err)
		}
		d, err := model.Describe(f)
		if err != nil {
			t.Fatal(err)
		}
		if got := model.StateBytes(d, 512, 2); got != c.f16 {
			t.Errorf("%s: StateBytes(512, f16) = %d, want %d", c.file, got, c.f16)
		}
		if got := model.StateBytes(d, 4096, 4); got != c.f32 {
			t.Errorf("%s: StateBytes(4096, f32) = %d, want %d", c.file, got, c.f32)
		}
	}
}

// TestFamiliesRegisterBothSides: every architecture registered as a whole
// family.Family has its presets in gen, each of its architecture.
func TestFamiliesRegisterBothSides(t *testing.T) {
	byArch := map[string]int{}
	for _, p := range gen.Presets() {
		byArch[p.Arch]++
	}
	moved := 0
	for _, arch := range model.Architectures() {
		f, _ := model.Lookup(arch)
		if _, whole := f.(family.Family); !whole {
			continue
		}
		moved++
		if byArch[arch] == 0 {
			t.Errorf("family %s has no gen preset", arch)
		}
	}
	if moved == 0 {
		t.Fatal("no architecture is registered as a family.Family")
	}
}
