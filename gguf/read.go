package gguf

import (
	"bufio"
	"encoding/binary"
	"errors"
	"fmt"
	"io"
	"math"
	"math/bits"
	"os"
	"path/filepath"
	"regexp"
	"sort"
	"strconv"
	"strings"

	"github.com/pipe-engine/pipe/internal/safefile"
	"github.com/pipe-engine/pipe/quant"
)

// Minimum encoded sizes, used to reject absurd counts before allocating.
const (
	minKVBytes     = 8 + 4 + 1         // key length, type, smallest value
	minTensorBytes = 8 + 4 + 8 + 4 + 8 // name length, n_dims, one dim, type, offset
)

// decoder reads a GGUF header through a bounded reader: it knows the file
// size and refuses to read or allocate past it.
type decoder struct {
	r    *bufio.Reader
	path string
	pos  uint64
	size uint64
	buf  [8]byte
}

func (d *decoder) errf(sentinel error, field, format string, args ...any) error {
	return &FormatError{File: d.path, Field: field, Msg: fmt.Sprintf(format, args...), Err: sentinel}
}

func (d *decoder) remaining() uint64 { return d.size - d.pos }

// need fails unless n more bytes exist in the file.
func (d *decoder) need(n uint64, field string) error {
	if n > d.remaining() {
		return d.errf(ErrCorruption, field, "truncated: needs %d bytes at offset %d, file has %d", n, d.pos, d.size)
	}
	return nil
}

// read fills p after checking it fits in the file.
func (d *decoder) read(p []byte, field string) error {
	if err := d.need(uint64(len(p)), field); err != nil {
		return err
	}
	if _, err := io.ReadFull(d.r, p); err != nil {
		if errors.Is(err, io.EOF) || errors.Is(err, io.ErrUnexpectedEOF) {
			return d.errf(ErrCorruption, field, "truncated at offset %d (file shrank while reading?)", d.pos)
		}
		return &FormatError{File: d.path, Field: field, Msg: "read: " + err.Error(), Err: ErrCorruption}
	}
	d.pos += uint64(len(p))
	return nil
}

func (d *decoder) u8(field string) (uint8, error) {
	err := d.read(d.buf[:1], field)
	return d.buf[0], err
}

func (d *decoder) u16(field string) (uint16, error) {
	err := d.read(d.buf[:2], field)
	return binary.LittleEndian.Uint16(d.buf[:2]), err
}

func (d *decoder) u32(field string) (uint32, error) {
	err := d.read(d.buf[:4], field)
	return binary.LittleEndian.Uint32(d.buf[:4]), err
}

func (d *decoder) u64(field string) (uint64, error) {
	err := d.read(d.buf[:8], field)
	return binary.LittleEndian.Uint64(d.buf[:8]), err
}

// str reads a GGUF string (u64 length + bytes), checking the length against
// the file first; max additionally bounds it (0 = no extra bound).
func (d *decoder) str(field string, max uint64) (string, error) {
	n, err := d.u64(field + " length")
	if err != nil {
		return "", err
	}
	if n > d.remaining() {
		return "", d.errf(ErrCorruption, field, "string of %d bytes at offset %d is longer than the %d bytes left in the file", n, d.pos-8, d.remaining())
	}
	if max > 0 && n > max {
		return "", d.errf(ErrCorruption, field, "string of %d bytes is longer than the limit of %d", n, max)
	}
	b := make([]byte, n)
	if err := d.read(b, field); err != nil {
		return "", err
	}
	return string(b), nil
}

