package gen_test

// families_test.go: the tests that cover every preset, built-in or
// registered by a family package (which imports gen, so these tests live
// outside package gen and import model/archs). The import also registers
// every family for package gen's internal tests, which share this test
// binary (they use presets such as gemma4-tiny by name).

import (
	"bytes"
	"context"
	"crypto/sha256"
	"encoding/binary"
	"fmt"
	"os"
	"path/filepath"
	"reflect"
	"sort"
	"strings"
	"testing"

	"github.com/pipe-engine/pipe/gguf"
	_ "github.com/pipe-engine/pipe/model/archs"
	"github.com/pipe-engine/pipe/model/gen"
	"github.com/pipe-engine/pipe/quant"
)

const goldenModels = "../../testdata/golden/models"

func genFile(t *testing.T, o gen.Options) (string, *gen.Result) {
	t.Helper()
	path := filepath.Join(t.TempDir(), o.Preset+".gguf")
	res, err := gen.GenerateFile(context.Background(), o, path)
	if err != nil {
		t.Fatalf("GenerateFile(%+v): %v", o, err)
	}
	return path, res
}

// TestTinyMatchesGolden: a generated tiny model has llama.cpp's golden tiny
// model's tensors (names, order, shapes, types chosen by llama-quantize) and
// metadata (keys, order, hyper-parameter values) for every quantization the
// golden set has. The gemma4 golden files are gemma4-tiny cut to 3 layers
// with the two rope.dimension_count keys appended by gguf-py (so their key
// order is compared as a set): they show llama.cpp loads pipe gen's keys.
func TestTinyMatchesGolden(t *testing.T) {
	cases := []struct{ preset, golden, quant string }{
		{"gemma4-tiny", "tiny-gemma4-Q4_K_M.gguf", "Q4_K_M"},
		{"gemma4-tiny", "tiny-gemma4-Q8_0.gguf", "Q8_0"},
		{"gemma4-tiny", "tiny-gemma4-F32.gguf", "F32"},
		{"qwen3-tiny", "tiny-qwen3moe-Q4_K_M.gguf", "Q4_K_M"},
		{"qwen3-tiny", "tiny-qwen3moe-Q8_0.gguf", "Q8_0"},
		{"qwen3-tiny", "tiny-qwen3moe-Q4_0.gguf", "Q4_0"},
		{"qwen3-tiny", "tiny-qwen3moe-F16.gguf", "F16"},
		{"qwen3-tiny", "tiny-qwen3moe-MXFP4_MOE.gguf", "MXFP4"},
		{"gptoss-tiny", "tiny-gptoss-Q4_K_M.gguf", "Q4_K_M"},
		{"gptoss-tiny", "tiny-gptoss-Q8_0.gguf", "Q8_0"},
		{"gptoss-tiny", "tiny-gptoss-MXFP4_MOE.gguf", ""},
		{"qwen35moe-tiny", "tiny-qwen35moe-Q4_K_M.gguf", "Q4_K_M"}, // llama-quantize of the F32 file
		{"qwen35moe-tiny", "tiny-qwen35moe-Q8_0.gguf", "Q8_0"},
		{"qwen35moe-tiny", "tiny-qwen35moe-F32.gguf", "F32"},   // pipe gen's own (seed 90417)
		{"lfm2moe-tiny", "tiny-lfm2moe-Q4_K_M.gguf", "Q4_K_M"}, // llama-quantize of the F32 file
		{"lfm2moe-tiny", "tiny-lfm2moe-Q8_0.gguf", "Q8_0"},
		{"lfm2moe-tiny", "tiny-lfm2moe-F32.gguf", "F32"}, // pipe gen's own (seed 61721)
	}
	for _, c := range cases {
		if testing.Short() && c.quant != "Q4_K_M" {
			continue
		}
		t.Run(c.golden, func(t *testing.T) {
			ref, err := gguf.Open(filepath.Join(goldenModels, c.golden))
			if err != nil {
				t.Fatal(err)
			}
			o := gen.Options{Preset: c.preset, Quant: c.quant, Seed: 7, RoutingSkew: gen.DefaultRoutingSkew}
			if c.preset == "gemma4-tiny" {
				o.Layers = 3
			}
			path, _ := genFile(t, o)
			got, err := gguf.Open(path)
			if err != nil {
				t.Fatal(err)
			}
			if len(got.Tensors) != len(ref.Tensors) {
				t.Fatalf("%d tensors, golden has %d", len(got.Tensors), len(ref.Tensors))
			}
			for i := range ref.Tensors {
				g, r := got.Tensors[i], ref.Tensors[i]
				if g.Name != r.Name || g.Type != r.Type || !reflect.DeepEqual(g.Dims, r.Dims) || g.Size != r.Size || g.RelOff != r.RelOff {
					t.Errorf("tensor %d: got %s %s %v size %d off %d, golden %s %s %v size %d off %d",
						i, g.Name, g.Type, g.Dims, g.Size, g.RelOff, r.Name, r.Type, r.Dims, r.Size, r.RelOff)
				}
			}
			skip := func(k string) bool {
				return k == "general.name" || k == "general.description" || strings.HasPrefix(k, "pipe.gen.")
			}
			var gk, rk []string
			for _, kv := range got.KV {
				if !skip(kv.Key) {
					gk = append(gk, kv.Key)
				}
			}
			for _, kv := range ref.KV {
				if !skip(kv.Key) {
					rk = append(rk, kv.Key)
				}
			}
			if c.preset == "gemma4-tiny" {
				sort.Strings(gk)
				sort.Strings(rk)
			}
			if !reflect.DeepEqual(gk, rk) {
				t.Errorf("metadata keys\n got %v\nwant %v", gk, rk)
			}
			for _, kv := range ref.KV {
				if skip(kv.Key) || strings.HasPrefix(kv.Key, "tokenizer.ggml.merges") || kv.Key == "tokenizer.ggml.tokens" || kv.Key == "tokenizer.chat_template" {
					continue
				}
				gv, ok := got.Get(kv.Key)
				if !ok {
					continue // reported above
				}
				if gv.Type != kv.Value.Type || gv.Elem != kv.Value.Elem || gv.String() != kv.Value.String() {
					t.Errorf("%s = %v (%s), golden %v (%s)", kv.Key, gv, gv.Type, kv.Value, kv.Value.Type)
				}
			}
		})
	}
}

