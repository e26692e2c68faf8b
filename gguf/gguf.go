// Package gguf reads and writes GGUF model files (versions 2 and 3), the
// container llama.cpp uses for weights and metadata.
//
// Role in the pipeline: gguf sits at the bottom of the import graph. Open
// parses the header, the metadata key/value pairs and the tensor infos of a
// model (all shards of a split model) and returns a File that describes where
// every tensor's bytes live (shard, absolute offset, size, strides). It never
// reads tensor data: the reader lanes, the dense loader and the tests read the
// bytes themselves with whatever I/O discipline they need (O_DIRECT, mmap …).
// The Writer produces files in the exact layout llama.cpp loads.
//
// Invariants of a File returned by Open: every tensor's type is known to
// package quant, its dimensions are non-zero, at most 4, their product fits in
// int64, its first dimension is a whole number of blocks, its data lies inside
// its shard's file after the data offset, starts on a multiple of the
// alignment (relative to the data section) and overlaps no other tensor; no
// two tensors share a name and no two keys repeat within a shard.
//
// Hostile input: every length, count and offset read from a file is checked
// against the bytes left in the file before anything is allocated, so a
// corrupt header fails with an error instead of a huge allocation, a panic or
// a hang. Every error from Open wraps ErrCorruption (the file is malformed) or
// ErrUnsupported (well-formed but outside what this package reads, e.g. GGUF
// v1) and is a *FormatError naming the file and the field or tensor.
//
// Ownership and concurrency: a File is immutable after Open and safe for
// concurrent readers; its slices must not be modified by callers. A Writer is
// not safe for concurrent use.
package gguf

import (
	"errors"
	"fmt"
	"math"
	"strings"

	"github.com/pipe-engine/pipe/quant"
)

// Sentinel errors. Every error returned by Open wraps exactly one of them.
var (
	// ErrCorruption marks a file that violates the GGUF format or is truncated.
	ErrCorruption = errors.New("corrupt GGUF file")
	// ErrUnsupported marks a well-formed file that uses something this package
	// does not read (GGUF v1, a future version, big-endian files …).
	ErrUnsupported = errors.New("unsupported GGUF file")
	// ErrMissingKey is returned by the typed getters when a key is absent.
	ErrMissingKey = errors.New("missing GGUF key")
	// ErrWrongType is returned by the typed getters when a key holds a value
	// of a type that cannot be converted to the one asked for.
	ErrWrongType = errors.New("GGUF key has the wrong type")
)

// FormatError is the error type of Open: it names the file and the field (or
// tensor) at fault, and unwraps to ErrCorruption or ErrUnsupported.
type FormatError struct {
	File  string // path of the file (shard) at fault
	Field string // e.g. "header.n_tensors", "kv[3] general.alignment", "tensor blk.0.attn_q.weight"
	Msg   string
	Err   error // ErrCorruption or ErrUnsupported
}

func (e *FormatError) Error() string {
	return fmt.Sprintf("%s: %s: %s (%v)", e.File, e.Field, e.Msg, e.Err)
}

func (e *FormatError) Unwrap() error { return e.Err }

// Magic is the four bytes every GGUF file starts with.
const Magic = "GGUF"

// DefaultAlignment is the data alignment used when general.alignment is absent.
const DefaultAlignment = 32

// MaxDims is ggml's GGML_MAX_DIMS.
const MaxDims = 4

// MaxNameLen is the longest tensor name llama.cpp accepts (GGML_MAX_NAME - 1).
const MaxNameLen = 63

// maxArrayDepth bounds nested arrays (llama.cpp reads none; gguf-py writes them).
const maxArrayDepth = 8

// Well-known keys.
const (
	KeyAlignment         = "general.alignment"
	KeyArchitecture      = "general.architecture"
	KeySplitNo           = "split.no"
	KeySplitCount        = "split.count"
	KeySplitTensorsCount = "split.tensors.count"
)

// ValueType is the type tag of a metadata value (gguf_type).
type ValueType uint32

// The metadata value types, numbered as in the file format.
const (
	TypeUint8   ValueType = 0
	TypeInt8    ValueType = 1
	TypeUint16  ValueType = 2
	TypeInt16   ValueType = 3
	TypeUint32  ValueType = 4
	TypeInt32   ValueType = 5
	TypeFloat32 ValueType = 6
	TypeBool    ValueType = 7
	TypeString  ValueType = 8
	TypeArray   ValueType = 9
	TypeUint64  ValueType = 10
	TypeInt64   ValueType = 11
	TypeFloat64 ValueType = 12
)