// strings reads an array of n strings (n already checked against the file).
// The bytes of all elements go into one builder and the elements are
// substrings of its result: two allocations per chunk of the array instead of
// two per string, which matters for 150k-token vocabularies.
func (d *decoder) strings(n uint64, field string) ([]string, error) {
	out := make([]string, n)
	ends := make([]int, n)
	var b strings.Builder
	start := 0 // index of the first element not yet cut out of b
	flush := func(upto int) {
		all := b.String()
		prev := 0
		for j := start; j < upto; j++ {
			out[j] = all[prev:ends[j]]
			prev = ends[j]
		}
		start = upto
		b = strings.Builder{}
	}
	const chunk = 4 << 20 // bound the builder's doubling copies
	for i := 0; i < int(n); i++ {
		l, err := d.u64(field) // (no per-element field string: it would dominate)
		if err != nil {
			return nil, elementError(err, field, i)
		}
		if l > d.remaining() {
			return nil, elementError(d.errf(ErrCorruption, field, "string of %d bytes at offset %d is longer than the %d bytes left in the file", l, d.pos-8, d.remaining()), field, i)
		}
		if b.Len() > 0 && uint64(b.Len())+l > chunk {
			flush(i)
		}
		if b.Len() == 0 {
			// Guess: the rest are as long as this one, bounded by the chunk
			// and by what is left in the file (no allocation beyond it).
			guess := uint64(chunk)
			if hi, lo := bits.Mul64(l, n-uint64(i)); hi == 0 && lo < guess {
				guess = lo
			}
			b.Grow(int(min(guess, d.remaining())))
		}
		for l > 0 {
			m := int(min(l, uint64(d.r.Size())))
			p, err := d.r.Peek(m)
			if err != nil {
				return nil, elementError(d.errf(ErrCorruption, field, "truncated at offset %d (file shrank while reading?)", d.pos), field, i)
			}
			b.Write(p)
			_, _ = d.r.Discard(m)
			d.pos += uint64(m)
			l -= uint64(m)
		}
		ends[i] = b.Len()
	}
	flush(int(n))
	return out, nil
}

// scalar reads one scalar of type t.
func (d *decoder) scalar(t ValueType, field string) (any, error) {
	switch t {
	case TypeUint8:
		return d.u8(field)
	case TypeInt8:
		v, err := d.u8(field)
		return int8(v), err
	case TypeUint16:
		return d.u16(field)
	case TypeInt16:
		v, err := d.u16(field)
		return int16(v), err
	case TypeUint32:
		return d.u32(field)
	case TypeInt32:
		v, err := d.u32(field)
		return int32(v), err
	case TypeFloat32:
		v, err := d.u32(field)
		return math.Float32frombits(v), err
	case TypeBool:
		v, err := d.u8(field)
		if err != nil {
			return nil, err
		}
		if v > 1 {
			return nil, d.errf(ErrCorruption, field, "bool byte is %d, want 0 or 1", v)
		}
		return v == 1, nil
	case TypeString:
		return d.str(field, 0)
	case TypeUint64:
		return d.u64(field)
	case TypeInt64:
		v, err := d.u64(field)
		return int64(v), err
	case TypeFloat64:
		v, err := d.u64(field)
		return math.Float64frombits(v), err
	}
	return nil, d.errf(ErrCorruption, field, "invalid value type %d", uint32(t))
}

// value reads a value of type t (arrays included).
func (d *decoder) value(t ValueType, field string, depth int) (Value, error) {
	if t != TypeArray {
		if !t.Valid() {
			return Value{}, d.errf(ErrCorruption, field, "invalid value type %d", uint32(t))
		}
		x, err := d.scalar(t, field)
		if err != nil {
			return Value{}, err
		}
		return Value{Type: t, x: x}, nil
	}
	if depth >= maxArrayDepth {
		return Value{}, d.errf(ErrUnsupported, field, "arrays nested deeper than %d", maxArrayDepth)
	}
	et, err := d.u32(field + " element type")
	if err != nil {
		return Value{}, err
	}
	elem := ValueType(et)
	if !elem.Valid() {
		return Value{}, d.errf(ErrCorruption, field, "array has invalid element type %d", et)
	}
	n, err := d.u64(field + " count")
	if err != nil {
		return Value{}, err
	}
	min := uint64(elem.minSize())
	if hi, lo := bits.Mul64(n, min); hi != 0 || lo > d.remaining() {
		return Value{}, d.errf(ErrCorruption, field, "array of %d %v elements needs at least %d×%d bytes, only %d left in the file", n, elem, n, min, d.remaining())
	}
	v := Value{Type: TypeArray, Elem: elem}
	switch elem {
	case TypeString:
		s, err := d.strings(n, field)
		if err != nil {
			return Value{}, err
		}
		v.x = s
	case TypeArray:
		s := make([]Value, n)
		for i := range s {
			if s[i], err = d.value(TypeArray, field, depth+1); err != nil {
				return Value{}, elementError(err, field, i)
			}
		}
		v.x = s
	default:
		raw := make([]byte, n*min)
		if err := d.read(raw, field); err != nil {
			return Value{}, err
		}
		if v.x, err = decodeNumbers(elem, raw); err != nil {
			return Value{}, d.errf(ErrCorruption, field, "%v", err)
		}
	}
	return v, nil
}

