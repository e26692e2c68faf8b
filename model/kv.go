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
	if s.Type == KVF32 {
		K := s.k32[l]
		for j := 0; j < n; j++ {
			row := K[(lo+j)*s.kvDim+off:]
			var acc float32
			for d := 0; d < dim; d++ {
				acc += q[d] * row[d]
			}
			scores[j] = acc * scale
		}
		softmax(scores)
		V := s.v32[l]
		for d := 0; d < dim; d++ {
			out[d] = 0
		}
		for j := 0; j < n; j++ {
			row := V[(lo+j)*s.kvDim+off:]
			p := scores[j]
			for d := 0; d < dim; d++ {
				out[d] += p * row[d]
			}
		}
		return
	}
	K := s.k16[l]
	var qh [512]float32
	qq := qh[:0]
	if dim > len(qh) {
		qq = make([]float32, 0, dim)
	}
	for d := 0; d < dim; d++ {
		qq = append(qq, quant.FP16ToFP32(quant.FP32ToFP16(q[d])))
	}
	for j := 0; j < n; j++ {
		row := K[(lo+j)*s.kvDim+off:]
		var acc float32
		for d := 0; d < dim; d++ {
			acc += qq[d] * quant.FP16ToFP32(row[d])
		}
		scores[j] = acc * scale
	}
	softmax(scores)
	V := s.v16[l]
	for d := 0; d < dim; d++ {
		out[d] = 0
	}
	for j := 0; j < n; j++ {
		row := V[(lo+j)*s.kvDim+off:]
		p := quant.FP16ToFP32(quant.FP32ToFP16(scores[j]))
		for d := 0; d < dim; d++ {
			out[d] += p * quant.FP16ToFP32(row[d])
		}
	}
}
