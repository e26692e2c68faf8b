package gguf

import (
	"bytes"
	"encoding/binary"
	"errors"
	"math"
	"os"
	"strings"
	"testing"

	"github.com/pipe-engine/pipe/quant"
)

// validTensors is a small valid tensor layout used as the base of corrupt cases.
var validTensors = []rawTensor{
	{"a", []uint64{8}, uint32(quant.F32), 0},
	{"b", []uint64{32, 2}, uint32(quant.Q8_0), 32},
}

const validData = 32 + 68

// corruptCase is a file no reader may accept: the sentinel Open's error
// must wrap and a substring of its FormatError.Field.
type corruptCase struct {
	name  string
	data  []byte
	want  error
	field string // substring of FormatError.Field
}

// corruptBase is a valid file the cases patch.
func corruptBase() []byte {
	return rawFile(3, []rawKV{kvStr("general.architecture", "t")}, validTensors, 32, validData)
}

// corruptCases are TestCorruptFiles' files.
func corruptCases() []corruptCase {
	arr := func(elem uint32, n uint64, payload []byte) []byte {
		b := binary.LittleEndian.AppendUint32(nil, elem)
		b = binary.LittleEndian.AppendUint64(b, n)
		return append(b, payload...)
	}
	base := corruptBase()
	patch := func(b []byte, off int, v uint32) []byte {
		c := append([]byte(nil), b...)
		binary.LittleEndian.PutUint32(c[off:], v)
		return c
	}
	patch64 := func(b []byte, off int, v uint64) []byte {
		c := append([]byte(nil), b...)
		binary.LittleEndian.PutUint64(c[off:], v)
		return c
	}
	one := func(ts ...rawTensor) []byte { return rawFile(3, nil, ts, 32, 4096) }
	return []corruptCase{
		{"empty file", nil, ErrCorruption, "magic"},
		{"bad magic", append([]byte("GGUX"), base[4:]...), ErrCorruption, "magic"},
		{"version 1", patch(base, 4, 1), ErrUnsupported, "header.version"},
		{"version 0", patch(base, 4, 0), ErrUnsupported, "header.version"},
		{"version 4", patch(base, 4, 4), ErrUnsupported, "header.version"},
		{"big-endian", patch(base, 4, 0x03000000), ErrUnsupported, "header.version"},
		{"truncated header", base[:12], ErrCorruption, "header.n_tensors"},
		{"truncated in kv", rawFile(3, []rawKV{kvStr("general.architecture", "abcdefghij")}, nil, 32, 0)[:60], ErrCorruption, "kv[0]"},
		{"truncated in tensor info", base[:80], ErrCorruption, "tensor"},
		{"truncated data", base[:len(base)-1], ErrCorruption, "tensor b"},
		{"absurd n_tensors", patch64(base, 8, 1<<62), ErrCorruption, "header.n_tensors"},
		{"absurd n_kv", patch64(base, 16, math.MaxUint64), ErrCorruption, "header.n_kv"},
		{"kv count past end", patch64(base, 16, 200), ErrCorruption, "header"},
		{"key longer than file", patch64(base, 24, 1<<40), ErrCorruption, "kv[0] key"},
		{"string value longer than file", rawFile(3, []rawKV{{"s", uint32(TypeString), binary.LittleEndian.AppendUint64(nil, 1<<50)}}, nil, 32, 0), ErrCorruption, `"s"`},
		{"string array longer than file", rawFile(3, []rawKV{{"s", uint32(TypeArray), arr(uint32(TypeString), 1<<60, nil)}}, nil, 32, 0), ErrCorruption, `"s"`},
		{"u32 array longer than file", rawFile(3, []rawKV{{"s", uint32(TypeArray), arr(uint32(TypeUint32), 1<<62, nil)}}, nil, 32, 0), ErrCorruption, `"s"`},
		{"array count overflows", rawFile(3, []rawKV{{"s", uint32(TypeArray), arr(uint32(TypeUint64), math.MaxUint64/4, nil)}}, nil, 32, 0), ErrCorruption, `"s"`},
		{"invalid value type", rawFile(3, []rawKV{{"k", 13, []byte{0, 0, 0, 0}}}, nil, 32, 0), ErrCorruption, `"k"`},
		{"invalid array element type", rawFile(3, []rawKV{{"k", uint32(TypeArray), arr(77, 1, []byte{0})}}, nil, 32, 0), ErrCorruption, `"k"`},
		{"bool not 0/1", rawFile(3, []rawKV{{"k", uint32(TypeBool), []byte{2}}}, nil, 32, 0), ErrCorruption, `"k"`},
		{"bool array not 0/1", rawFile(3, []rawKV{{"k", uint32(TypeArray), arr(uint32(TypeBool), 2, []byte{1, 7})}}, nil, 32, 0), ErrCorruption, `"k"`},
		{"nested too deep", rawFile(3, []rawKV{{"k", uint32(TypeArray), deepArray(maxArrayDepth + 1)}}, nil, 32, 0), ErrUnsupported, `"k"`},
		{"duplicate key", rawFile(3, []rawKV{kvU32("k", 1), kvU32("k", 2)}, nil, 32, 0), ErrCorruption, `"k"`},
		{"alignment zero", rawFile(3, []rawKV{kvU32(KeyAlignment, 0)}, nil, 32, 0), ErrCorruption, KeyAlignment},
		{"alignment not power of two", rawFile(3, []rawKV{kvU32(KeyAlignment, 48)}, nil, 48, 0), ErrCorruption, KeyAlignment},
		{"alignment wrong type", rawFile(3, []rawKV{kvStr(KeyAlignment, "32")}, nil, 32, 0), ErrCorruption, KeyAlignment},
		{"zero dims", one(rawTensor{"z", nil, 0, 0}), ErrUnsupported, "tensor z"},
		{"5 dims", one(rawTensor{"z", []uint64{1, 1, 1, 1, 1}, 0, 0}), ErrCorruption, "tensor z"},
		{"zero dimension", one(rawTensor{"z", []uint64{4, 0}, 0, 0}), ErrCorruption, "tensor z"},
		{"negative dimension", one(rawTensor{"z", []uint64{1 << 63}, 0, 0}), ErrCorruption, "tensor z"},
		{"element count overflow", one(rawTensor{"z", []uint64{1 << 32, 1 << 32}, 0, 0}), ErrCorruption, "tensor z"},
		{"byte size overflow", one(rawTensor{"z", []uint64{1 << 62}, uint32(quant.F32), 0}), ErrCorruption, "tensor z"},
		{"unknown ggml type", one(rawTensor{"z", []uint64{32}, 4, 0}), ErrUnsupported, "tensor z"},
		{"type past the enum", one(rawTensor{"z", []uint64{32}, 1000, 0}), ErrUnsupported, "tensor z"},
		{"not a whole block", one(rawTensor{"z", []uint64{100}, uint32(quant.Q4_K), 0}), ErrCorruption, "tensor z"},
		{"data out of bounds", one(rawTensor{"z", []uint64{2048}, uint32(quant.F32), 0}), ErrCorruption, "tensor z"},
		{"offset far out of bounds", one(rawTensor{"z", []uint64{1}, uint32(quant.F32), math.MaxUint64 - 31}), ErrCorruption, "tensor z"},
		{"misaligned offset", one(rawTensor{"z", []uint64{1}, uint32(quant.F32), 8}), ErrCorruption, "tensor z"},
		{"overlap", one(rawTensor{"y", []uint64{16}, uint32(quant.F32), 0}, rawTensor{"z", []uint64{16}, uint32(quant.F32), 32}), ErrCorruption, "tensor z"},
		{"same offset", one(rawTensor{"y", []uint64{1}, uint32(quant.F32), 64}, rawTensor{"z", []uint64{1}, uint32(quant.F32), 64}), ErrCorruption, "tensor"},
		{"duplicate tensor name", one(rawTensor{"z", []uint64{1}, uint32(quant.F32), 0}, rawTensor{"z", []uint64{1}, uint32(quant.F32), 32}), ErrCorruption, "tensor z"},
		{"tensor name too long", one(rawTensor{strings.Repeat("n", 64), []uint64{1}, uint32(quant.F32), 0}), ErrCorruption, "tensor[0] name"},
		{"tensor name longer than file", patchTensorNameLen(), ErrCorruption, "tensor[0] name"},
		{"split without split.no", rawFile(3, []rawKV{{KeySplitCount, uint32(TypeUint16), []byte{3, 0}}}, nil, 32, 0), ErrCorruption, KeySplitNo},
		{"split.no >= split.count", rawFile(3, []rawKV{{KeySplitCount, uint32(TypeUint16), []byte{2, 0}}, {KeySplitNo, uint32(TypeUint16), []byte{2, 0}}}, nil, 32, 0), ErrCorruption, KeySplitNo},
		{"split with plain name", rawFile(3, []rawKV{{KeySplitCount, uint32(TypeUint16), []byte{2, 0}}, {KeySplitNo, uint32(TypeUint16), []byte{0, 0}}}, nil, 32, 0), ErrUnsupported, KeySplitCount},
	}
}