// elementError names element i of array field in err (built only on
// failure: formatting a field name per element would dominate parsing).
func elementError(err error, field string, i int) error {
	var fe *FormatError
	if errors.As(err, &fe) && strings.HasPrefix(fe.Field, field) {
		fe.Field = fmt.Sprintf("%s[%d]%s", field, i, strings.TrimPrefix(fe.Field, field))
	}
	return err
}

// decodeNumbers converts little-endian raw bytes to a typed slice.
func decodeNumbers(t ValueType, raw []byte) (any, error) {
	le := binary.LittleEndian
	switch t {
	case TypeUint8:
		return raw, nil
	case TypeInt8:
		s := make([]int8, len(raw))
		for i, b := range raw {
			s[i] = int8(b)
		}
		return s, nil
	case TypeBool:
		s := make([]bool, len(raw))
		for i, b := range raw {
			if b > 1 {
				return nil, fmt.Errorf("bool element %d is %d, want 0 or 1", i, b)
			}
			s[i] = b == 1
		}
		return s, nil
	case TypeUint16:
		s := make([]uint16, len(raw)/2)
		for i := range s {
			s[i] = le.Uint16(raw[2*i:])
		}
		return s, nil
	case TypeInt16:
		s := make([]int16, len(raw)/2)
		for i := range s {
			s[i] = int16(le.Uint16(raw[2*i:]))
		}
		return s, nil
	case TypeUint32:
		s := make([]uint32, len(raw)/4)
		for i := range s {
			s[i] = le.Uint32(raw[4*i:])
		}
		return s, nil
	case TypeInt32:
		s := make([]int32, len(raw)/4)
		for i := range s {
			s[i] = int32(le.Uint32(raw[4*i:]))
		}
		return s, nil
	case TypeFloat32:
		s := make([]float32, len(raw)/4)
		for i := range s {
			s[i] = math.Float32frombits(le.Uint32(raw[4*i:]))
		}
		return s, nil
	case TypeUint64:
		s := make([]uint64, len(raw)/8)
		for i := range s {
			s[i] = le.Uint64(raw[8*i:])
		}
		return s, nil
	case TypeInt64:
		s := make([]int64, len(raw)/8)
		for i := range s {
			s[i] = int64(le.Uint64(raw[8*i:]))
		}
		return s, nil
	case TypeFloat64:
		s := make([]float64, len(raw)/8)
		for i := range s {
			s[i] = math.Float64frombits(le.Uint64(raw[8*i:]))
		}
		return s, nil
	}
	return nil, fmt.Errorf("not a numeric type: %v", t)
}

// Decode parses one GGUF file (a single shard; split keys are read but other
// shards are not opened) from r, which must deliver exactly size bytes. name
// is used in error messages. Tensor data is not read (r is read only up to
// the end of the tensor infos).
func Decode(name string, r io.Reader, size int64) (*File, error) {
	sh, tensors, err := decodeShard(name, r, size, 0)
	if err != nil {
		return nil, err
	}
	f := &File{
		Path: name, Version: sh.Version, Alignment: sh.Alignment, DataOffset: sh.DataOffset,
		KV: sh.KV, Tensors: tensors, Shards: []Shard{*sh},
	}
	f.index()
	return f, nil
}

func decodeShard(name string, r io.Reader, size int64, shard int) (*Shard, []TensorInfo, error) {
	if size < 0 {
		return nil, nil, &FormatError{File: name, Field: "size", Msg: "negative file size", Err: ErrCorruption}
	}
	bufSize := 64 << 10
	if size < int64(bufSize) {
		bufSize = int(size) + 16 // small files (tests, fuzzing): no 64 KiB buffer
	}
	d := &decoder{r: bufio.NewReaderSize(r, bufSize), path: name, size: uint64(size)}
	version, nTensors, nKV, err := d.header()
	if err != nil {
		return nil, nil, err
	}
	sh := &Shard{Path: name, Size: uint64(size), Version: version, Alignment: DefaultAlignment}
	if err := d.kvs(sh, nKV); err != nil {
		return nil, nil, err
	}
	tensors, err := d.tensorInfos(nTensors, sh.Alignment, shard)
	if err != nil {
		return nil, nil, err
	}
	if err := d.place(sh, tensors); err != nil {
		return nil, nil, err
	}
	return sh, tensors, nil
}

