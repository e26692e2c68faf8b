package gguf

import (
	"bufio"
	"encoding/binary"
	"errors"
	"fmt"
	"io"
	"math"

	"github.com/pipe-engine/pipe/quant"
)

// ErrWriter reports misuse of a Writer (wrong call order, wrong sizes,
// duplicate names, values that cannot be encoded).
var ErrWriter = errors.New("gguf writer")

// Writer writes a GGUF v3 file in the layout llama.cpp loads: magic, version,
// n_tensors, n_kv, the key/value pairs, the tensor infos (offsets relative to
// the data section, each padded to the alignment), padding to the alignment,
// then each tensor's data followed by padding to the alignment.
//
// Use: NewWriter, SetAlignment (optional), AddKV…, AddTensor…, WriteHeader,
// WriteTensor for every tensor in declaration order, Close. Close flushes but
// does not close the underlying io.Writer. Not safe for concurrent use.
type Writer struct {
	out       *bufio.Writer
	alignment uint64
	kv        []KV
	keys      map[string]bool
	tensors   []TensorInfo
	names     map[string]bool
	dataSize  uint64 // bytes of the data section so far (padded)
	header    bool   // WriteHeader done
	next      int    // next tensor to write
	written   uint64 // bytes written to out
	err       error  // sticky write error
}

func (w *Writer) nextTensor(name string) (*TensorInfo, error) {
	if !w.header {
		return nil, werr("tensor %q written before WriteHeader", name)
	}
	if w.next >= len(w.tensors) {
		return nil, werr("tensor %q: all %d declared tensors already written", name, len(w.tensors))
	}
	t := &w.tensors[w.next]
	if t.Name != name {
		return nil, werr("tensor %q: next tensor in declaration order is %q", name, t.Name)
	}
	return t, nil
}

// NewWriter returns a Writer that writes to out.
func NewWriter(out io.Writer) *Writer {
	return &Writer{
		out:       bufio.NewWriterSize(out, 64<<10),
		alignment: DefaultAlignment,
		keys:      map[string]bool{},
		names:     map[string]bool{},
	}
}

func werr(format string, args ...any) error {
	return fmt.Errorf("gguf writer: "+format+": %w", append(args, ErrWriter)...)
}

// SetAlignment sets the data alignment (a power of two). A value other than
// 32 is recorded as general.alignment (u32). It must precede AddTensor.
func (w *Writer) SetAlignment(n uint64) error {
	if n == 0 || n&(n-1) != 0 || n > math.MaxUint32 {
		return werr("alignment %d is not a power of two that fits in u32", n)
	}
	if len(w.tensors) > 0 || w.header {
		return werr("SetAlignment after AddTensor/WriteHeader")
	}
	w.alignment = n
	if n == DefaultAlignment && !w.keys[KeyAlignment] {
		return nil
	}
	v, _ := NewValue(uint32(n))
	if w.keys[KeyAlignment] {
		for i := range w.kv {
			if w.kv[i].Key == KeyAlignment {
				w.kv[i].Value = v
			}
		}
		return nil
	}
	w.keys[KeyAlignment] = true
	w.kv = append(w.kv, KV{Key: KeyAlignment, Value: v})
	return nil
}

// AddKV adds a metadata pair. v is any type NewValue accepts. Keys must be
// unique; general.alignment (as u32) also sets the alignment.
func (w *Writer) AddKV(key string, v any) error {
	if w.header {
		return werr("AddKV(%q) after WriteHeader", key)
	}
	if w.keys[key] {
		return werr("duplicate key %q", key)
	}
	val, err := NewValue(v)
	if err != nil {
		return fmt.Errorf("gguf writer: key %q: %w", key, err)
	}
	if key == KeyAlignment {
		a, ok := val.x.(uint32)
		if !ok {
			return werr("%s must be a uint32, got %T", KeyAlignment, v)
		}
		if err := w.SetAlignment(uint64(a)); err != nil {
			return err
		}
		if !w.keys[key] { // alignment 32 was not recorded by SetAlignment: record it as asked
			w.keys[key] = true
			w.kv = append(w.kv, KV{Key: key, Value: val})
		}
		return nil
	}
	w.keys[key] = true
	w.kv = append(w.kv, KV{Key: key, Value: val})
	return nil
}

// AddTensor declares a tensor; its data follows the previous tensor's,
// padded to the alignment. dims are in ggml order (ne[0] fastest).
func (w *Writer) AddTensor(name string, t quant.Type, dims []uint64) error {
	if w.header {
		return werr("AddTensor(%q) after WriteHeader", name)
	}
	if len(name) == 0 || len(name) > MaxNameLen {
		return werr("tensor name %q must be 1 to %d bytes", name, MaxNameLen)
	}
	if w.names[name] {
		return werr("duplicate tensor %q", name)
	}
	if len(dims) == 0 || len(dims) > MaxDims {
		return werr("tensor %q has %d dimensions, want 1 to %d", name, len(dims), MaxDims)
	}
	elems := uint64(1)
	for j, d := range dims {
		if d == 0 || d > math.MaxInt64 {
			return werr("tensor %q dimension %d is %d", name, j, d)
		}
		if elems > math.MaxInt64/d {
			return werr("tensor %q element count overflows", name)
		}
		elems *= d
	}
	st, err := strides(t, dims)
	if err != nil {
		return werr("tensor %q: %v", name, err)
	}
	ti := TensorInfo{Name: name, Type: t, Dims: append([]uint64(nil), dims...), Strides: st, RelOff: w.dataSize}
	ti.Size = st[3] * ti.Ne()[3]
	w.dataSize += alignUp(ti.Size, w.alignment)
	w.names[name] = true
	w.tensors = append(w.tensors, ti)
	return nil
}

