package gguf

import (
	"bytes"
	"errors"
	"fmt"
	"math/rand"
	"os"
	"path/filepath"
	"reflect"
	"sync/atomic"
	"testing"

	"github.com/pipe-engine/pipe/quant"
)

// fuzzSeeds are small valid files written by the Writer (and a v2 one), plus
// truncations and byte flips of them.
func fuzzSeeds() [][]byte {
	var seeds [][]byte
	build := func(align uint64, kvs []KV, tensors []rawTensor) []byte {
		var buf bytes.Buffer
		w := NewWriter(&buf)
		if align != 0 {
			_ = w.SetAlignment(align)
		}
		for _, kv := range kvs {
			_ = w.AddKV(kv.Key, kv.Value)
		}
		rng := rand.New(rand.NewSource(3))
		for _, t := range tensors {
			_ = w.AddTensor(t.name, quant.Type(t.typ), t.dims)
		}
		_ = w.WriteHeader()
		for _, t := range tensors {
			_ = w.WriteTensor(t.name, randomTensor(rng, quant.Type(t.typ), t.dims))
		}
		_ = w.Close()
		return buf.Bytes()
	}
	small := []KV{}
	for _, kv := range metadataCases() {
		if kv.Value.Len() <= 4 {
			small = append(small, kv)
		}
	}
	arch, _ := NewValue("qwen3moe")
	seeds = append(seeds,
		build(0, nil, nil),
		build(0, []KV{{KeyArchitecture, arch}}, []rawTensor{{"a", []uint64{4}, uint32(quant.F32), 0}}),
		build(64, small, []rawTensor{
			{"blk.0.ffn_up_exps.weight", []uint64{32, 2, 2}, uint32(quant.Q8_0), 0},
			{"b", []uint64{256}, uint32(quant.Q4_K), 0},
			{"c", []uint64{32}, uint32(quant.MXFP4), 0},
		}),
	)
	v2 := rawFile(2, []rawKV{kvU32("x", 7), kvStr("y", "z")}, []rawTensor{{"t", []uint64{2, 2}, uint32(quant.F16), 0}}, 32, 8)
	seeds = append(seeds, v2)
	n := len(seeds)
	for i := 0; i < n; i++ {
		s := seeds[i]
		for _, cut := range []int{3, 8, 23, len(s) / 2, len(s) - 1} {
			if cut > 0 && cut < len(s) {
				seeds = append(seeds, append([]byte(nil), s[:cut]...))
			}
		}
	}
	return seeds
}

var fuzzSeq atomic.Int64

