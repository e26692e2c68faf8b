package gen

import (
	"bytes"
	"context"
	"crypto/sha256"
	"errors"
	"io"
	"os"
	"path/filepath"
	"strings"
	"syscall"
	"testing"

	"github.com/pipe-engine/pipe/gguf"
	"github.com/pipe-engine/pipe/internal/safefile"
	"github.com/pipe-engine/pipe/tools/replay"
)

const goldenModels = "../../testdata/golden/models"

func genFile(t *testing.T, o Options) (string, *Result) {
	t.Helper()
	path := filepath.Join(t.TempDir(), o.Preset+".gguf")
	res, err := GenerateFile(context.Background(), o, path)
	if err != nil {
		t.Fatalf("GenerateFile(%+v): %v", o, err)
	}
	return path, res
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

// TestRealShapesMatchTrace: the qwen3-30b-a3b Q4_K_M plan has, layer by layer,
// the per-expert bytes and the dense bytes of the real Qwen3-30B-A3B-Q4_K_M
// file recorded in the real route trace's preamble (replay's testdata).
func TestRealShapesMatchTrace(t *testing.T) {
	f, err := os.Open("../../tools/replay/testdata/qwen.route.csv")
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
	v, err := BuiltinVocabSpec(vocabSpec("qwen3moe"), 2000)
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