// header reads the magic, the version and the counts of tensors and
// key/value pairs, which must fit in the bytes left.
func (d *decoder) header() (version uint32, nTensors, nKV uint64, err error) {
	var magic [4]byte
	if err := d.read(magic[:], "magic"); err != nil {
		return 0, 0, 0, err
	}
	if string(magic[:]) != Magic {
		return 0, 0, 0, d.errf(ErrCorruption, "magic", "bad magic %q, want %q", magic[:], Magic)
	}
	if version, err = d.u32("header.version"); err != nil {
		return 0, 0, 0, err
	}
	switch {
	case version == 2 || version == 3:
	case version == 1:
		return 0, 0, 0, d.errf(ErrUnsupported, "header.version", "GGUF v1 is not supported (re-convert the model)")
	case version != 0 && version&0xFFFF == 0:
		return 0, 0, 0, d.errf(ErrUnsupported, "header.version", "version %#x looks byte-swapped: big-endian GGUF files are not supported", version)
	default:
		return 0, 0, 0, d.errf(ErrUnsupported, "header.version", "unknown GGUF version %d (supported: 2, 3)", version)
	}
	if nTensors, err = d.u64("header.n_tensors"); err != nil {
		return 0, 0, 0, err
	}
	if nKV, err = d.u64("header.n_kv"); err != nil {
		return 0, 0, 0, err
	}
	if nTensors > d.remaining()/minTensorBytes {
		return 0, 0, 0, d.errf(ErrCorruption, "header.n_tensors", "%d tensors cannot fit in the %d bytes left in the file", nTensors, d.remaining())
	}
	if nKV > d.remaining()/minKVBytes {
		return 0, 0, 0, d.errf(ErrCorruption, "header.n_kv", "%d key/value pairs cannot fit in the %d bytes left in the file", nKV, d.remaining())
	}
	if nTensors*minTensorBytes+nKV*minKVBytes > d.remaining() {
		return 0, 0, 0, d.errf(ErrCorruption, "header", "%d tensors and %d key/value pairs cannot fit in the %d bytes left in the file", nTensors, nKV, d.remaining())
	}
	return version, nTensors, nKV, nil
}

// kvs reads the n key/value pairs into sh.KV, refusing a duplicate key, and
// takes general.alignment (a power of two) into sh.Alignment.
func (d *decoder) kvs(sh *Shard, n uint64) error {
	sh.KV = make([]KV, 0, n)
	seen := make(map[string]bool, n)
	for i := uint64(0); i < n; i++ {
		field := fmt.Sprintf("kv[%d]", i)
		key, err := d.str(field+" key", 0)
		if err != nil {
			return err
		}
		field = fmt.Sprintf("kv[%d] %q", i, key)
		if seen[key] {
			return d.errf(ErrCorruption, field, "duplicate key")
		}
		seen[key] = true
		t, err := d.u32(field + " type")
		if err != nil {
			return err
		}
		v, err := d.value(ValueType(t), field, 0)
		if err != nil {
			return err
		}
		if key == KeyAlignment {
			a, ok := v.x.(uint32)
			if !ok {
				return d.errf(ErrCorruption, field, "alignment is %v, want u32", v.Type)
			}
			if a == 0 || a&(a-1) != 0 {
				return d.errf(ErrCorruption, field, "alignment %d is not a power of two", a)
			}
			sh.Alignment = uint64(a)
		}
		sh.KV = append(sh.KV, KV{Key: key, Value: v})
	}
	return nil
}

// tensorInfos reads n tensor infos of shard, refusing a duplicate name.
func (d *decoder) tensorInfos(n, alignment uint64, shard int) ([]TensorInfo, error) {
	tensors := make([]TensorInfo, 0, n)
	names := make(map[string]bool, n)
	for i := uint64(0); i < n; i++ {
		ti, err := d.tensorInfo(i, alignment)
		if err != nil {
			return nil, err
		}
		if names[ti.Name] {
			return nil, d.errf(ErrCorruption, "tensor "+ti.Name, "duplicate tensor name")
		}
		names[ti.Name] = true
		ti.Shard = shard
		tensors = append(tensors, ti)
	}
	return tensors, nil
}