// TestPresetsRoundTrip: every preset at --layers 1 writes a file gguf.Open
// reads back with the planned names, types, shapes and sizes, and whose
// quantized data dequantizes to finite values.
//
// A real-size preset whose one-layer plan has the same architecture,
// tensor names and types as a smaller real-size preset's (qwen3-235b-a22b
// beside qwen3-30b-a3b, gpt-oss-120b beside gpt-oss-20b) differs only in
// dimensions, which the plan checks here and TestPresetExpertBytes cover:
// only the smaller one is written (the two larger were 3 GiB and a quarter
// of the test's time). Real and tiny presets are not paired: a real one
// takes the generator's pooled path.
// With -short (the race and arm64 passes) presets over 16 MiB at one layer
// are left to the plain pass.
func TestPresetsRoundTrip(t *testing.T) {
	o := func(name string) gen.Options {
		return gen.Options{Preset: name, Layers: 1, VocabSize: 300, Seed: 3, RoutingSkew: gen.DefaultRoutingSkew}
	}
	smallest := map[string]*gen.Model{} // by tensorsKey
	for _, p := range gen.Presets() {
		m, err := gen.Prepare(o(p.Name))
		if err != nil {
			t.Fatalf("%s: %v", p.Name, err)
		}
		if k := tensorsKey(m); smallest[k] == nil || m.Plan.TotalBytes() < smallest[k].Plan.TotalBytes() {
			smallest[k] = m
		}
	}
	for _, p := range gen.Presets() {
		t.Run(p.Name, func(t *testing.T) {
			o := o(p.Name)
			m, err := gen.Prepare(o)
			if err != nil {
				t.Fatal(err)
			}
			if s := smallest[tensorsKey(m)]; s.Options.Preset != p.Name {
				t.Logf("%s: same tensors and types as %s, which is written", p.Name, s.Options.Preset)
				return
			}
			if testing.Short() && m.Plan.TotalBytes() > 16<<20 {
				t.Skipf("%s at 1 layer is %d MiB; run without -short", p.Name, m.Plan.TotalBytes()>>20)
			}
			path, res := genFile(t, o)
			f, err := gguf.Open(path)
			if err != nil {
				t.Fatal(err)
			}
			st, _ := os.Stat(path)
			if st.Size() != res.Bytes {
				t.Errorf("file is %d bytes, Write reported %d", st.Size(), res.Bytes)
			}
			if len(f.Tensors) != len(m.Plan.Tensors) {
				t.Fatalf("%d tensors, planned %d", len(f.Tensors), len(m.Plan.Tensors))
			}
			for i, want := range m.Plan.Tensors {
				got := f.Tensors[i]
				if got.Name != want.Name || got.Type != want.Type || !reflect.DeepEqual(got.Dims, want.Dims) || got.Size != want.Bytes() {
					t.Errorf("tensor %d: %s %s %v %d, planned %s %s %v %d", i, got.Name, got.Type, got.Dims, got.Size, want.Name, want.Type, want.Dims, want.Bytes())
				}
			}
			if arch, _ := f.GetString("general.architecture"); arch != p.Arch {
				t.Errorf("general.architecture %q, want %q", arch, p.Arch)
			}
			if n, _ := f.GetUint(p.Arch + ".block_count"); n != 1 {
				t.Errorf("block_count %d, want 1", n)
			}
			checkFinite(t, f)
		})
	}
}

