package model

import (
	"encoding/binary"
	"fmt"
	"math"

	"github.com/pipe-engine/pipe/gguf"
	"github.com/pipe-engine/pipe/quant"
)

// Loader fetches an architecture's dense tensors by name with shape checks.
// It records the first error and returns zero values after it, so an
// architecture's constructor reads as a list of tensors followed by one
// Err() check.
type Loader struct {
	d   *Desc
	src DenseSource
	err error
}

// NewLoader returns a loader over d's tensors whose bytes come from src.
func NewLoader(d *Desc, src DenseSource) *Loader { return &Loader{d: d, src: src} }

// Err is the first error met.
func (l *Loader) Err() error { return l.err }

func (l *Loader) fail(format string, args ...any) {
	if l.err == nil {
		l.err = fmt.Errorf("%w: "+format, append([]any{ErrBadModel}, args...)...)
	}
}

func (l *Loader) info(name string) *gguf.TensorInfo {
	if l.err != nil {
		return nil
	}
	ti, ok := l.d.File.Tensor(name)
	if !ok {
		return nil
	}
	return ti
}

// Matrix loads a 2-D weight with ne0 = cols and ne1 = rows; rows < 0 accepts
// any row count. A missing tensor yields a zero Weight (Data nil) without
// error only when optional is implied by the caller checking Data; use
// MustMatrix semantics by checking Err after the constructor.
func (l *Loader) Matrix(name string, cols, rows int) Weight {
	ti := l.info(name)
	if ti == nil {
		if l.err == nil && name != "output.weight" {
			l.fail("tensor %s is missing", name)
		}
		return Weight{}
	}
	ne := ti.Ne()
	if int(ne[0]) != cols || (rows >= 0 && int(ne[1]) != rows) || ne[2] != 1 || ne[3] != 1 {
		l.fail("tensor %s has shape %v, want [%d %d]", name, ti.Dims, cols, rows)
		return Weight{}
	}
	data, err := l.src.TensorBytes(ti)
	if err != nil {
		l.err = fmt.Errorf("tensor %s: %w", name, err)
		return Weight{}
	}
	return Weight{Name: name, Type: ti.Type, Rows: int(ne[1]), Cols: cols, Data: data}
}

// Vector loads a 1-D tensor of n elements as float32 (F32, F16 or BF16).
func (l *Loader) Vector(name string, n int) []float32 {
	ti := l.info(name)
	if ti == nil {
		l.fail("tensor %s is missing", name)
		return nil
	}
	if ti.Elements() != uint64(n) {
		l.fail("tensor %s has %d elements, want %d", name, ti.Elements(), n)
		return nil
	}
	data, err := l.src.TensorBytes(ti)
	if err != nil {
		l.err = fmt.Errorf("tensor %s: %w", name, err)
		return nil
	}
	out := make([]float32, n)
	switch ti.Type {
	case quant.F32:
		for i := range out {
			out[i] = math.Float32frombits(binary.LittleEndian.Uint32(data[4*i:]))
		}
	default:
		if err := quant.Dequantize(ti.Type, data, out); err != nil {
			l.err = fmt.Errorf("tensor %s: %w", name, err)
			return nil
		}
	}
	return out
}

// ExpertType checks a 3-D expert tensor's shape and returns its type.
func (l *Loader) ExpertType(name string, cols, rows, nExpert int) quant.Type {
	ti := l.info(name)
	if ti == nil {
		l.fail("tensor %s is missing", name)
		return 0
	}
	ne := ti.Ne()
	if int(ne[0]) != cols || int(ne[1]) != rows || int(ne[2]) != nExpert {
		l.fail("tensor %s has shape %v, want [%d %d %d]", name, ti.Dims, cols, rows, nExpert)
		return 0
	}
	return ti.Type
}
