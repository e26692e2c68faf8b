package kernels

import (
	"errors"
	"fmt"

	"github.com/pipe-engine/pipe/internal/buf"
	"github.com/pipe-engine/pipe/quant"
)

// Sentinel errors; match them with errors.Is.
var (
	// ErrUnsupported: the weight type has no dot-product kernel.
	ErrUnsupported = errors.New("kernels: unsupported weight type")
	// ErrShape: a length or dimension does not fit the declared shape.
	ErrShape = errors.New("kernels: shape mismatch")
	// ErrClosed: the Pool was closed.
	ErrClosed = errors.New("kernels: pool closed")
)

// ActivationType returns the format the activation vector is converted to
// for rows of weight type t (ggml's vec_dot_type).
func ActivationType(t quant.Type) (quant.Type, error) {
	switch t {
	case quant.Q4_0, quant.Q5_0, quant.Q8_0, quant.MXFP4:
		return quant.Q8_0, nil
	case quant.Q4_1, quant.Q5_1:
		return quant.Q8_1, nil
	case quant.Q2_K, quant.Q3_K, quant.Q4_K, quant.Q5_K, quant.Q6_K:
		return quant.Q8_K, nil
	case quant.F16:
		return quant.F16, nil
	case quant.BF16:
		return quant.BF16, nil
	case quant.F32:
		return quant.F32, nil
	}
	return 0, fmt.Errorf("%w: %v", ErrUnsupported, t)
}

// unsignedOffset is the constant that makes t's weight codes unsigned
// (MXFP4: kvalues+12 in 0..24; Q4_0: the raw nibble, value+8), 0 if none.
func unsignedOffset(t quant.Type) int32 {
	switch t {
	case quant.MXFP4:
		return 12
	case quant.Q4_0:
		return 8
	case quant.Q5_0:
		return 16
	}
	return 0
}

// Activation is an activation vector converted to a weight type's
// vec_dot_type, ready to be dotted with many rows. Build one with
// QuantizeActivation or (*Activation).Quantize; it is read-only afterwards
// and may be shared by goroutines.
type Activation struct {
	weight quant.Type // the weight type it was prepared for
	typ    quant.Type // its own format (Q8_0, Q8_1, Q8_K, F16, BF16, F32)
	cols   int

	qs    []int8    // Q8_*: the quants, cols of them
	d     []float32 // Q8_*: per block scale (Q8_0/Q8_1: the fp16-rounded value)
	s     []float32 // Q8_1: per block fp16(d*sum(qs))
	bsums []int16   // Q8_K: sums of 16 consecutive quants
	h     []uint16  // F16/BF16: the converted values
	// corr: Q8_0 activations for MXFP4/Q4_0/Q5_0 rows: per 4 quants,
	// off·Σq with off the offset that makes the weight codes unsigned
	// (12 for MXFP4, 8 for Q4_0, 16 for Q5_0); the assembly subtracts it
	// per lane.
	corr []int32
	f    []float32 // F32: a copy of x
}

// Type is the activation's own format (the vec_dot_type).
func (a *Activation) Type() quant.Type { return a.typ }

// WeightType is the weight type the activation was prepared for.
func (a *Activation) WeightType() quant.Type { return a.weight }

// Cols is the vector length.
func (a *Activation) Cols() int { return a.cols }

// QuantizeActivation converts x for dot products with rows of weight type t.
// len(x) must be a whole number of t's blocks (and of the activation's
// blocks).
func QuantizeActivation(t quant.Type, x []float32) (*Activation, error) {
	a := new(Activation)
	if err := a.Quantize(t, x); err != nil {
		return nil, err
	}
	return a, nil
}

// Quantize converts x for rows of weight type t, reusing a's buffers.
func (a *Activation) Quantize(t quant.Type, x []float32) error {
	return a.quantizeWith(impl, t, x)
}

func (a *Activation) quantizeWith(m *implementation, t quant.Type, x []float32) error {
	at, err := ActivationType(t)
	if err != nil {
		return err
	}
	n := len(x)
	if bs := t.BlockSize(); n%bs != 0 {
		return fmt.Errorf("%w: %d activations are not a multiple of %v's block size %d", ErrShape, n, t, bs)
	}
	if bs := at.BlockSize(); n%bs != 0 {
		return fmt.Errorf("%w: %d activations are not a multiple of %v's block size %d", ErrShape, n, at, bs)
	}
	a.weight, a.typ, a.cols = t, at, n
	switch at {
	case quant.Q8_0:
		a.qs = buf.Grow(a.qs, n)
		a.d = buf.Grow(a.d, n/32)
		m.quantQ8_0(x, a.qs, a.d)
		a.corr = a.corr[:0]
		if off := unsignedOffset(t); off != 0 {
			a.corr = buf.Grow(a.corr, n/4)
			for i := range a.corr {
				q := a.qs[4*i : 4*i+4]
				a.corr[i] = off * (int32(q[0]) + int32(q[1]) + int32(q[2]) + int32(q[3]))
			}
		}
	case quant.Q8_1:
		a.qs = buf.Grow(a.qs, n)
		a.d = buf.Grow(a.d, n/32)
		a.s = buf.Grow(a.s, n/32)
		refQuantQ8_1(x, a.qs, a.d, a.s)
	case quant.Q8_K:
		a.qs = buf.Grow(a.qs, n)
		a.d = buf.Grow(a.d, n/256)
		a.bsums = buf.Grow(a.bsums, n/16)
		m.quantQ8_K(x, a.qs, a.d, a.bsums)
	case quant.F16:
		a.h = buf.Grow(a.h, n)
		for i, v := range x {
			a.h[i] = quant.FP32ToFP16(v)
		}
	case quant.BF16:
		a.h = buf.Grow(a.h, n)
		for i, v := range x {
			a.h[i] = quant.FP32ToBF16(v)
		}
	case quant.F32:
		a.f = buf.Grow(a.f, n)
		copy(a.f, x)
	}
	return nil
}

// Serves reports whether a, prepared for some weight type, is the activation
// rows of type t would get from x: the same vec_dot format and the same
// correction terms (MXFP4 and Q4_0 rows need their own). Products sharing an
// input can then share one quantization (Q4_K and Q6_K rows, say).
func (a *Activation) Serves(t quant.Type) bool {
	at, err := ActivationType(t)
	return err == nil && at == a.typ && unsignedOffset(t) == unsignedOffset(a.weight)
}
