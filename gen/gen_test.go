package gen

import (
	"bytes"
	"context"
	"crypto/sha256"
	"errors"
	"io"
	"os"
	"path/filepath"
	"reflect"
	"sort"
	"strings"
	"syscall"
	"testing"

	"github.com/pipe-engine/pipe/gguf"
	"github.com/pipe-engine/pipe/internal/safefile"
	"github.com/pipe-engine/pipe/quant"
	"github.com/pipe-engine/pipe/replay"
)

const goldenModels = "../testdata/golden/models"

func genFile(t *testing.T, o Options) (string, *Result) {
	t.Helper()
	path := filepath.Join(t.TempDir(), o.Preset+".gguf")
	res, err := GenerateFile(context.Background(), o, path)
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
			o := Options{Preset: c.preset, Quant: c.quant, Seed: 7, RoutingSkew: DefaultRoutingSkew}
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

func fileSHA(t *testing.T, path string) [32]byte {
	t.Helper()
	b, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	return sha256.Sum256(b)
}

// TestDeterministic: the same options give a byte-identical file whatever the
// number of workers; another seed gives another file.
func TestDeterministic(t *testing.T) {
	base := Options{Preset: "qwen3-tiny", Seed: 42, RoutingSkew: DefaultRoutingSkew}
	a, _ := genFile(t, withWorkers(base, 1))
	b, _ := genFile(t, withWorkers(base, 3))
	if fileSHA(t, a) != fileSHA(t, b) {
		t.Fatal("same seed, different bytes (1 vs 3 workers)")
	}
	// the pooled path (forced on a small model)
	defer func(f uint64, p int) { freshLimit, poolBlocks = f, p }(freshLimit, poolBlocks)
	freshLimit, poolBlocks = 1<<12, 512
	big := Options{Preset: "gemma4-tiny", Layers: 3, Seed: 42, RoutingSkew: DefaultRoutingSkew}
	var h [2][32]byte
	for i, w := range []int{1, 2} {
		var buf hashWriter
		buf.h = sha256.New()
		if _, err := Generate(context.Background(), withWorkers(big, w), &buf); err != nil {
			t.Fatal(err)
		}
		copy(h[i][:], buf.h.Sum(nil))
	}
	if h[0] != h[1] {
		t.Fatalf("%s: same seed, different bytes (1 vs 2 workers)", big.Preset)
	}
	c, _ := genFile(t, Options{Preset: "qwen3-tiny", Seed: 43, RoutingSkew: DefaultRoutingSkew})
	if fileSHA(t, a) == fileSHA(t, c) {
		t.Fatal("seeds 42 and 43 gave the same file")
	}
}

type hashWriter struct {
	h interface {
		io.Writer
		Sum([]byte) []byte
	}
}

func (w *hashWriter) Write(p []byte) (int, error) { return w.h.Write(p) }

func withWorkers(o Options, n int) Options { o.Workers = n; return o }

// TestPresetsRoundTrip: every preset at --layers 1 writes a file gguf.Open
// reads back with the planned names, types, shapes and sizes, and whose
// quantized data dequantizes to finite values.
func TestPresetsRoundTrip(t *testing.T) {
	for _, p := range Presets() {
		t.Run(p.Name, func(t *testing.T) {
			o := Options{Preset: p.Name, Layers: 1, VocabSize: 300, Seed: 3, RoutingSkew: DefaultRoutingSkew}
			m, err := Prepare(o)
			if err != nil {
				t.Fatal(err)
			}
			if testing.Short() && m.Plan.TotalBytes() > 64<<20 {
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

// checkFinite dequantizes the first rows of every tensor and checks they are
// finite and not all equal.
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
		if err := quant.Dequantize(ti.Type, buf, x); err != nil {
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

// TestRealShapesMatchTrace: the qwen3-30b-a3b Q4_K_M plan has, layer by layer,
// the per-expert bytes and the dense bytes of the real Qwen3-30B-A3B-Q4_K_M
// file recorded in the real route trace's preamble (replay's testdata).
func TestRealShapesMatchTrace(t *testing.T) {
	f, err := os.Open("../replay/testdata/qwen.route.csv")
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	tr, err := replay.NewReader(f).Header()
	if err != nil {
		t.Fatal(err)
	}
	p, _ := LookupPreset("qwen3-30b-a3b")
	ft, _ := ParseFileType("Q4_K_M")
	pl, err := NewPlan(p, ft, 151936)
	if err != nil {
		t.Fatal(err)
	}
	expert := make([]uint64, p.NLayer)
	dense := make([]uint64, p.NLayer)
	for _, ts := range pl.Tensors {
		if ts.Layer < 0 {
			continue
		}
		if strings.Contains(ts.Name, "_exps.") {
			expert[ts.Layer] += ts.Bytes() / uint64(p.NExpert)
		} else {
			dense[ts.Layer] += ts.Bytes()
		}
	}
	if tr.NLayer != p.NLayer || len(tr.Layers) != p.NLayer {
		t.Fatalf("trace preamble has %d layers", len(tr.Layers))
	}
	for l, lt := range tr.Layers {
		if int64(expert[l]) != lt.ExpertBytes || int64(dense[l]) != lt.DenseBytes {
			t.Errorf("layer %d: expert %d dense %d bytes, real file %d / %d", l, expert[l], dense[l], lt.ExpertBytes, lt.DenseBytes)
		}
	}
	// and the file is the size of the real one (≈ 17.3 GiB of tensors)
	if tb := pl.TotalBytes(); tb < 17<<30 || tb > 18<<30 {
		t.Errorf("tensor bytes %d, want ≈ 17.3 GiB", tb)
	}
}

func TestBadOptions(t *testing.T) {
	cases := []struct {
		o    Options
		want error
	}{
		{Options{Preset: "nope"}, ErrUnknownPreset},
		{Options{Preset: "qwen3-tiny", Quant: "Q3_X"}, ErrUnsupportedQuant},
		{Options{Preset: "qwen3-tiny", Layers: 99}, ErrBadOptions},
		{Options{Preset: "qwen3-tiny", VocabSize: 10}, ErrBadOptions},
		{Options{Preset: "qwen3-tiny", RoutingSkew: -1}, ErrBadOptions},
		{Options{Preset: "qwen3-tiny", VocabPath: "x.gguf", VocabSize: 300}, ErrBadOptions},
		{Options{Preset: "qwen3-tiny", VocabPath: "testdata/not-a-gguf.txt"}, gguf.ErrCorruption},
	}
	for _, c := range cases {
		if _, err := Prepare(c.o); !errors.Is(err, c.want) {
			t.Errorf("Prepare(%+v) = %v, want %v", c.o, err, c.want)
		}
	}
}

// TestBuiltinVocab: every merge joins two existing tokens into an existing
// token, all tokens are distinct, specials are last and bos/eos point at them.
func TestBuiltinVocab(t *testing.T) {
	v, err := BuiltinVocab(ArchQwen3MoE, 2000)
	if err != nil {
		t.Fatal(err)
	}
	get := func(k string) gguf.Value {
		for _, kv := range v.KV {
			if kv.Key == k {
				return kv.Value
			}
		}
		t.Fatalf("no %s", k)
		return gguf.Value{}
	}
	toks, _ := get("tokenizer.ggml.tokens").Strings()
	merges, _ := get("tokenizer.ggml.merges").Strings()
	if len(toks) != 2000 || v.Size != 2000 {
		t.Fatalf("%d tokens", len(toks))
	}
	if len(merges) < 100 {
		t.Errorf("only %d merges learned", len(merges))
	}
	idx := map[string]int{}
	for i, s := range toks {
		if _, dup := idx[s]; dup {
			t.Fatalf("duplicate token %q", s)
		}
		idx[s] = i
	}
	for _, m := range merges {
		l, r, ok := strings.Cut(m, " ")
		if !ok {
			t.Fatalf("merge %q", m)
		}
		for _, s := range []string{l, r, l + r} {
			if _, ok := idx[s]; !ok {
				t.Errorf("merge %q: %q is not a token", m, s)
			}
		}
	}
	eos, _ := get("tokenizer.ggml.eos_token_id").Uint()
	if toks[eos] != "<|im_end|>" || toks[len(toks)-1] != "<|im_end|>" {
		t.Errorf("eos %d = %q", eos, toks[eos])
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
		m, err := Prepare(Options{Preset: c.preset, VocabSize: 1000})
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

// TestGenerateFileNeverReplacesNonRegular: -o naming a FIFO, a device, a
// directory, a symbolic link or the --vocab input is refused and the node is
// left as it was (the rename would have replaced it).
func TestGenerateFileNeverReplacesNonRegular(t *testing.T) {
	dir := t.TempDir()
	fifo := filepath.Join(dir, "fifo")
	if err := syscall.Mkfifo(fifo, 0o600); err != nil {
		t.Fatalf("mkfifo: %v", err)
	}
	target := filepath.Join(dir, "target.gguf")
	if err := os.WriteFile(target, []byte("keep"), 0o644); err != nil {
		t.Fatal(err)
	}
	sym := filepath.Join(dir, "sym.gguf")
	if err := os.Symlink(target, sym); err != nil {
		t.Fatal(err)
	}
	for _, p := range []string{fifo, os.DevNull, dir, sym} {
		before, _ := os.Lstat(p)
		_, err := GenerateFile(context.Background(), Options{Preset: "qwen3-tiny"}, p)
		if !errors.Is(err, safefile.ErrNotRegular) {
			t.Fatalf("-o %s: err = %v, want ErrNotRegular", p, err)
		}
		if after, _ := os.Lstat(p); after.Mode() != before.Mode() || !os.SameFile(before, after) {
			t.Fatalf("-o %s: the node changed", p)
		}
	}
	vocab := filepath.Join(dir, "vocab.gguf")
	b, err := os.ReadFile(filepath.Join(goldenModels, "tiny-qwen3moe-Q8_0.gguf"))
	if err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(vocab, b, 0o644); err != nil {
		t.Fatal(err)
	}
	_, err = GenerateFile(context.Background(), Options{Preset: "qwen3-tiny", VocabPath: vocab}, vocab)
	if !errors.Is(err, safefile.ErrSameFile) {
		t.Fatalf("-o the --vocab file: err = %v, want ErrSameFile", err)
	}
	if got, _ := os.ReadFile(vocab); !bytes.Equal(got, b) {
		t.Fatal("the --vocab file changed")
	}
	if _, err := os.ReadFile(target); err != nil {
		t.Fatal(err)
	}
}

func TestEnsureDemo(t *testing.T) {
	dir := t.TempDir()
	o := Options{Preset: "qwen3-tiny", Seed: 1, RoutingSkew: DefaultRoutingSkew}
	p1, err := ensureDemo(context.Background(), dir, o)
	if err != nil {
		t.Fatal(err)
	}
	st1, err := os.Stat(p1)
	if err != nil || st1.Size() == 0 {
		t.Fatalf("demo model: %v", err)
	}
	p2, err := ensureDemo(context.Background(), dir, o)
	if err != nil || p2 != p1 {
		t.Fatalf("second call: %s, %v", p2, err)
	}
	if st2, _ := os.Stat(p2); !st2.ModTime().Equal(st1.ModTime()) {
		t.Error("second call regenerated the model")
	}
	if m, _ := filepath.Glob(filepath.Join(dir, ".*tmp*")); len(m) > 0 {
		t.Errorf("temporary files left: %v", m)
	}
	// the real demo options describe the documented model
	m, err := Prepare(DemoOptions())
	if err != nil {
		t.Fatal(err)
	}
	if mb := m.Plan.TotalBytes() >> 20; m.Plan.Preset.NLayer != DemoLayers || mb < 300 || mb > 1000 {
		t.Errorf("demo model: %d layers, %d MiB", m.Plan.Preset.NLayer, mb)
	}
	// a cancelled generation leaves nothing behind
	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	dir2 := t.TempDir()
	if _, err := ensureDemo(ctx, dir2, o); !errors.Is(err, context.Canceled) {
		t.Errorf("cancelled: %v", err)
	}
	if m, _ := os.ReadDir(dir2); len(m) > 0 {
		t.Errorf("cancelled generation left %v", m)
	}
}

// Generate writes the model described by o to out as a GGUF stream.
func Generate(ctx context.Context, o Options, out io.Writer) (*Result, error) {
	m, err := Prepare(o)
	if err != nil {
		return nil, err
	}
	return m.Write(ctx, out)
}