// tensorsKey is a plan's size class (over 64 MiB or not), architecture and
// its tensors' names and types.
func tensorsKey(m *gen.Model) string {
	var b strings.Builder
	fmt.Fprintf(&b, "%v %s", m.Plan.TotalBytes() > 64<<20, m.Plan.Preset.Arch)
	for _, ts := range m.Plan.Tensors {
		fmt.Fprintf(&b, " %s:%v", ts.Name, ts.Type)
	}
	return b.String()
}

// checkFinite dequantizes the first rows of every tensor (an I32 one: its ids)
// and checks they are finite and not all equal.
func checkFinite(t *testing.T, f *gguf.File) {
	t.Helper()
	fd, err := os.Open(f.Path)
	if err != nil {
		t.Fatal(err)
	}
	defer fd.Close()
	for _, ti := range f.Tensors {
		ne0 := int(ti.Dims[0])
		rows := min(int(ti.Elements())/ne0, 4)
		buf := make([]byte, int(ti.RowSize())*rows)
		if _, err := fd.ReadAt(buf, int64(ti.Offset)); err != nil {
			t.Fatalf("%s: %v", ti.Name, err)
		}
		x := make([]float32, ne0*rows)
		if ti.Type == quant.I32 { // expert ids (RoleExpertIDs): small non-negative integers
			for i := range x {
				if id := int32(binary.LittleEndian.Uint32(buf[4*i:])); id < 0 || id >= 1<<16 {
					t.Fatalf("%s: id %d", ti.Name, id)
				} else {
					x[i] = float32(id)
				}
			}
		} else if err := quant.Dequantize(ti.Type, buf, x); err != nil {
			t.Fatalf("%s: %v", ti.Name, err)
		}
		distinct := map[float32]bool{}
		for _, v := range x {
			if v == 1e30 && strings.Contains(ti.Name, "rope_freqs") {
				continue // llama.cpp's converter's mark of an unrotated pair
			}
			if v != v || v > 1e6 || v < -1e6 {
				t.Fatalf("%s: non-finite or huge value %v", ti.Name, v)
			}
			distinct[v] = true
		}
		if len(x) > 8 && len(distinct) < 2 && !strings.Contains(ti.Name, "scale") && !strings.Contains(ti.Name, "rope_freqs") {
			t.Errorf("%s: constant data", ti.Name)
		}
	}
}

