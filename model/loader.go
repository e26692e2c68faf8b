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

// Has reports whether the file has a tensor called name.
func (l *Loader) Has(name string) bool {
	_, ok := l.d.File.Tensor(name)
	return ok
}

// Matrix loads a 2-D weight with ne0 = cols and ne1 = rows; rows < 0 accepts
// any row count. A missing tensor is an error.
func (l *Loader) Matrix(name string, cols, rows int) Weight {
	w, ok := l.OptionalMatrix(name, cols, rows)
	if !ok {
		l.fail("tensor %s is missing", name)
	}
	return w
}

// OptionalMatrix is Matrix for a tensor the model may lack: ok is false and
// the Weight empty when it is absent (a present tensor of the wrong shape is
// still an error).
func (l *Loader) OptionalMatrix(name string, cols, rows int) (w Weight, ok bool) {
	ti := l.info(name)
	if ti == nil {
		return Weight{}, false
	}
	ne := ti.Ne()
	if int(ne[0]) != cols || (rows >= 0 && int(ne[1]) != rows) || ne[2] != 1 || ne[3] != 1 {
		l.fail("tensor %s has shape %v, want [%d %d]", name, ti.Dims, cols, rows)
		return Weight{}, true
	}
	data, err := l.src.TensorBytes(ti)
	if err != nil {
		l.err = fmt.Errorf("tensor %s: %w", name, err)
		return Weight{}, true
	}
	return Weight{Name: name, Type: ti.Type, Rows: int(ne[1]), Cols: cols, Data: data}, true
}

// Vector loads a 1-D tensor of n elements as float32 (F32, F16 or BF16).
// A missing tensor is an error.
func (l *Loader) Vector(name string, n int) []float32 {
	v, ok := l.OptionalVector(name, n)
	if !ok {
		l.fail("tensor %s is missing", name)
	}
	return v
}

// OptionalVector is Vector for a tensor the model may lack: nil and false
// when it is absent.
func (l *Loader) OptionalVector(name string, n int) ([]float32, bool) {
	ti := l.info(name)
	if ti == nil {
		return nil, false
	}
	if ti.Elements() != uint64(n) {
		l.fail("tensor %s has %d elements, want %d", name, ti.Elements(), n)
		return nil, true
	}
	data, err := l.src.TensorBytes(ti)
	if err != nil {
		l.err = fmt.Errorf("tensor %s: %w", name, err)
		return nil, true
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
			return nil, true
		}
	}
	return out, true
}

// Heads loads a 3-D weight of one [cols × rows] matrix per head (ggml's
// mul_mat of a 3-D weight: latent attention's attn_k_b and attn_v_b), as
// nHead Weights viewing the tensor's bytes. A missing tensor is an error.
func (l *Loader) Heads(name string, cols, rows, nHead int) []Weight {
	ti := l.info(name)
	if ti == nil {
		l.fail("tensor %s is missing", name)
		return nil
	}
	ne := ti.Ne()
	if int(ne[0]) != cols || int(ne[1]) != rows || int(ne[2]) != nHead || ne[3] != 1 {
		l.fail("tensor %s has shape %v, want [%d %d %d]", name, ti.Dims, cols, rows, nHead)
		return nil
	}
	data, err := l.src.TensorBytes(ti)
	if err != nil {
		l.err = fmt.Errorf("tensor %s: %w", name, err)
		return nil
	}
	per := int64(ti.Strides[2])
	if int64(len(data)) < per*int64(nHead) {
		l.fail("tensor %s: %d bytes for %d heads of %d", name, len(data), nHead, per)
		return nil
	}
	ws := make([]Weight, nHead)
	for h := range ws {
		ws[h] = Weight{Name: fmt.Sprintf("%s[%d]", name, h), Type: ti.Type, Rows: rows, Cols: cols, Data: data[int64(h)*per : int64(h+1)*per]}
	}
	return ws
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

// Embeddings loads token_embd.weight, output_norm.weight and the LM head
// output.weight, which falls back to the token embeddings when the file
// has none (tied embeddings), into d.
func (l *Loader) Embeddings(d *Decoder) {
	d.TokEmbd = l.Matrix("token_embd.weight", d.NEmbd, -1)
	out, ok := l.OptionalMatrix("output.weight", d.NEmbd, -1)
	if !ok {
		out = d.TokEmbd
	}
	d.Output = out
	d.OutNorm = l.Vector("output_norm.weight", d.NEmbd)
}

// Attention loads layer's attn_norm and Q/K/V/output projections for
// geometry g (V required; an architecture with an optional V loads it
// itself).
func (l *Loader) Attention(layer, nEmbd int, g Geom) Attention {
	p := fmt.Sprintf("blk.%d.", layer)
	return Attention{Geom: g,
		Norm: l.Vector(p+"attn_norm.weight", nEmbd),
		Wq:   l.Matrix(p+"attn_q.weight", nEmbd, g.QDim()),
		Wk:   l.Matrix(p+"attn_k.weight", nEmbd, g.KVDim()),
		Wv:   l.Matrix(p+"attn_v.weight", nEmbd, g.KVDim()),
		Wo:   l.Matrix(p+"attn_output.weight", g.QDim(), nEmbd),
	}
}

// CheckVocab checks that the token embeddings have one row per vocabulary
// entry (when the file lists its vocabulary).
func (l *Loader) CheckVocab(d *Decoder, nVocab int) error {
	if err := l.Err(); err != nil {
		return err
	}
	if d.TokEmbd.Rows != nVocab && nVocab > 0 {
		return fmt.Errorf("%w: token_embd has %d rows, vocabulary %d", ErrBadModel, d.TokEmbd.Rows, nVocab)
	}
	return nil
}
