package gguf

import (
	"bytes"
	"errors"
	"fmt"
	"io"
	"math"
	"math/rand"
	"os"
	"reflect"
	"testing"

	"github.com/pipe-engine/pipe/quant"
)

// metadataCases holds one value of every metadata type, arrays of each, and
// nested arrays.
func metadataCases() []KV {
	mk := func(k string, v any) KV {
		val, err := NewValue(v)
		if err != nil {
			panic(err)
		}
		return KV{k, val}
	}
	inner1, _ := NewValue([]int32{1, -2, 3})
	inner2, _ := NewValue([]int32{})
	s1, _ := NewValue([]string{"a", ""})
	s2, _ := NewValue([]string{"ü", "漢字", "x"})
	nested2, _ := NewValue([]Value{s1, s2})
	return []KV{
		mk("t.u8", uint8(250)),
		mk("t.i8", int8(-7)),
		mk("t.u16", uint16(65000)),
		mk("t.i16", int16(-30000)),
		mk("t.u32", uint32(4000000000)),
		mk("t.i32", int32(-2000000000)),
		mk("t.f32", float32(1e-6)),
		mk("t.f32.nan", float32(math.Inf(-1))),
		mk("t.bool.true", true),
		mk("t.bool.false", false),
		mk("t.str", "hello, 世界"),
		mk("t.str.empty", ""),
		mk("t.u64", uint64(math.MaxUint64)),
		mk("t.i64", int64(math.MinInt64)),
		mk("t.f64", math.Pi),
		mk("t.arr.u8", []uint8{0, 1, 255}),
		mk("t.arr.i8", []int8{-128, 0, 127}),
		mk("t.arr.u16", []uint16{0, 65535}),
		mk("t.arr.i16", []int16{-32768, 32767}),
		mk("t.arr.u32", []uint32{1, 2, 3}),
		mk("t.arr.i32", []int32{-1, 0, 1}),
		mk("t.arr.f32", []float32{0.5, -0.25, float32(math.Inf(1))}),
		mk("t.arr.bool", []bool{true, false, true}),
		mk("t.arr.str", []string{"Ġ t", "h e", "", "<|im_end|>"}),
		mk("t.arr.u64", []uint64{math.MaxUint64, 0}),
		mk("t.arr.i64", []int64{math.MinInt64, math.MaxInt64}),
		mk("t.arr.f64", []float64{1e300, -1e-300}),
		mk("t.arr.empty", []float32{}),
		mk("t.arr.nested", []Value{inner1, inner2}),
		mk("t.arr.nested2", []Value{nested2}),
	}
}

func TestRoundTripMetadata(t *testing.T) {
	var buf bytes.Buffer
	w := NewWriter(&buf)
	kvs := metadataCases()
	for _, kv := range kvs {
		if err := w.AddKV(kv.Key, kv.Value); err != nil {
			t.Fatalf("AddKV(%s): %v", kv.Key, err)
		}
	}
	if err := w.Close(); err != nil {
		t.Fatal(err)
	}
	f, err := Decode("mem", bytes.NewReader(buf.Bytes()), int64(buf.Len()))
	if err != nil {
		t.Fatal(err)
	}
	if f.Version != 3 || len(f.KV) != len(kvs) || len(f.Tensors) != 0 {
		t.Fatalf("version %d, %d kv, %d tensors", f.Version, len(f.KV), len(f.Tensors))
	}
	for i, kv := range kvs {
		got := f.KV[i]
		if got.Key != kv.Key || got.Value.Type != kv.Value.Type || got.Value.Elem != kv.Value.Elem {
			t.Errorf("kv %d: got %s %v/%v, want %s %v/%v", i, got.Key, got.Value.Type, got.Value.Elem, kv.Key, kv.Value.Type, kv.Value.Elem)
			continue
		}
		if !reflect.DeepEqual(normalise(got.Value.Any()), normalise(kv.Value.Any())) {
			t.Errorf("%s: got %#v, want %#v", kv.Key, got.Value.Any(), kv.Value.Any())
		}
	}
	// Re-encoding what was read gives the same bytes.
	var buf2 bytes.Buffer
	w2 := NewWriter(&buf2)
	for _, kv := range f.KV {
		if err := w2.AddKV(kv.Key, kv.Value); err != nil {
			t.Fatal(err)
		}
	}
	if err := w2.Close(); err != nil {
		t.Fatal(err)
	}
	if !bytes.Equal(buf.Bytes(), buf2.Bytes()) {
		t.Error("re-encoding the decoded metadata changed the bytes")
	}
}

