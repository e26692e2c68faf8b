package model

import (
	"fmt"

	"github.com/pipe-engine/pipe/quant"
)

// State is the per-sequence decode state: the KV cache and the next position.
// It is owned by one decode loop; not safe for concurrent use.
type State struct {
	NCtx int
	Pos  int // positions filled so far
	Type KVType
	// Per layer: K and V rows of width KVDim, NCtx rows each.
	k32, v32 [][]float32
	k16, v16 [][]uint16
	kvDim    int
}

// NewKV allocates a KV cache of nCtx positions for nLayer layers of width kvDim.
func NewKV(nLayer, nCtx, kvDim int, t KVType) (*State, error) {
	if nCtx <= 0 {
		return nil, fmt.Errorf("model: context length %d must be positive", nCtx)
	}
	s := &State{NCtx: nCtx, Type: t, kvDim: kvDim}
	for l := 0; l < nLayer; l++ {
		if t == KVF32 {
			s.k32 = append(s.k32, make([]float32, nCtx*kvDim))
			s.v32 = append(s.v32, make([]float32, nCtx*kvDim))
		} else {
			s.k16 = append(s.k16, make([]uint16, nCtx*kvDim))
			s.v16 = append(s.v16, make([]uint16, nCtx*kvDim))
		}
	}
	return s, nil
}

// Bytes is the memory the cache holds.
func (s *State) Bytes() int64 {
	per := int64(2)
	if s.Type == KVF32 {
		per = 4
	}
	n := len(s.k32) + len(s.k16)
	return int64(n) * 2 * int64(s.NCtx) * int64(s.kvDim) * per
}

// Store writes position pos's K and V rows for layer l.
func (s *State) Store(l, pos int, k, v []float32) {
	o := pos * s.kvDim
	if s.Type == KVF32 {
		copy(s.k32[l][o:o+s.kvDim], k)
		copy(s.v32[l][o:o+s.kvDim], v)
		return
	}
	kd, vd := s.k16[l][o:o+s.kvDim], s.v16[l][o:o+s.kvDim]
	for i := range kd {
		kd[i] = quant.FP32ToFP16(k[i])
		vd[i] = quant.FP32ToFP16(v[i])
	}
}

// Attend computes one query head's attention output over positions [lo, hi]
// of layer l, reading KV head columns [off, off+dim). scores must hold
// hi-lo+1 floats; out receives dim floats. The arithmetic follows ggml's
// non-flash path: KQ dot (Q rounded to F16 when the cache is F16), softmax of
// KQ·scale, then the probabilities (rounded to F16 for an F16 cache) times V.
func (s *State) Attend(l int, q []float32, off, dim, lo, hi int, scale float32, scores, out []float32) {
	s.attend(l, q, off, dim, lo, hi, scale, 0, false, scores, out)
}

// AttendSinks is Attend with an attention sink (gpt-oss): one extra logit
// per head that joins the softmax denominator but has no value row, as
// ggml_soft_max_add_sinks computes it (the max includes the sink, and
// exp(sink - max) is added to the sum).
func (s *State) AttendSinks(l int, q []float32, off, dim, lo, hi int, scale, sink float32, scores, out []float32) {
	s.attend(l, q, off, dim, lo, hi, scale, sink, true, scores, out)
}

// f16tab converts every F16 bit pattern to float32 (ggml's
// GGML_FP16_TO_FP32 table); 256 KiB, built once.
var f16tab = func() *[1 << 16]float32 {
	var t [1 << 16]float32
	for i := range t {
		t[i] = quant.FP16ToFP32(uint16(i))
	}
	return &t
}()

// dot4 is Σ a[i]·b[i] over four interleaved partial sums, combined as
// (s0+s1)+(s2+s3): a fixed order, so results never depend on threading.
func dot4(a, b []float32) float32 {
	b = b[:len(a)]
	var s0, s1, s2, s3 float32
	i := 0
	for ; i+4 <= len(a); i += 4 {
		s0 += float32(a[i] * b[i])
		s1 += float32(a[i+1] * b[i+1])
		s2 += float32(a[i+2] * b[i+2])
		s3 += float32(a[i+3] * b[i+3])
	}
	for ; i < len(a); i++ {
		s0 += float32(a[i] * b[i])
	}
	return (s0 + s1) + (s2 + s3)
}

func (s *State) attend(l int, q []float32, off, dim, lo, hi int, scale, sink float32, hasSink bool, scores, out []float32) {
	softmax := func(x []float32) {
		if hasSink {
			SoftmaxSink(x, sink)
		} else {
			Softmax(x)
		}
	}
	n := hi - lo + 1
	scores = scores[:n]
	out = out[:dim]
	for d := range out {
		out[d] = 0
	}
	if s.Type == KVF32 {
		K := s.k32[l]
		q = q[:dim]
		for j := 0; j < n; j++ {
			o := (lo+j)*s.kvDim + off
			scores[j] = dot4(q, K[o:o+dim]) * scale
		}
		softmax(scores)
		V := s.v32[l]
		for j := 0; j < n; j++ {
			o := (lo+j)*s.kvDim + off
			row := V[o : o+dim]
			p := scores[j]
			for d, v := range row {
				out[d] += float32(p * v)
			}
		}
		return
	}
	tab := f16tab
	K := s.k16[l]
	var qh [512]float32
	qq := qh[:0]
	if dim > len(qh) {
		qq = make([]float32, 0, dim)
	}
	for d := 0; d < dim; d++ {
		qq = append(qq, tab[quant.FP32ToFP16(q[d])])
	}
	var kh [512]float32
	kk := kh[:0]
	if dim > len(kh) {
		kk = make([]float32, 0, dim)
	}
	kk = kk[:dim]
	for j := 0; j < n; j++ {
		o := (lo+j)*s.kvDim + off
		for d, b := range K[o : o+dim] {
			kk[d] = tab[b]
		}
		scores[j] = dot4(qq, kk) * scale
	}
	softmax(scores)
	V := s.v16[l]
	for j := 0; j < n; j++ {
		o := (lo+j)*s.kvDim + off
		p := tab[quant.FP32ToFP16(scores[j])]
		for d, b := range V[o : o+dim] {
			out[d] += float32(p * tab[b])
		}
	}
}