func FuzzOpen(f *testing.F) {
	for _, s := range fuzzSeeds() {
		f.Add(s)
	}
	base := "" // default temp dir, or tmpfs when there is one
	if st, err := os.Stat("/dev/shm"); err == nil && st.IsDir() {
		base = "/dev/shm"
	}
	fuzzDir, err := os.MkdirTemp(base, "gguf-fuzz")
	if err != nil {
		f.Fatal(err)
	}
	f.Cleanup(func() { os.RemoveAll(fuzzDir) })
	f.Fuzz(func(t *testing.T, data []byte) {
		path := filepath.Join(fuzzDir, fmt.Sprintf("f%d.gguf", fuzzSeq.Add(1)))
		if err := os.WriteFile(path, data, 0o600); err != nil {
			t.Skip(err)
		}
		defer os.Remove(path)
		file, err := Open(path)
		mem, err2 := Decode(path, bytes.NewReader(data), int64(len(data)))
		if err != nil {
			var fe *FormatError
			if !errors.As(err, &fe) || !(errors.Is(err, ErrCorruption) || errors.Is(err, ErrUnsupported)) {
				t.Fatalf("error without a sentinel: %v", err)
			}
			if err2 == nil && len(mem.Shards) == 1 {
				if _, split := mem.Get(KeySplitCount); !split {
					t.Fatalf("Open failed (%v) but Decode succeeded", err)
				}
			}
			return
		}
		if err2 != nil {
			t.Fatalf("Open succeeded but Decode failed: %v", err2)
		}
		checkInvariants(t, file, uint64(len(data)))
		if file.Alignment > 1<<16 {
			return // valid, but rewriting would write gigabytes of padding
		}
		// Writing what was read and reading it back gives the same model.
		var buf bytes.Buffer
		w := NewWriter(&buf)
		for _, kv := range file.KV {
			if err := w.AddKV(kv.Key, kv.Value); err != nil {
				t.Fatalf("re-adding %s: %v", kv.Key, err)
			}
		}
		for _, ti := range file.Tensors {
			if err := w.AddTensor(ti.Name, ti.Type, ti.Dims); err != nil {
				t.Fatalf("re-adding tensor %s: %v", ti.Name, err)
			}
		}
		if err := w.WriteHeader(); err != nil {
			t.Fatal(err)
		}
		for _, ti := range file.Tensors {
			if err := w.WriteTensor(ti.Name, data[ti.Offset:ti.Offset+ti.Size]); err != nil {
				t.Fatal(err)
			}
		}
		if err := w.Close(); err != nil {
			t.Fatal(err)
		}
		again, err := Decode("rewritten", bytes.NewReader(buf.Bytes()), int64(buf.Len()))
		if err != nil {
			t.Fatalf("rewritten file does not open: %v", err)
		}
		if len(again.KV) != len(file.KV) || len(again.Tensors) != len(file.Tensors) {
			t.Fatalf("rewrite changed counts")
		}
		for i := range file.KV {
			a, b := file.KV[i], again.KV[i]
			if a.Key != b.Key || a.Value.Type != b.Value.Type || a.Value.String() != b.Value.String() {
				t.Fatalf("kv %d changed: %v=%v vs %v=%v", i, a.Key, a.Value, b.Key, b.Value)
			}
		}
		for i := range file.Tensors {
			a, b := file.Tensors[i], again.Tensors[i]
			if a.Name != b.Name || a.Type != b.Type || !reflect.DeepEqual(a.Dims, b.Dims) || a.Size != b.Size {
				t.Fatalf("tensor %d changed: %+v vs %+v", i, a, b)
			}
			if !bytes.Equal(data[a.Offset:a.Offset+a.Size], buf.Bytes()[b.Offset:b.Offset+b.Size]) {
				t.Fatalf("tensor %s data changed", a.Name)
			}
		}
	})
}

// checkInvariants asserts what Open promises about a File.
func checkInvariants(t *testing.T, f *File, size uint64) {
	t.Helper()
	if f.Alignment == 0 || f.Alignment&(f.Alignment-1) != 0 || f.DataOffset%f.Alignment != 0 {
		t.Fatalf("alignment %d, data offset %d", f.Alignment, f.DataOffset)
	}
	seen := map[string]bool{}
	for _, ti := range f.Tensors {
		if seen[ti.Name] {
			t.Fatalf("duplicate %s", ti.Name)
		}
		seen[ti.Name] = true
		if !ti.Type.Known() || len(ti.Dims) == 0 || len(ti.Dims) > 4 {
			t.Fatalf("%s: type %v dims %v", ti.Name, ti.Type, ti.Dims)
		}
		if ti.Offset < f.DataOffset || ti.Offset+ti.Size > size || ti.Offset+ti.Size < ti.Offset || (ti.Offset-f.DataOffset)%f.Alignment != 0 {
			t.Fatalf("%s: [%d,+%d) in a %d-byte file with data at %d", ti.Name, ti.Offset, ti.Size, size, f.DataOffset)
		}
		for _, o := range f.Tensors {
			if o.Name != ti.Name && o.Offset < ti.Offset+ti.Size && ti.Offset < o.Offset+o.Size && o.Size > 0 && ti.Size > 0 {
				t.Fatalf("%s overlaps %s", ti.Name, o.Name)
			}
		}
	}
}

// TestWriteFuzzCorpus regenerates testdata/fuzz/FuzzOpen from fuzzSeeds when
// GGUF_WRITE_CORPUS=1 (the corpus is committed; this only documents its origin).
func TestWriteFuzzCorpus(t *testing.T) {
	if os.Getenv("GGUF_WRITE_CORPUS") != "1" {
		t.Skip("set GGUF_WRITE_CORPUS=1 to regenerate testdata/fuzz/FuzzOpen")
	}
	dir := filepath.Join("testdata", "fuzz", "FuzzOpen")
	if err := os.MkdirAll(dir, 0o755); err != nil {
		t.Fatal(err)
	}
	for i, s := range fuzzSeeds() {
		body := fmt.Sprintf("go test fuzz v1\n[]byte(%q)\n", s)
		if err := os.WriteFile(filepath.Join(dir, fmt.Sprintf("seed-%02d", i)), []byte(body), 0o644); err != nil {
			t.Fatal(err)
		}
	}
}