// TestRegeneratesGoldenFiles: the golden models pipe gen wrote (the seeds
// testdata/golden/README.md names, llama.cpp's Q4_K_M of them equal to pipe
// gen's own) are written again byte for byte: a family's presets, tensor
// list, metadata, tokenizer and weights do not change when the family moves
// (or anything else changes in gen) unless the goldens are remade.
func TestRegeneratesGoldenFiles(t *testing.T) {
	cases := []struct {
		preset, quant string
		seed          uint64
		golden        string
	}{
		{"olmoe-tiny", "F32", 2208, "tiny-olmoe-F32.gguf"},
		{"olmoe-tiny", "Q4_K_M", 2208, "tiny-olmoe-Q4_K_M.gguf"},
		{"qwen2moe-tiny", "F32", 2207, "tiny-qwen2moe-F32.gguf"},
		{"qwen2moe-tiny", "Q4_K_M", 2207, "tiny-qwen2moe-Q4_K_M.gguf"},
		{"lfm2moe-tiny", "F32", 61721, "tiny-lfm2moe-F32.gguf"},
		{"lfm2moe-tiny", "Q4_K_M", 61721, "tiny-lfm2moe-Q4_K_M.gguf"},
		{"qwen35moe-tiny", "F32", 90417, "tiny-qwen35moe-F32.gguf"},
		{"deepseek2-tiny", "F32", 2222, "tiny-deepseek2-F32.gguf"},
	}
	for _, c := range cases {
		if testing.Short() && c.quant != "Q4_K_M" {
			continue
		}
		t.Run(c.golden, func(t *testing.T) {
			want, err := os.ReadFile(filepath.Join(goldenModels, c.golden))
			if err != nil {
				t.Fatal(err)
			}
			h := sha256.New()
			o := gen.Options{Preset: c.preset, Quant: c.quant, Seed: c.seed, RoutingSkew: gen.DefaultRoutingSkew}
			if _, err := gen.Generate(context.Background(), o, h); err != nil {
				t.Fatal(err)
			}
			if got, w := h.Sum(nil), sha256.Sum256(want); !bytes.Equal(got, w[:]) {
				t.Fatalf("pipe gen --preset %s --quant %s --seed %d: sha256 %x, golden %s has %x", c.preset, c.quant, c.seed, got, c.golden, w)
			}
		})
	}
}

// TestPresetExpertBytes: one expert's bytes equal those of the real files
// (DESIGN.md §8 and the trace preambles): gpt-oss MXFP4 experts 13,219,200
// bytes; Gemma-4-26B-A4B Q4_K_M 4,336,640 (down Q8_0) / 3,593,216 (down Q5_0).
func TestPresetExpertBytes(t *testing.T) {
	cases := []struct {
		preset string
		want   map[uint64]bool
	}{
		{"gpt-oss-120b", map[uint64]bool{13219200: true}},
		{"gpt-oss-20b", map[uint64]bool{13219200: true}},
		{"gemma4-26b-a4b", map[uint64]bool{4336640: true, 3593216: true}},
		{"qwen3-30b-a3b", map[uint64]bool{3059712: true, 2654208: true}},
	}
	for _, c := range cases {
		m, err := gen.Prepare(gen.Options{Preset: c.preset, VocabSize: 1000})
		if err != nil {
			t.Fatal(err)
		}
		per := map[int]uint64{}
		for _, ts := range m.Plan.Tensors {
			if len(ts.Dims) == 3 {
				per[ts.Layer] += ts.Bytes() / ts.Dims[2]
			}
		}
		seen := map[uint64]bool{}
		for l, b := range per {
			if !c.want[b] {
				t.Errorf("%s layer %d: %d bytes per expert, want one of %v", c.preset, l, b, c.want)
			}
			seen[b] = true
		}
		if len(seen) != len(c.want) {
			t.Errorf("%s: expert sizes %v, want %v", c.preset, seen, c.want)
		}
	}
}