var valueTypeNames = [...]string{"u8", "i8", "u16", "i16", "u32", "i32", "f32", "bool", "str", "arr", "u64", "i64", "f64"}

// String returns the short name llama.cpp prints ("u32", "str", "arr" …).
func (t ValueType) String() string {
	if int(t) < len(valueTypeNames) {
		return valueTypeNames[t]
	}
	return fmt.Sprintf("type(%d)", uint32(t))
}

// Valid reports whether t is one of the 13 defined value types.
func (t ValueType) Valid() bool { return t <= TypeFloat64 }

// size is the encoded size of a scalar of type t (0 for string and array).
func (t ValueType) size() int {
	switch t {
	case TypeUint8, TypeInt8, TypeBool:
		return 1
	case TypeUint16, TypeInt16:
		return 2
	case TypeUint32, TypeInt32, TypeFloat32:
		return 4
	case TypeUint64, TypeInt64, TypeFloat64:
		return 8
	}
	return 0
}

// minSize is the fewest bytes one encoded element of type t can take.
func (t ValueType) minSize() int {
	switch t {
	case TypeString:
		return 8
	case TypeArray:
		return 12
	}
	return t.size()
}

// Value is one metadata value. Scalars hold the Go type of the same width
// (uint8 … float64, bool, string). Arrays hold a typed slice ([]uint8 …
// []float64, []bool, []string) or, for nested arrays, []Value.
type Value struct {
	Type ValueType // the value's type
	Elem ValueType // for arrays: the element type
	x    any
}

// NewValue makes a Value from a Go value: uint8, int8, uint16, int16, uint32,
// int32, float32, bool, string, uint64, int64, float64, a slice of any of
// those, a []Value (nested array; every element must be an array … or any
// Value type, all of the same type), or a Value itself.
func NewValue(v any) (Value, error) {
	switch x := v.(type) {
	case Value:
		return x, nil
	case uint8:
		return Value{Type: TypeUint8, x: x}, nil
	case int8:
		return Value{Type: TypeInt8, x: x}, nil
	case uint16:
		return Value{Type: TypeUint16, x: x}, nil
	case int16:
		return Value{Type: TypeInt16, x: x}, nil
	case uint32:
		return Value{Type: TypeUint32, x: x}, nil
	case int32:
		return Value{Type: TypeInt32, x: x}, nil
	case float32:
		return Value{Type: TypeFloat32, x: x}, nil
	case bool:
		return Value{Type: TypeBool, x: x}, nil
	case string:
		return Value{Type: TypeString, x: x}, nil
	case uint64:
		return Value{Type: TypeUint64, x: x}, nil
	case int64:
		return Value{Type: TypeInt64, x: x}, nil
	case float64:
		return Value{Type: TypeFloat64, x: x}, nil
	case []uint8:
		return Value{Type: TypeArray, Elem: TypeUint8, x: x}, nil
	case []int8:
		return Value{Type: TypeArray, Elem: TypeInt8, x: x}, nil
	case []uint16:
		return Value{Type: TypeArray, Elem: TypeUint16, x: x}, nil
	case []int16:
		return Value{Type: TypeArray, Elem: TypeInt16, x: x}, nil
	case []uint32:
		return Value{Type: TypeArray, Elem: TypeUint32, x: x}, nil
	case []int32:
		return Value{Type: TypeArray, Elem: TypeInt32, x: x}, nil
	case []float32:
		return Value{Type: TypeArray, Elem: TypeFloat32, x: x}, nil
	case []bool:
		return Value{Type: TypeArray, Elem: TypeBool, x: x}, nil
	case []string:
		return Value{Type: TypeArray, Elem: TypeString, x: x}, nil
	case []uint64:
		return Value{Type: TypeArray, Elem: TypeUint64, x: x}, nil
	case []int64:
		return Value{Type: TypeArray, Elem: TypeInt64, x: x}, nil
	case []float64:
		return Value{Type: TypeArray, Elem: TypeFloat64, x: x}, nil
	case []Value:
		if len(x) == 0 {
			return Value{}, fmt.Errorf("gguf: empty []Value has no element type: %w", ErrWrongType)
		}
		if err := checkNested(x, 1); err != nil {
			return Value{}, err
		}
		return Value{Type: TypeArray, Elem: TypeArray, x: x}, nil
	}
	return Value{}, fmt.Errorf("gguf: cannot store a %T as a metadata value: %w", v, ErrWrongType)
}