// place sets the data section's offset (the next multiple of the alignment)
// and the tensors' absolute offsets, refusing data outside the file or
// overlapping another tensor's.
func (d *decoder) place(sh *Shard, tensors []TensorInfo) error {
	sh.DataOffset = alignUp(d.pos, sh.Alignment)
	sh.NTensors = len(tensors)
	for i := range tensors {
		t := &tensors[i]
		field := "tensor " + t.Name
		if sh.DataOffset > sh.Size || t.RelOff > sh.Size-sh.DataOffset || t.Size > sh.Size-sh.DataOffset-t.RelOff {
			return d.errf(ErrCorruption, field, "data [%d, +%d) relative to the data section at %d is outside the %d-byte file",
				t.RelOff, t.Size, sh.DataOffset, sh.Size)
		}
		t.Offset = sh.DataOffset + t.RelOff
	}
	// Overlap: sort by offset and compare neighbours.
	order := make([]int, len(tensors))
	for i := range order {
		order[i] = i
	}
	sort.Slice(order, func(a, b int) bool { return tensors[order[a]].RelOff < tensors[order[b]].RelOff })
	for k := 1; k < len(order); k++ {
		p, q := &tensors[order[k-1]], &tensors[order[k]]
		if p.RelOff+p.Size > q.RelOff {
			return d.errf(ErrCorruption, "tensor "+q.Name, "data [%d, +%d) overlaps tensor %s at [%d, +%d)",
				q.RelOff, q.Size, p.Name, p.RelOff, p.Size)
		}
	}
	return nil
}

func alignUp(x, a uint64) uint64 {
	if r := x % a; r != 0 {
		if x > math.MaxUint64-(a-r) {
			return math.MaxUint64
		}
		return x + a - r
	}
	return x
}

// tensorInfo reads and validates one tensor info.
func (d *decoder) tensorInfo(i uint64, alignment uint64) (TensorInfo, error) {
	var ti TensorInfo
	name, err := d.str(fmt.Sprintf("tensor[%d] name", i), 0)
	if err != nil {
		return ti, err
	}
	field := "tensor " + name
	if len(name) > MaxNameLen {
		return ti, d.errf(ErrCorruption, fmt.Sprintf("tensor[%d] name", i), "name of %d bytes is longer than %d", len(name), MaxNameLen)
	}
	ti.Name = name
	nd, err := d.u32(field + " n_dims")
	if err != nil {
		return ti, err
	}
	if nd == 0 {
		return ti, d.errf(ErrUnsupported, field, "0-dimensional tensor")
	}
	if nd > MaxDims {
		return ti, d.errf(ErrCorruption, field, "%d dimensions, at most %d allowed", nd, MaxDims)
	}
	ti.Dims = make([]uint64, nd)
	elems := uint64(1)
	for j := range ti.Dims {
		v, err := d.u64(fmt.Sprintf("%s ne[%d]", field, j))
		if err != nil {
			return ti, err
		}
		if v == 0 || v > math.MaxInt64 {
			return ti, d.errf(ErrCorruption, field, "dimension ne[%d] = %d is out of range", j, v)
		}
		hi, lo := bits.Mul64(elems, v)
		if hi != 0 || lo > math.MaxInt64 {
			return ti, d.errf(ErrCorruption, field, "element count overflows int64 (shape %v)", ti.Dims[:j+1])
		}
		elems = lo
		ti.Dims[j] = v
	}
	tt, err := d.u32(field + " type")
	if err != nil {
		return ti, err
	}
	ti.Type = quant.Type(tt)
	if !ti.Type.Known() {
		return ti, d.errf(ErrUnsupported, field, "unknown ggml type %d", tt)
	}
	st, err := strides(ti.Type, ti.Dims)
	if err != nil {
		return ti, d.errf(ErrCorruption, field, "%v", err)
	}
	ti.Strides = st
	ti.Size = st[3] * ti.Ne()[3]
	off, err := d.u64(field + " offset")
	if err != nil {
		return ti, err
	}
	if off%alignment != 0 {
		return ti, d.errf(ErrCorruption, field, "data offset %d is not a multiple of the alignment %d", off, alignment)
	}
	ti.RelOff = off
	return ti, nil
}

