package dense

import (
	"bytes"
	"errors"
	"strings"
	"testing"

	"github.com/pipe-engine/pipe/gguf"
	"github.com/pipe-engine/pipe/model"
	"github.com/pipe-engine/pipe/reader"
)

const tiny = "../testdata/golden/models/tiny-qwen3moe-Q4_K_M.gguf"

// TestModesServeTheSameBytes: every policy, streaming or not, serves each
// dense tensor's exact file bytes; only the whole-file mapping serves expert
// ranges; resident_frac is measured.
func TestModesServeTheSameBytes(t *testing.T) {
	f, err := gguf.Open(tiny)
	if err != nil {
		t.Fatal(err)
	}
	d, err := model.Describe(f)
	if err != nil {
		t.Fatal(err)
	}
	files, err := reader.Open([]string{tiny}, reader.Options{})
	if err != nil {
		t.Fatal(err)
	}
	defer files.Close()
	ref, err := Load(f, d, Options{Mode: Mmap, Stream: false})
	if err != nil {
		t.Fatal(err)
	}
	defer ref.Close()
	var denseTensors []*gguf.TensorInfo
	for i := range f.Tensors {
		if ti := &f.Tensors[i]; !strings.Contains(ti.Name, "_exps") {
			denseTensors = append(denseTensors, ti)
		}
	}
	if len(denseTensors) == 0 {
		t.Fatal("no dense tensors")
	}
	for _, o := range []Options{
		{Mode: Anon, Stream: true, Files: files}, {Mode: Anon, Stream: true, Files: files, HugePages: true},
		{Mode: Warm, Stream: true}, {Mode: Mmap, Stream: true}, {Mode: Anon, Stream: false}, {Mode: Warm, Stream: false},
	} {
		w, err := Load(f, d, o)
		if err != nil {
			t.Fatalf("%+v: %v", o, err)
		}
		for _, ti := range denseTensors {
			got, err := w.TensorBytes(ti)
			if err != nil {
				t.Fatalf("%+v: %s: %v", o, ti.Name, err)
			}
			want, _ := ref.TensorBytes(ti)
			if !bytes.Equal(got, want) {
				t.Fatalf("%+v: %s: bytes differ", o, ti.Name)
			}
		}
		x := d.Experts[0][0][0]
		_, err = w.Mapped(x.Shard, x.Off, x.Len)
		if (err == nil) != mapped(o) {
			t.Errorf("%+v: Mapped(expert) err %v", o, err)
		}
		if !mapped(o) && !errors.Is(err, ErrNotMapped) {
			t.Errorf("%+v: err %v, want ErrNotMapped", o, err)
		}
		if fr := w.ResidentFrac(); fr < 0 || fr > 1 {
			t.Errorf("%+v: resident fraction %v", o, fr)
		}
		if err := w.Close(); err != nil {
			t.Error(err)
		}
	}
}

func mapped(o Options) bool { return o.Mode != Anon || !o.Stream }

func TestLoadErrors(t *testing.T) {
	f, err := gguf.Open(tiny)
	if err != nil {
		t.Fatal(err)
	}
	d, err := model.Describe(f)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := Load(f, d, Options{Mode: "swap"}); !errors.Is(err, ErrMode) {
		t.Errorf("mode swap: %v", err)
	}
	if _, err := Load(f, d, Options{Mode: Anon, Stream: true}); err == nil {
		t.Error("anon without files accepted")
	}
}