// normalise maps empty slices to nil-free comparable forms and nested Values
// to their contents.
func normalise(x any) any {
	if vs, ok := x.([]Value); ok {
		out := make([]any, len(vs))
		for i, v := range vs {
			out[i] = []any{v.Type, v.Elem, normalise(v.Any())}
		}
		return out
	}
	rv := reflect.ValueOf(x)
	if rv.Kind() == reflect.Slice && rv.Len() == 0 {
		return fmt.Sprintf("empty %T", x)
	}
	return x
}

func TestRoundTripTensorsEveryType(t *testing.T) {
	rng := rand.New(rand.NewSource(1))
	type spec struct {
		name string
		tt   quant.Type
		dims []uint64
	}
	var specs []spec
	for _, tt := range allTypes() {
		bs := uint64(tt.BlockSize())
		specs = append(specs,
			spec{fmt.Sprintf("%s.1d", tt), tt, []uint64{bs * 3}},
			spec{fmt.Sprintf("%s.3d", tt), tt, []uint64{bs * 2, 3, 5}},
		)
	}
	specs = append(specs, spec{"f32.4d", quant.F32, []uint64{3, 1, 2, 7}})
	for _, align := range []uint64{32, 64, 4096} {
		t.Run(fmt.Sprint("align", align), func(t *testing.T) {
			path := t.TempDir() + "/rt.gguf"
			out, err := os.Create(path)
			if err != nil {
				t.Fatal(err)
			}
			w := NewWriter(out)
			if err := w.SetAlignment(align); err != nil {
				t.Fatal(err)
			}
			if err := w.AddKV("general.architecture", "test"); err != nil {
				t.Fatal(err)
			}
			data := map[string][]byte{}
			for _, s := range specs {
				if err := w.AddTensor(s.name, s.tt, s.dims); err != nil {
					t.Fatalf("AddTensor %s: %v", s.name, err)
				}
				data[s.name] = randomTensor(rng, s.tt, s.dims)
			}
			if err := w.WriteHeader(); err != nil {
				t.Fatal(err)
			}
			for _, s := range specs {
				if err := w.WriteTensor(s.name, data[s.name]); err != nil {
					t.Fatal(err)
				}
			}
			if err := w.Close(); err != nil {
				t.Fatal(err)
			}
			out.Close()

			f, err := Open(path)
			if err != nil {
				t.Fatal(err)
			}
			if f.Alignment != align || f.DataOffset%align != 0 {
				t.Fatalf("alignment %d, data offset %d", f.Alignment, f.DataOffset)
			}
			if got, _ := f.GetUint(KeyAlignment); align != 32 && got != align {
				t.Errorf("general.alignment = %d", got)
			}
			raw, _ := os.ReadFile(path)
			wt := w.Tensors()
			for i, s := range specs {
				ti, ok := f.Tensor(s.name)
				if !ok {
					t.Fatalf("tensor %s missing", s.name)
				}
				if ti.Type != s.tt || !reflect.DeepEqual(ti.Dims, s.dims) {
					t.Errorf("%s: %v %v, want %v %v", s.name, ti.Type, ti.Dims, s.tt, s.dims)
				}
				if ti.Offset != wt[i].Offset || ti.Offset%align != 0 {
					t.Errorf("%s: offset %d, writer said %d", s.name, ti.Offset, wt[i].Offset)
				}
				if !bytes.Equal(raw[ti.Offset:ti.Offset+ti.Size], data[s.name]) {
					t.Errorf("%s: data differs", s.name)
				}
				rs, _ := s.tt.RowSize(int64(s.dims[0]))
				if ti.RowSize() != uint64(rs) || ti.Size != uint64(rs)*ti.Elements()/s.dims[0] {
					t.Errorf("%s: row size %d size %d, want row %d", s.name, ti.RowSize(), ti.Size, rs)
				}
			}
			last := f.Tensors[len(f.Tensors)-1]
			if want := alignUp(last.Offset+last.Size, align); uint64(len(raw)) != want {
				t.Errorf("file is %d bytes, want %d (last tensor padded)", len(raw), want)
			}
		})
	}
}