func (w *Writer) write(p []byte) {
	if w.err != nil {
		return
	}
	n, err := w.out.Write(p)
	w.written += uint64(n)
	if err != nil {
		w.err = fmt.Errorf("gguf writer: %w", err)
	}
}

func (w *Writer) u32(v uint32) {
	var b [4]byte
	binary.LittleEndian.PutUint32(b[:], v)
	w.write(b[:])
}

func (w *Writer) u64(v uint64) {
	var b [8]byte
	binary.LittleEndian.PutUint64(b[:], v)
	w.write(b[:])
}

func (w *Writer) str(s string) {
	w.u64(uint64(len(s)))
	w.write([]byte(s))
}

func (w *Writer) pad() {
	if r := w.written % w.alignment; r != 0 {
		w.write(make([]byte, w.alignment-r))
	}
}

// WriteHeader writes everything before the tensor data: header, metadata,
// tensor infos and padding to the alignment, and flushes it to out.
func (w *Writer) WriteHeader() error {
	if w.header {
		return werr("WriteHeader called twice")
	}
	w.header = true
	w.write([]byte(Magic))
	w.u32(3)
	w.u64(uint64(len(w.tensors)))
	w.u64(uint64(len(w.kv)))
	for _, kv := range w.kv {
		w.str(kv.Key)
		w.u32(uint32(kv.Value.Type))
		if err := w.value(kv.Value); err != nil {
			return fmt.Errorf("gguf writer: key %q: %w", kv.Key, err)
		}
	}
	for _, t := range w.tensors {
		w.str(t.Name)
		w.u32(uint32(len(t.Dims)))
		for _, d := range t.Dims {
			w.u64(d)
		}
		w.u32(uint32(t.Type))
		w.u64(t.RelOff)
	}
	w.pad()
	for i := range w.tensors {
		w.tensors[i].Offset = w.written + w.tensors[i].RelOff
	}
	if w.err == nil {
		if err := w.out.Flush(); err != nil { // the header is complete on out
			w.err = fmt.Errorf("gguf writer: %w", err)
		}
	}
	return w.err
}

func (w *Writer) value(v Value) error {
	le := binary.LittleEndian
	switch x := v.x.(type) {
	case uint8:
		w.write([]byte{x})
	case int8:
		w.write([]byte{byte(x)})
	case bool:
		b := byte(0)
		if x {
			b = 1
		}
		w.write([]byte{b})
	case uint16:
		w.write(le.AppendUint16(nil, x))
	case int16:
		w.write(le.AppendUint16(nil, uint16(x)))
	case uint32:
		w.u32(x)
	case int32:
		w.u32(uint32(x))
	case float32:
		w.u32(math.Float32bits(x))
	case uint64:
		w.u64(x)
	case int64:
		w.u64(uint64(x))
	case float64:
		w.u64(math.Float64bits(x))
	case string:
		w.str(x)
	default:
		if v.Type != TypeArray {
			return fmt.Errorf("value of type %v holds %T: %w", v.Type, v.x, ErrWrongType)
		}
		w.u32(uint32(v.Elem))
		n := v.Len()
		w.u64(uint64(n))
		if nested, ok := v.x.([]Value); ok {
			for _, e := range nested {
				if e.Type != TypeArray {
					return fmt.Errorf("nested array element is %v, want %v: %w", e.Type, v.Elem, ErrWrongType)
				}
				if err := w.value(e); err != nil {
					return err
				}
			}
			return nil
		}
		for i := 0; i < n; i++ {
			e, _ := v.Index(i)
			if err := w.value(e); err != nil {
				return err
			}
		}
	}
	return w.err
}

// WriteTensor writes the data of the next declared tensor; name must be that
// tensor's and len(data) its size. The data is followed by padding.
func (w *Writer) WriteTensor(name string, data []byte) error {
	t, err := w.nextTensor(name)
	if err != nil {
		return err
	}
	if uint64(len(data)) != t.Size {
		return werr("WriteTensor(%q): %d bytes, want %d", name, len(data), t.Size)
	}
	w.write(data)
	w.pad()
	w.next++
	return w.err
}

// Close checks that every declared tensor was written and flushes. It does
// not close the underlying writer.
func (w *Writer) Close() error {
	if !w.header {
		if err := w.WriteHeader(); err != nil {
			return err
		}
	}
	if w.next != len(w.tensors) {
		return werr("Close: %d of %d tensors written (next: %q)", w.next, len(w.tensors), w.tensors[w.next].Name)
	}
	if w.err != nil {
		return w.err
	}
	if err := w.out.Flush(); err != nil {
		return fmt.Errorf("gguf writer: %w", err)
	}
	return nil
}