func checkNested(vs []Value, depth int) error {
	if depth > maxArrayDepth {
		return fmt.Errorf("gguf: arrays nested deeper than %d: %w", maxArrayDepth, ErrWrongType)
	}
	for i, v := range vs {
		if v.Type != TypeArray {
			return fmt.Errorf("gguf: element %d of a nested array is a %v, not an array: %w", i, v.Type, ErrWrongType)
		}
		if inner, ok := v.x.([]Value); ok {
			if err := checkNested(inner, depth+1); err != nil {
				return err
			}
		}
	}
	return nil
}

// Any returns the value as a Go value (see Value).
func (v Value) Any() any { return v.x }

// Len returns the number of elements of an array (0 for scalars).
func (v Value) Len() int {
	switch x := v.x.(type) {
	case []uint8:
		return len(x)
	case []int8:
		return len(x)
	case []uint16:
		return len(x)
	case []int16:
		return len(x)
	case []uint32:
		return len(x)
	case []int32:
		return len(x)
	case []float32:
		return len(x)
	case []bool:
		return len(x)
	case []string:
		return len(x)
	case []uint64:
		return len(x)
	case []int64:
		return len(x)
	case []float64:
		return len(x)
	case []Value:
		return len(x)
	}
	return 0
}

// Uint returns an integer value (of any integer type) as uint64; ok is false
// for non-integers and negative values.
func (v Value) Uint() (uint64, bool) {
	switch x := v.x.(type) {
	case uint8:
		return uint64(x), true
	case uint16:
		return uint64(x), true
	case uint32:
		return uint64(x), true
	case uint64:
		return x, true
	case int8, int16, int32, int64:
		i, _ := v.Int()
		if i < 0 {
			return 0, false
		}
		return uint64(i), true
	}
	return 0, false
}

// Int returns an integer value (of any integer type) as int64; ok is false for
// non-integers and for uint64 values above math.MaxInt64.
func (v Value) Int() (int64, bool) {
	switch x := v.x.(type) {
	case int8:
		return int64(x), true
	case int16:
		return int64(x), true
	case int32:
		return int64(x), true
	case int64:
		return x, true
	case uint8, uint16, uint32, uint64:
		u, _ := v.Uint()
		if u > math.MaxInt64 {
			return 0, false
		}
		return int64(u), true
	}
	return 0, false
}

// Float returns a float or integer value as float64.
func (v Value) Float() (float64, bool) {
	switch x := v.x.(type) {
	case float32:
		return float64(x), true
	case float64:
		return x, true
	}
	if i, ok := v.Int(); ok {
		return float64(i), true
	}
	if u, ok := v.Uint(); ok {
		return float64(u), true
	}
	return 0, false
}

// Bool returns a bool value.
func (v Value) Bool() (bool, bool) { b, ok := v.x.(bool); return b, ok }

// Str returns a string value.
func (v Value) Str() (string, bool) { s, ok := v.x.(string); return s, ok }

// Strings returns an array of strings.
func (v Value) Strings() ([]string, bool) { s, ok := v.x.([]string); return s, ok }

// Ints returns an array of any integer type as []int64 (a copy); ok is false
// for other arrays and for uint64 elements above math.MaxInt64.
func (v Value) Ints() ([]int64, bool) {
	if v.Type != TypeArray {
		return nil, false
	}
	n := v.Len()
	out := make([]int64, n)
	for i := 0; i < n; i++ {
		e, ok := v.Index(i)
		if !ok {
			return nil, false
		}
		x, ok := e.Int()
		if !ok {
			return nil, false
		}
		out[i] = x
	}
	return out, true
}

// Floats returns a numeric array as []float64 (a copy).
func (v Value) Floats() ([]float64, bool) {
	if v.Type != TypeArray {
		return nil, false
	}
	n := v.Len()
	out := make([]float64, n)
	for i := 0; i < n; i++ {
		e, ok := v.Index(i)
		if !ok {
			return nil, false
		}
		x, ok := e.Float()
		if !ok {
			return nil, false
		}
		out[i] = x
	}
	return out, true
}