// TestWriterReproducesLlamaCpp rewrites llama.cpp-produced files with the
// Writer and demands identical bytes: the Writer's layout is llama.cpp's.
func TestWriterReproducesLlamaCpp(t *testing.T) {
	for _, name := range []string{"tiny-qwen3moe-Q4_K_M.gguf", "tiny-gptoss-MXFP4_MOE.gguf"} {
		t.Run(name, func(t *testing.T) {
			path := goldenDir + name
			f, err := Open(path)
			if err != nil {
				t.Fatal(err)
			}
			orig, err := os.ReadFile(path)
			if err != nil {
				t.Fatal(err)
			}
			var buf bytes.Buffer
			w := NewWriter(&buf)
			for _, kv := range f.KV {
				if err := w.AddKV(kv.Key, kv.Value); err != nil {
					t.Fatal(err)
				}
			}
			for _, ti := range f.Tensors {
				if err := w.AddTensor(ti.Name, ti.Type, ti.Dims); err != nil {
					t.Fatal(err)
				}
			}
			if err := w.WriteHeader(); err != nil {
				t.Fatal(err)
			}
			for _, ti := range f.Tensors {
				if err := w.WriteTensor(ti.Name, orig[ti.Offset:ti.Offset+ti.Size]); err != nil {
					t.Fatal(err)
				}
			}
			if err := w.Close(); err != nil {
				t.Fatal(err)
			}
			if !bytes.Equal(buf.Bytes(), orig) {
				n := 0
				for n < len(orig) && n < buf.Len() && orig[n] == buf.Bytes()[n] {
					n++
				}
				t.Fatalf("rewritten file differs from llama.cpp's at byte %d (sizes %d vs %d)", n, buf.Len(), len(orig))
			}
		})
	}
}

func TestWriterMisuse(t *testing.T) {
	w := NewWriter(io.Discard)
	must := func(err error) {
		t.Helper()
		if err != nil {
			t.Fatal(err)
		}
	}
	bad := func(what string, err error) {
		t.Helper()
		if !errors.Is(err, ErrWriter) && !errors.Is(err, ErrWrongType) {
			t.Errorf("%s: err = %v, want ErrWriter or ErrWrongType", what, err)
		}
	}
	must(w.AddKV("a", uint32(1)))
	bad("duplicate key", w.AddKV("a", uint32(2)))
	bad("unsupported Go type", w.AddKV("b", struct{}{}))
	bad("int (no width)", w.AddKV("c", 3))
	bad("alignment not u32", w.AddKV(KeyAlignment, uint64(64)))
	bad("alignment 3", w.SetAlignment(3))
	bad("alignment 0", w.SetAlignment(0))
	must(w.AddTensor("x", quant.Q4_K, []uint64{256, 2}))
	bad("SetAlignment after AddTensor", w.SetAlignment(64))
	bad("duplicate tensor", w.AddTensor("x", quant.F32, []uint64{1}))
	bad("block size", w.AddTensor("y", quant.Q4_K, []uint64{100}))
	bad("zero dim", w.AddTensor("y", quant.F32, []uint64{0}))
	bad("5 dims", w.AddTensor("y", quant.F32, []uint64{1, 1, 1, 1, 1}))
	bad("unknown type", w.AddTensor("y", quant.Type(4), []uint64{32}))
	bad("long name", w.AddTensor(string(make([]byte, 64)), quant.F32, []uint64{1}))
	bad("overflow", w.AddTensor("y", quant.F32, []uint64{1 << 40, 1 << 40}))
	bad("write before header", w.WriteTensor("x", make([]byte, 288)))
	must(w.AddTensor("z", quant.F32, []uint64{4}))
	must(w.WriteHeader())
	bad("AddKV after header", w.AddKV("late", true))
	bad("wrong order", w.WriteTensor("z", make([]byte, 16)))
	bad("wrong size", w.WriteTensor("x", make([]byte, 10)))
	must(w.WriteTensor("x", make([]byte, 288)))
	bad("close with missing tensor", w.Close())
	must(w.WriteTensor("z", make([]byte, 16)))
	must(w.Close())
}