func TestCorruptFiles(t *testing.T) {
	cases := corruptCases()
	if len(cases) < 12 {
		t.Fatal("need at least 12 corrupt cases")
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			path := writeTemp(t, "bad.gguf", c.data)
			f, err := Open(path)
			if err == nil {
				t.Fatalf("Open succeeded (%d tensors), want %v", len(f.Tensors), c.want)
			}
			if !errors.Is(err, c.want) {
				t.Fatalf("err = %v, want %v", err, c.want)
			}
			other := ErrCorruption
			if c.want == ErrCorruption {
				other = ErrUnsupported
			}
			if errors.Is(err, other) {
				t.Errorf("err %v wraps both sentinels", err)
			}
			var fe *FormatError
			if !errors.As(err, &fe) {
				t.Fatalf("err %T is not a *FormatError", err)
			}
			if fe.File != path || !strings.Contains(err.Error(), path) {
				t.Errorf("error does not name the file: %v", err)
			}
			if !strings.Contains(fe.Field, c.field) {
				t.Errorf("field %q, want it to mention %q (%v)", fe.Field, c.field, err)
			}
			// Decode from memory agrees.
			if _, err2 := Decode(path, bytes.NewReader(c.data), int64(len(c.data))); err2 == nil && !strings.HasPrefix(c.name, "split") {
				t.Errorf("Decode accepted what Open rejected")
			}
		})
	}
	// The base layout itself is valid.
	if _, err := Open(writeTemp(t, "ok.gguf", corruptBase())); err != nil {
		t.Fatalf("base file: %v", err)
	}
}