// strides computes ggml's nb[0..3] for a contiguous tensor, failing when the
// first dimension is not a whole number of blocks or a stride overflows.
func strides(t quant.Type, dims []uint64) ([4]uint64, error) {
	var nb [4]uint64
	tr, ok := t.Traits()
	if !ok {
		return nb, fmt.Errorf("unknown ggml type %d", uint32(t))
	}
	ne := [4]uint64{1, 1, 1, 1}
	copy(ne[:], dims)
	bs := uint64(tr.BlockSize)
	if ne[0]%bs != 0 {
		return nb, fmt.Errorf("ne[0] = %d is not a multiple of %v's block size %d", ne[0], t, bs)
	}
	nb[0] = uint64(tr.TypeSize)
	for j := 1; j < 4; j++ {
		mul := ne[j-1]
		if j == 1 {
			mul = ne[0] / bs
		}
		hi, lo := bits.Mul64(nb[j-1], mul)
		if hi != 0 || lo > math.MaxInt64 {
			return nb, fmt.Errorf("byte stride nb[%d] overflows", j)
		}
		nb[j] = lo
	}
	hi, lo := bits.Mul64(nb[3], ne[3])
	if hi != 0 || lo > math.MaxInt64 {
		return nb, fmt.Errorf("byte size overflows")
	}
	return nb, nil
}

// splitName matches llama.cpp's split file names: PREFIX-00001-of-00003.gguf.
var splitName = regexp.MustCompile(`^(.*)-([0-9]{5})-of-([0-9]{5})\.gguf$`)

// SplitPath returns the path of shard i (0-based) of n of the model whose
// shards are called prefix-0000k-of-0000n.gguf (llama.cpp's llama_split_path).
func SplitPath(prefix string, i, n int) string {
	return fmt.Sprintf("%s-%05d-of-%05d.gguf", prefix, i+1, n)
}

// ShardPaths names the files a model at path is made of, by file name alone
// (nothing is read): every PREFIX-0000k-of-0000n.gguf for a split name, else
// path itself. Writers use it to refuse outputs that would overwrite a shard.
func ShardPaths(path string) []string {
	m := splitName.FindStringSubmatch(filepath.Base(path))
	n := 0
	if m != nil {
		n, _ = strconv.Atoi(m[3])
	}
	if n < 1 {
		return []string{path}
	}
	prefix := filepath.Join(filepath.Dir(path), m[1])
	out := make([]string, n)
	for i := range out {
		out[i] = SplitPath(prefix, i, n)
	}
	return out
}

// openInput opens the file at path for reading and returns its size.
func openInput(path string) (*os.File, int64, error) {
	// A FIFO or device would block the open or the reads forever.
	fd, err := safefile.OpenInput(path)
	var pe *os.PathError
	if errors.Is(err, safefile.ErrNotRegular) && errors.As(err, &pe) {
		return nil, 0, &FormatError{File: path, Field: "file", Msg: pe.Err.Error(), Err: ErrUnsupported}
	}
	if err != nil {
		return nil, 0, fmt.Errorf("gguf: %w", err)
	}
	st, err := fd.Stat()
	if err != nil {
		fd.Close()
		return nil, 0, fmt.Errorf("gguf: %w", err)
	}
	return fd, st.Size(), nil
}

// openShard decodes shard number shard of a split model, at path.
func openShard(path string, shard int) (*Shard, []TensorInfo, error) {
	fd, size, err := openInput(path)
	if err != nil {
		return nil, nil, err
	}
	defer fd.Close()
	return decodeShard(path, fd, size, shard)
}

// openFirst decodes the file at path (Decode), the first or only shard.
func openFirst(path string) (*File, error) {
	fd, size, err := openInput(path)
	if err != nil {
		return nil, err
	}
	defer fd.Close()
	return Decode(path, fd, size)
}

