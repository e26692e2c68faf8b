package glm4moe_test

import (
	"bytes"
	"os"
	"path/filepath"
	"testing"

	"github.com/pipe-engine/pipe/gguf"
	"github.com/pipe-engine/pipe/model/gen"
)

// genFile writes preset glm4moe-tiny with quant and seed into a temporary
// file and returns its bytes.
func genFile(t *testing.T, quant string, seed uint64) []byte {
	t.Helper()
	path := filepath.Join(t.TempDir(), "m.gguf")
	o := gen.Options{Preset: "glm4moe-tiny", Quant: quant, Seed: seed, RoutingSkew: gen.DefaultRoutingSkew}
	if _, err := gen.GenerateFile(t.Context(), o, path); err != nil {
		t.Fatal(err)
	}
	b, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	return b
}

// TestGenWritesGolden: `pipe gen --preset glm4moe-tiny --quant F32 --seed
// 3232` writes tiny-glm4moe-F32.gguf byte for byte (the preset, its
// tensors, metadata and weights have not changed since the goldens were
// made), another seed writes other weights, and --quant Q4_K_M gives every
// tensor the type llama-quantize gave it in tiny-glm4moe-Q4_K_M.gguf.
func TestGenWritesGolden(t *testing.T) {
	want, err := os.ReadFile(filepath.Join(golden, "models/tiny-glm4moe-F32.gguf"))
	if err != nil {
		t.Fatal(err)
	}
	if got := genFile(t, "F32", 3232); !bytes.Equal(got, want) {
		t.Fatalf("pipe gen --seed 3232 --quant F32 (%d bytes) differs from tiny-glm4moe-F32.gguf (%d bytes)", len(got), len(want))
	}
	if other := genFile(t, "F32", 3233); len(other) != len(want) || bytes.Equal(other, want) {
		t.Errorf("seed 3233: %d bytes, equal to seed 3232's: %v", len(other), bytes.Equal(other, want))
	}
	path := filepath.Join(t.TempDir(), "q.gguf")
	if err := os.WriteFile(path, genFile(t, "Q4_K_M", 3232), 0o644); err != nil {
		t.Fatal(err)
	}
	got, err := gguf.Open(path)
	if err != nil {
		t.Fatal(err)
	}
	ref, err := gguf.Open(filepath.Join(golden, "models/tiny-glm4moe-Q4_K_M.gguf"))
	if err != nil {
		t.Fatal(err)
	}
	types := map[string]string{}
	for _, ti := range ref.Tensors {
		types[ti.Name] = ti.Type.String()
	}
	if len(got.Tensors) != len(ref.Tensors) {
		t.Fatalf("%d tensors, llama-quantize's file has %d", len(got.Tensors), len(ref.Tensors))
	}
	for _, ti := range got.Tensors {
		if types[ti.Name] != ti.Type.String() {
			t.Errorf("%s: %s, llama-quantize %s", ti.Name, ti.Type, types[ti.Name])
		}
	}
}