// deepArray encodes arrays nested depth levels deep (innermost: empty u8 array).
func deepArray(depth int) []byte {
	var b []byte
	b = binary.LittleEndian.AppendUint32(b, uint32(TypeUint8))
	b = binary.LittleEndian.AppendUint64(b, 0)
	for i := 1; i < depth; i++ {
		h := binary.LittleEndian.AppendUint32(nil, uint32(TypeArray))
		h = binary.LittleEndian.AppendUint64(h, 1)
		b = append(h, b...)
	}
	return b
}

func patchTensorNameLen() []byte {
	b := rawFile(3, nil, []rawTensor{{"z", []uint64{1}, uint32(quant.F32), 0}}, 32, 32)
	binary.LittleEndian.PutUint64(b[24:], 1<<40)
	return b
}

// TestNoHugeAllocation: a header claiming enormous counts fails before
// allocating in proportion to the claim.
func TestNoHugeAllocation(t *testing.T) {
	b := rawFile(3, []rawKV{{"s", uint32(TypeArray), append(binary.LittleEndian.AppendUint32(nil, uint32(TypeString)), binary.LittleEndian.AppendUint64(nil, 1<<40)...)}}, nil, 32, 64)
	allocs := testing.AllocsPerRun(5, func() {
		_, _ = Decode("x", bytes.NewReader(b), int64(len(b)))
	})
	if allocs > 100 {
		t.Errorf("%.0f allocations for a rejected header", allocs)
	}
}

func TestOpenErrors(t *testing.T) {
	if _, err := Open(t.TempDir() + "/missing.gguf"); !errors.Is(err, os.ErrNotExist) {
		t.Errorf("missing file: %v", err)
	}
	if _, err := Open(t.TempDir()); !errors.Is(err, ErrUnsupported) {
		t.Errorf("directory: %v", err)
	}
}

// TestHugeAlignmentNoTensors is the regression test for the one slow input
// the fuzzer found: a valid file with general.alignment = 2^31 and no tensors.
// Open must accept it without touching the (absent) padding, and rewriting it
// is the caller's business (the fuzz harness skips the rewrite).
func TestHugeAlignmentNoTensors(t *testing.T) {
	b := rawFile(3, []rawKV{kvU32(KeyAlignment, 1<<31)}, nil, 32, 0)
	f, err := Open(writeTemp(t, "align.gguf", b))
	if err != nil {
		t.Fatal(err)
	}
	if f.Alignment != 1<<31 || f.DataOffset != 1<<31 || len(f.Tensors) != 0 {
		t.Errorf("alignment %d data offset %d", f.Alignment, f.DataOffset)
	}
	// With a tensor, the data offset past the end of the file is corruption.
	b = rawFile(3, []rawKV{kvU32(KeyAlignment, 1<<31)}, []rawTensor{{"t", []uint64{1}, uint32(quant.F32), 0}}, 32, 64)
	if _, err := Open(writeTemp(t, "align2.gguf", b)); !errors.Is(err, ErrCorruption) {
		t.Errorf("err = %v, want ErrCorruption", err)
	}
}