func TestTypedGetters(t *testing.T) {
	var buf bytes.Buffer
	w := NewWriter(&buf)
	for _, kv := range metadataCases() {
		if err := w.AddKV(kv.Key, kv.Value); err != nil {
			t.Fatal(err)
		}
	}
	if err := w.Close(); err != nil {
		t.Fatal(err)
	}
	f, err := Decode("mem", bytes.NewReader(buf.Bytes()), int64(buf.Len()))
	if err != nil {
		t.Fatal(err)
	}
	if v, err := f.GetUint("t.u16"); err != nil || v != 65000 {
		t.Errorf("GetUint(t.u16) = %d, %v", v, err)
	}
	if v, err := f.GetInt("t.i8"); err != nil || v != -7 {
		t.Errorf("GetInt(t.i8) = %d, %v", v, err)
	}
	if _, err := f.GetUint("t.i8"); !errors.Is(err, ErrWrongType) {
		t.Errorf("GetUint of a negative: %v", err)
	}
	if _, err := f.GetInt("t.u64"); !errors.Is(err, ErrWrongType) {
		t.Errorf("GetInt of MaxUint64: %v", err)
	}
	if v, err := f.GetFloat("t.f32"); err != nil || float32(v) != 1e-6 {
		t.Errorf("GetFloat = %v, %v", v, err)
	}
	if v, err := f.GetBool("t.bool.true"); err != nil || !v {
		t.Errorf("GetBool = %v, %v", v, err)
	}
	if v, err := f.GetString("t.str"); err != nil || v != "hello, 世界" {
		t.Errorf("GetString = %q, %v", v, err)
	}
	if v, err := f.GetStrings("t.arr.str"); err != nil || len(v) != 4 || v[0] != "Ġ t" {
		t.Errorf("GetStrings = %q, %v", v, err)
	}
	if v, err := f.GetInts("t.arr.i16"); err != nil || !reflect.DeepEqual(v, []int64{-32768, 32767}) {
		t.Errorf("GetInts = %v, %v", v, err)
	}
	if v, err := f.GetFloats("t.arr.u8"); err != nil || !reflect.DeepEqual(v, []float64{0, 1, 255}) {
		t.Errorf("GetFloats = %v, %v", v, err)
	}
	if a, err := f.GetArray("t.arr.nested"); err != nil || a.Len() != 2 || a.Elem != TypeArray {
		t.Errorf("GetArray nested = %v, %v", a, err)
	}
	if _, err := f.GetString("nope"); !errors.Is(err, ErrMissingKey) {
		t.Errorf("missing key: %v", err)
	}
	if _, err := f.GetString("t.u8"); !errors.Is(err, ErrWrongType) {
		t.Errorf("wrong type: %v", err)
	}
	if _, err := f.GetStrings("t.arr.i32"); !errors.Is(err, ErrWrongType) {
		t.Errorf("wrong array type: %v", err)
	}
}

// TestReadV2: GGUF v2 has v3's layout (64-bit counts and lengths); only the
// version number differs.
func TestReadV2(t *testing.T) {
	b := rawFile(2, []rawKV{kvStr(KeyArchitecture, "llama"), kvU32("llama.block_count", 3)},
		[]rawTensor{{"w", []uint64{32, 2}, uint32(quant.Q8_0), 0}, {"n", []uint64{32}, uint32(quant.F32), 96}}, 32, 96+128)
	f, err := Open(writeTemp(t, "v2.gguf", b))
	if err != nil {
		t.Fatal(err)
	}
	if f.Version != 2 || f.Architecture() != "llama" || len(f.Tensors) != 2 {
		t.Fatalf("version %d arch %q tensors %d", f.Version, f.Architecture(), len(f.Tensors))
	}
	if n, _ := f.GetUint("llama.block_count"); n != 3 {
		t.Errorf("block_count %d", n)
	}
	w, _ := f.Tensor("w")
	if w.Size != 68 || w.Offset != f.DataOffset || w.Strides != [4]uint64{34, 34, 68, 68} {
		t.Errorf("w: %+v", w)
	}
	n, _ := f.Tensor("n")
	if n.Offset != f.DataOffset+96 || n.RelOff != 96 {
		t.Errorf("n: %+v", n)
	}
}

func BenchmarkOpen(b *testing.B) {
	path := goldenDir + "tiny-qwen3moe-Q4_K_M.gguf"
	f, err := Open(path)
	if err != nil {
		b.Fatal(err)
	}
	hdr := int64(f.DataOffset)
	b.SetBytes(hdr) // header bytes parsed per Open
	b.ReportAllocs()
	for i := 0; i < b.N; i++ {
		if _, err := Open(path); err != nil {
			b.Fatal(err)
		}
	}
	b.ReportMetric(float64(len(f.Tensors)), "tensors")
}

// Tensors returns the declared tensors with their offsets relative to the
// data section (Offset is filled after WriteHeader).
func (w *Writer) Tensors() []TensorInfo { return w.tensors }

// DataSize returns the bytes of the data section as declared so far
// (every tensor padded to the alignment): the file size is the header size
// plus DataSize.
func (w *Writer) DataSize() uint64 { return w.dataSize }