// Index returns element i of an array as a Value.
func (v Value) Index(i int) (Value, bool) {
	if v.Type != TypeArray || i < 0 || i >= v.Len() {
		return Value{}, false
	}
	var e any
	switch x := v.x.(type) {
	case []uint8:
		e = x[i]
	case []int8:
		e = x[i]
	case []uint16:
		e = x[i]
	case []int16:
		e = x[i]
	case []uint32:
		e = x[i]
	case []int32:
		e = x[i]
	case []float32:
		e = x[i]
	case []bool:
		e = x[i]
	case []string:
		e = x[i]
	case []uint64:
		e = x[i]
	case []int64:
		e = x[i]
	case []float64:
		e = x[i]
	case []Value:
		return x[i], true
	}
	r, err := NewValue(e)
	return r, err == nil
}

// String formats the value for humans; long arrays and strings are abbreviated.
func (v Value) String() string {
	if v.Type != TypeArray {
		if s, ok := v.x.(string); ok {
			if len(s) > 60 {
				s = s[:57] + "..."
			}
			return fmt.Sprintf("%q", s)
		}
		return fmt.Sprint(v.x)
	}
	n := v.Len()
	var b strings.Builder
	fmt.Fprintf(&b, "arr[%v,%d] [", v.Elem, n)
	for i := 0; i < n && i < 6; i++ {
		if i > 0 {
			b.WriteString(", ")
		}
		e, _ := v.Index(i)
		b.WriteString(e.String())
	}
	if n > 6 {
		b.WriteString(", ...")
	}
	b.WriteString("]")
	return b.String()
}

// KV is one metadata key/value pair.
type KV struct {
	Key   string
	Value Value
}

// TensorInfo describes one tensor: where its bytes are and how they are laid out.
type TensorInfo struct {
	Name    string
	Type    quant.Type
	Dims    []uint64  // ggml order, ne[0] fastest; 1 to 4 entries
	Shard   int       // index into File.Shards
	Offset  uint64    // absolute offset of the first byte in the shard's file
	RelOff  uint64    // offset relative to the shard's data section (as stored)
	Size    uint64    // bytes
	Strides [4]uint64 // ggml nb[0..3]: bytes between consecutive elements along each dimension (nb[0] = block bytes)
}

// Ne returns the dimensions padded to 4 with ones (ggml's ne[0..3]).
func (t *TensorInfo) Ne() [4]uint64 {
	ne := [4]uint64{1, 1, 1, 1}
	copy(ne[:], t.Dims)
	return ne
}

// Elements returns the number of elements.
func (t *TensorInfo) Elements() uint64 {
	n := uint64(1)
	for _, d := range t.Dims {
		n *= d
	}
	return n
}

// RowSize returns the bytes of one row (ne[0] elements), i.e. nb[1].
func (t *TensorInfo) RowSize() uint64 { return t.Strides[1] }

// Shard is one file of a (possibly split) model.
type Shard struct {
	Path       string
	Size       uint64 // file size in bytes
	Version    uint32
	Alignment  uint64
	DataOffset uint64 // absolute offset of the data section
	KV         []KV   // this shard's own metadata
	NTensors   int    // tensors stored in this shard
}

// File is an opened model: the metadata of the first shard and the tensors of
// all shards.
type File struct {
	Path       string // path of the first shard
	Version    uint32
	Alignment  uint64
	DataOffset uint64 // data offset of the first shard
	KV         []KV   // metadata of the first shard
	Tensors    []TensorInfo
	Shards     []Shard

	kvIndex     map[string]int
	tensorIndex map[string]int
}

func (f *File) index() {
	f.kvIndex = make(map[string]int, len(f.KV))
	for i, kv := range f.KV {
		f.kvIndex[kv.Key] = i
	}
	f.tensorIndex = make(map[string]int, len(f.Tensors))
	for i := range f.Tensors {
		f.tensorIndex[f.Tensors[i].Name] = i
	}
}

// Get returns the value of key.
func (f *File) Get(key string) (Value, bool) {
	if f.kvIndex == nil { // a File built by hand: no index
		for i := range f.KV {
			if f.KV[i].Key == key {
				return f.KV[i].Value, true
			}
		}
		return Value{}, false
	}
	i, ok := f.kvIndex[key]
	if !ok {
		return Value{}, false
	}
	return f.KV[i].Value, true
}

