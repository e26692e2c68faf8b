package gguf

import (
	"errors"
	"math/rand"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/pipe-engine/pipe/quant"
)

// writeSplit writes a model split in len(parts) shards like llama-gguf-split:
// every shard carries split.no/split.count/split.tensors.count; the first
// also carries the model metadata. mutate may change the keys of a shard.
func writeSplit(t *testing.T, dir string, parts [][]string, mutate func(shard int, w *Writer) bool) (prefix string, data map[string][]byte) {
	t.Helper()
	rng := rand.New(rand.NewSource(7))
	prefix = filepath.Join(dir, "model")
	data = map[string][]byte{}
	total := 0
	for _, p := range parts {
		total += len(p)
	}
	for i, names := range parts {
		fh, err := os.Create(SplitPath(prefix, i, len(parts)))
		if err != nil {
			t.Fatal(err)
		}
		w := NewWriter(fh)
		if i == 0 {
			if err := w.AddKV(KeyArchitecture, "qwen3moe"); err != nil {
				t.Fatal(err)
			}
		}
		if mutate == nil || !mutate(i, w) {
			_ = w.AddKV(KeySplitNo, uint16(i))
			_ = w.AddKV(KeySplitCount, uint16(len(parts)))
			_ = w.AddKV(KeySplitTensorsCount, int32(total))
		}
		dims := []uint64{256, uint64(1 + i)}
		for _, n := range names {
			if err := w.AddTensor(n, quant.Q4_K, dims); err != nil {
				t.Fatal(err)
			}
		}
		if err := w.WriteHeader(); err != nil {
			t.Fatal(err)
		}
		for _, n := range names {
			data[n] = randomTensor(rng, quant.Q4_K, dims)
			if err := w.WriteTensor(n, data[n]); err != nil {
				t.Fatal(err)
			}
		}
		if err := w.Close(); err != nil {
			t.Fatal(err)
		}
		fh.Close()
	}
	return prefix, data
}

func TestSplitModel(t *testing.T) {
	parts := [][]string{{"token_embd.weight", "blk.0.a"}, {"blk.0.b"}, {"blk.1.a", "blk.1.b", "output.weight"}}
	dir := t.TempDir()
	prefix, data := writeSplit(t, dir, parts, nil)
	for _, start := range []int{0, 1, 2} { // any shard opens the whole model
		f, err := Open(SplitPath(prefix, start, 3))
		if err != nil {
			t.Fatal(err)
		}
		if f.Path != SplitPath(prefix, 0, 3) || len(f.Shards) != 3 || len(f.Tensors) != 6 {
			t.Fatalf("path %s, %d shards, %d tensors", f.Path, len(f.Shards), len(f.Tensors))
		}
		if f.Architecture() != "qwen3moe" {
			t.Errorf("architecture %q", f.Architecture())
		}
		for shard, names := range parts {
			raw, err := os.ReadFile(f.Shards[shard].Path)
			if err != nil {
				t.Fatal(err)
			}
			for _, n := range names {
				ti, ok := f.Tensor(n)
				if !ok {
					t.Fatalf("tensor %s missing", n)
				}
				if ti.Shard != shard {
					t.Errorf("%s in shard %d, want %d", n, ti.Shard, shard)
				}
				if ti.Offset < f.Shards[shard].DataOffset || string(raw[ti.Offset:ti.Offset+ti.Size]) != string(data[n]) {
					t.Errorf("%s: bytes at absolute offset %d of shard %d differ", n, ti.Offset, shard)
				}
			}
		}
	}
}

func TestSplitModelErrors(t *testing.T) {
	parts := [][]string{{"a"}, {"b"}, {"c"}}
	t.Run("missing shard", func(t *testing.T) {
		dir := t.TempDir()
		prefix, _ := writeSplit(t, dir, parts, nil)
		os.Remove(SplitPath(prefix, 2, 3))
		if _, err := Open(SplitPath(prefix, 0, 3)); !errors.Is(err, os.ErrNotExist) {
			t.Errorf("err = %v, want not-exist", err)
		}
	})
	t.Run("wrong split.no", func(t *testing.T) {
		dir := t.TempDir()
		prefix, _ := writeSplit(t, dir, parts, func(i int, w *Writer) bool {
			if i != 1 {
				return false
			}
			_ = w.AddKV(KeySplitNo, uint16(2))
			_ = w.AddKV(KeySplitCount, uint16(3))
			return true
		})
		if _, err := Open(SplitPath(prefix, 0, 3)); !errors.Is(err, ErrCorruption) {
			t.Errorf("err = %v, want ErrCorruption", err)
		}
	})
	t.Run("wrong tensor count", func(t *testing.T) {
		dir := t.TempDir()
		prefix, _ := writeSplit(t, dir, parts, func(i int, w *Writer) bool {
			_ = w.AddKV(KeySplitNo, uint16(i))
			_ = w.AddKV(KeySplitCount, uint16(3))
			_ = w.AddKV(KeySplitTensorsCount, int32(4))
			return true
		})
		if _, err := Open(SplitPath(prefix, 0, 3)); !errors.Is(err, ErrCorruption) {
			t.Errorf("err = %v, want ErrCorruption", err)
		}
	})
	t.Run("duplicate across shards", func(t *testing.T) {
		dir := t.TempDir()
		prefix, _ := writeSplit(t, dir, [][]string{{"a"}, {"a"}}, nil)
		if _, err := Open(SplitPath(prefix, 0, 2)); !errors.Is(err, ErrCorruption) {
			t.Errorf("err = %v, want ErrCorruption", err)
		}
	})
	t.Run("count disagrees with name", func(t *testing.T) {
		dir := t.TempDir()
		prefix, _ := writeSplit(t, dir, parts, nil)
		if err := os.Rename(SplitPath(prefix, 0, 3), SplitPath(prefix, 0, 4)); err != nil {
			t.Fatal(err)
		}
		if _, err := Open(SplitPath(prefix, 0, 4)); !errors.Is(err, ErrCorruption) {
			t.Errorf("err = %v, want ErrCorruption", err)
		}
	})
}

func TestShardPaths(t *testing.T) {
	got := ShardPaths(filepath.Join("d", "m-00002-of-00003.gguf"))
	want := []string{filepath.Join("d", "m-00001-of-00003.gguf"), filepath.Join("d", "m-00002-of-00003.gguf"), filepath.Join("d", "m-00003-of-00003.gguf")}
	if strings.Join(got, " ") != strings.Join(want, " ") {
		t.Fatalf("ShardPaths = %v, want %v", got, want)
	}
	if got := ShardPaths("model.gguf"); len(got) != 1 || got[0] != "model.gguf" {
		t.Fatalf("single file: %v", got)
	}
}