// Open reads the header, metadata and tensor infos of the GGUF file at path
// and, for a split model, of all its shards (path may name any shard; the
// others are found by llama.cpp's naming rule PREFIX-0000k-of-0000n.gguf in
// the same directory). Tensor data is not read and no file stays open.
func Open(path string) (*File, error) {
	f, err := openFirst(path)
	if err != nil {
		return nil, err
	}
	count, no, isSplit, err := splitInfo(f, path)
	if err != nil {
		return nil, err
	}
	if !isSplit {
		return f, nil
	}
	m := splitName.FindStringSubmatch(filepath.Base(path))
	if m == nil {
		return nil, &FormatError{File: path, Field: KeySplitCount, Msg: fmt.Sprintf("model is split in %d shards but the file name does not follow PREFIX-0000k-of-0000n.gguf", count), Err: ErrUnsupported}
	}
	prefix := filepath.Join(filepath.Dir(path), m[1])
	if nn, _ := strconv.Atoi(m[3]); nn != count {
		return nil, &FormatError{File: path, Field: KeySplitCount, Msg: fmt.Sprintf("split.count is %d but the file name says %s shards", count, m[3]), Err: ErrCorruption}
	}
	if no != 0 {
		// Given a later shard: start again from the first.
		first := SplitPath(prefix, 0, count)
		if first == path {
			return nil, &FormatError{File: path, Field: KeySplitNo, Msg: fmt.Sprintf("split.no is %d in the first shard", no), Err: ErrCorruption}
		}
		return Open(first)
	}
	if k, _ := strconv.Atoi(m[2]); k != 1 {
		return nil, &FormatError{File: path, Field: KeySplitNo, Msg: fmt.Sprintf("split.no is 0 but the file name says shard %s", m[2]), Err: ErrCorruption}
	}
	for i := 1; i < count; i++ {
		p := SplitPath(prefix, i, count)
		s, ts, err := openShard(p, i)
		if err != nil {
			return nil, fmt.Errorf("shard %d of %d: %w", i+1, count, err)
		}
		g := &File{Path: p, KV: s.KV}
		g.index()
		c2, n2, ok2, err := splitInfo(g, p)
		if err != nil {
			return nil, err
		}
		if !ok2 || c2 != count || n2 != i {
			return nil, &FormatError{File: p, Field: KeySplitNo, Msg: fmt.Sprintf("shard says split %d of %d, expected %d of %d", n2, c2, i, count), Err: ErrCorruption}
		}
		for j := range ts {
			if _, dup := f.tensorIndex[ts[j].Name]; dup {
				return nil, &FormatError{File: p, Field: "tensor " + ts[j].Name, Msg: "duplicate tensor name across shards", Err: ErrCorruption}
			}
			f.tensorIndex[ts[j].Name] = len(f.Tensors)
			f.Tensors = append(f.Tensors, ts[j])
		}
		f.Shards = append(f.Shards, *s)
	}
	if v, ok := f.Get(KeySplitTensorsCount); ok {
		if n, ok := v.Int(); !ok || n != int64(len(f.Tensors)) {
			return nil, &FormatError{File: path, Field: KeySplitTensorsCount, Msg: fmt.Sprintf("says %v tensors, the shards hold %d", v, len(f.Tensors)), Err: ErrCorruption}
		}
	}
	return f, nil
}

// splitInfo reads split.count and split.no; isSplit is false for a
// single-file model (no split.count, or split.count of 1 with split.no 0).
func splitInfo(f *File, path string) (count, no int, isSplit bool, err error) {
	cv, ok := f.Get(KeySplitCount)
	if !ok {
		return 1, 0, false, nil
	}
	c, ok := cv.Uint()
	if !ok || c == 0 || c > 99999 {
		return 0, 0, false, &FormatError{File: path, Field: KeySplitCount, Msg: fmt.Sprintf("split.count %v is not in [1, 99999]", cv), Err: ErrCorruption}
	}
	nv, ok := f.Get(KeySplitNo)
	if !ok {
		return 0, 0, false, &FormatError{File: path, Field: KeySplitNo, Msg: "split.count present but split.no missing", Err: ErrCorruption}
	}
	n, ok := nv.Uint()
	if !ok || n >= c {
		return 0, 0, false, &FormatError{File: path, Field: KeySplitNo, Msg: fmt.Sprintf("split.no %v is not in [0, %d)", nv, c), Err: ErrCorruption}
	}
	return int(c), int(n), c > 1, nil
}