// Tensor returns the tensor called name.
func (f *File) Tensor(name string) (*TensorInfo, bool) {
	if f.tensorIndex == nil { // a File built by hand: no index
		for i := range f.Tensors {
			if f.Tensors[i].Name == name {
				return &f.Tensors[i], true
			}
		}
		return nil, false
	}
	i, ok := f.tensorIndex[name]
	if !ok {
		return nil, false
	}
	return &f.Tensors[i], true
}

// Architecture returns general.architecture ("" when absent).
func (f *File) Architecture() string {
	s, _ := f.GetString(KeyArchitecture)
	return s
}

func (f *File) get(key string) (Value, error) {
	v, ok := f.Get(key)
	if !ok {
		return Value{}, fmt.Errorf("%s: %s: %w", f.Path, key, ErrMissingKey)
	}
	return v, nil
}

func (f *File) wrongType(key string, v Value, want string) error {
	t := v.Type.String()
	if v.Type == TypeArray {
		t = fmt.Sprintf("arr[%v]", v.Elem)
	}
	return fmt.Errorf("%s: %s is %s, want %s: %w", f.Path, key, t, want, ErrWrongType)
}

// GetString returns a string value.
func (f *File) GetString(key string) (string, error) {
	v, err := f.get(key)
	if err != nil {
		return "", err
	}
	s, ok := v.Str()
	if !ok {
		return "", f.wrongType(key, v, "str")
	}
	return s, nil
}

// GetUint returns a non-negative integer value of any integer type.
func (f *File) GetUint(key string) (uint64, error) {
	v, err := f.get(key)
	if err != nil {
		return 0, err
	}
	u, ok := v.Uint()
	if !ok {
		return 0, f.wrongType(key, v, "a non-negative integer")
	}
	return u, nil
}

// GetInt returns an integer value of any integer type.
func (f *File) GetInt(key string) (int64, error) {
	v, err := f.get(key)
	if err != nil {
		return 0, err
	}
	i, ok := v.Int()
	if !ok {
		return 0, f.wrongType(key, v, "an integer")
	}
	return i, nil
}

// GetFloat returns a float (or integer) value as float64.
func (f *File) GetFloat(key string) (float64, error) {
	v, err := f.get(key)
	if err != nil {
		return 0, err
	}
	x, ok := v.Float()
	if !ok {
		return 0, f.wrongType(key, v, "a number")
	}
	return x, nil
}

// GetBool returns a bool value.
func (f *File) GetBool(key string) (bool, error) {
	v, err := f.get(key)
	if err != nil {
		return false, err
	}
	b, ok := v.Bool()
	if !ok {
		return false, f.wrongType(key, v, "bool")
	}
	return b, nil
}

// GetArray returns an array value.
func (f *File) GetArray(key string) (Value, error) {
	v, err := f.get(key)
	if err != nil {
		return Value{}, err
	}
	if v.Type != TypeArray {
		return Value{}, f.wrongType(key, v, "arr")
	}
	return v, nil
}

// GetStrings returns an array of strings.
func (f *File) GetStrings(key string) ([]string, error) {
	v, err := f.get(key)
	if err != nil {
		return nil, err
	}
	s, ok := v.Strings()
	if !ok {
		return nil, f.wrongType(key, v, "arr[str]")
	}
	return s, nil
}

// GetInts returns an array of integers as []int64.
func (f *File) GetInts(key string) ([]int64, error) {
	v, err := f.get(key)
	if err != nil {
		return nil, err
	}
	s, ok := v.Ints()
	if !ok {
		return nil, f.wrongType(key, v, "an integer array")
	}
	return s, nil
}

// GetFloats returns a numeric array as []float64.
func (f *File) GetFloats(key string) ([]float64, error) {
	v, err := f.get(key)
	if err != nil {
		return nil, err
	}
	s, ok := v.Floats()
	if !ok {
		return nil, f.wrongType(key, v, "a numeric array")
	}
	return s, nil
}

// TensorBytes returns the total bytes of all tensors.
func (f *File) TensorBytes() uint64 {
	var n uint64
	for i := range f.Tensors {
		n += f.Tensors[i].Size
	}
	return n
}
