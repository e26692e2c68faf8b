package kernels

import (
	"math"

	"github.com/pipe-engine/pipe/quant"
)

// Attention of one query head over a run of KV cache rows, and of a group
// of GroupSlots query heads that share the rows (GQA: the query heads of
// one KV head). The arithmetic is ggml's non-flash path in a fixed float
// order, the same for one head and for a group:
//
//  1. Scores: q · k_j for each row j, with q rounded to F16 when the cache
//     is F16, in DotsF16/DotsF32's order (four lanes, (s0+s1)+(s2+s3)),
//     each then multiplied by Scale.
//  2. Softmax (Softmax, SoftmaxSink): the maximum subtracted, e_j =
//     float32(math.Exp(float64(x_j - max))), their float64 sum in row
//     order (plus the sink's term), then e_j · float32(1/sum).
//  3. Output: the probabilities (rounded to F16 for an F16 cache) weight
//     the V rows, added in row order as AxpysF16/AxpysF32 do, from zero.
//
// The grouped form loads and converts each K and V row once for all the
// heads and keeps scores row-major (GroupSlots per row) so the softmax
// runs across heads; per head every operation is the single-head one, so
// the results are bit-identical to AttendF16/AttendF32 head by head (the
// tests demand it). The AVX2 version (attn8_amd64.s) needs FMA because
// math.Exp uses it on such machines and its exp replicates math.Exp's
// amd64 code operation for operation; elsewhere the loops here run, head
// by head, on the package's helpers (NEON on arm64).

// GroupSlots is the number of query heads AttendGroupF16/F32 take.
const GroupSlots = 8

// maxGroupDim bounds the head width of the grouped kernels (their packed
// queries live on the stack); wider heads run head by head.
const maxGroupDim = 512

// maxHeadDim bounds the head width AttendF16 rounds on the stack (wider
// heads take a heap copy): latent attention's 576.
const maxHeadDim = 1024

// Head is one query head's softmax parameters: the score scale and an
// optional sink logit (gpt-oss), which joins the softmax denominator but has
// no value row.
type Head struct {
	Scale   float32
	Sink    float32
	HasSink bool
}

// AttendF16 computes one query head's attention over the n rows of an F16
// cache at k and v (row j at j*stride, len(q) wide) into out: len(q)
// floats, or the first len(out) columns of the V rows when out is shorter
// (latent attention, whose values are the leading part of its keys).
// scores is scratch of at least n floats; it ends holding the
// probabilities.
func AttendF16(q []float32, k, v []uint16, stride, n int, h Head, scores, out []float32) {
	dim := len(q)
	var qh [maxHeadDim]float32
	qq := qh[:0]
	if dim > len(qh) {
		qq = make([]float32, 0, dim)
	}
	qq = append(qq, q...)
	roundF16s(qq)
	sc := scores[:n]
	DotsF16(qq, k, stride, sc)
	softmaxScaled(sc, h)
	roundF16s(sc) // the weights are rounded to F16 like the cache
	o := out[:min(dim, len(out))]
	clear(o)
	AxpysF16(o, sc, v, stride)
}

// AttendF32 is AttendF16 for a float32 cache (nothing rounded to F16).
func AttendF32(q []float32, k, v []float32, stride, n int, h Head, scores, out []float32) {
	sc := scores[:n]
	DotsF32(q, k, stride, sc)
	softmaxScaled(sc, h)
	o := out[:min(len(q), len(out))]
	clear(o)
	AxpysF32(o, sc, v, stride)
}

func softmaxScaled(sc []float32, h Head) {
	for j := range sc {
		sc[j] *= h.Scale
	}
	if h.HasSink {
		SoftmaxSink(sc, h.Sink)
	} else {
		Softmax(sc)
	}
}

// AttendGroupF16 computes the attention of GroupSlots query heads over the
// same n rows of an F16 cache: q holds the heads' queries back to back
// (dim = len(q)/GroupSlots each), out receives their outputs likewise.
// sinks is nil or one sink logit per head. scores is scratch of at least
// GroupSlots·n floats.
func AttendGroupF16(q []float32, k, v []uint16, stride, n int, scale float32, sinks, scores, out []float32) {
	attendGroupF16(q, k, v, stride, n, scale, sinks, scores, out)
}

// AttendGroupF32 is AttendGroupF16 for a float32 cache.
func AttendGroupF32(q []float32, k, v []float32, stride, n int, scale float32, sinks, scores, out []float32) {
	attendGroupF32(q, k, v, stride, n, scale, sinks, scores, out)
}

// AttendTileF16 is AttendGroupF16 for heads whose rows all start at the
// first row but end at different ones: head s reads rows [0, rows[s])
// (each at least 1), like the consecutive tokens of a prompt under a causal
// mask. Each head's result is AttendF16's over its own rows bit for bit;
// the rows all heads read are loaded once for all of them. scores is
// scratch of at least GroupSlots·max(rows) floats.
func AttendTileF16(q []float32, k, v []uint16, stride int, rows *[GroupSlots]int, scale float32, sinks, scores, out []float32) {
	attendTileF16(q, k, v, stride, rows, scale, sinks, scores, out)
}

// AttendTileF32 is AttendTileF16 for a float32 cache.
func AttendTileF32(q []float32, k, v []float32, stride int, rows *[GroupSlots]int, scale float32, sinks, scores, out []float32) {
	attendTileF32(q, k, v, stride, rows, scale, sinks, scores, out)
}

func refAttendTileF16(q []float32, k, v []uint16, stride int, rows *[GroupSlots]int, scale float32, sinks, scores, out []float32) {
	dim := len(q) / GroupSlots
	for s := 0; s < GroupSlots; s++ {
		AttendF16(q[s*dim:(s+1)*dim], k, v, stride, rows[s], groupHead(scale, sinks, s), scores, out[s*dim:(s+1)*dim])
	}
}

func refAttendTileF32(q []float32, k, v []float32, stride int, rows *[GroupSlots]int, scale float32, sinks, scores, out []float32) {
	dim := len(q) / GroupSlots
	for s := 0; s < GroupSlots; s++ {
		AttendF32(q[s*dim:(s+1)*dim], k, v, stride, rows[s], groupHead(scale, sinks, s), scores, out[s*dim:(s+1)*dim])
	}
}

// rowSpan is the fewest and the most rows of a tile's heads.
func rowSpan(rows *[GroupSlots]int) (lo, hi int) {
	lo, hi = rows[0], rows[0]
	for _, r := range rows[1:] {
		lo, hi = min(lo, r), max(hi, r)
	}
	return lo, hi
}

// groupShape reports whether the grouped assembly (AVX2, NEON) takes these
// arguments: head widths that are multiples of 8 up to maxGroupDim, at
// least one row, and complete slices; other shapes run head by head.
func groupShape(q, out []float32, have, stride, n int, sinks, scores []float32) bool {
	dim := len(q) / GroupSlots
	return n > 0 && dim > 0 && dim%8 == 0 && dim <= maxGroupDim &&
		len(q) == GroupSlots*dim && len(out) >= len(q) && stride >= dim &&
		have >= (n-1)*stride+dim && len(scores) >= GroupSlots*n &&
		(sinks == nil || len(sinks) >= GroupSlots)
}

func groupHead(scale float32, sinks []float32, s int) Head {
	h := Head{Scale: scale}
	if sinks != nil {
		h.Sink, h.HasSink = sinks[s], true
	}
	return h
}

func refAttendGroupF16(q []float32, k, v []uint16, stride, n int, scale float32, sinks, scores, out []float32) {
	dim := len(q) / GroupSlots
	for s := 0; s < GroupSlots; s++ {
		AttendF16(q[s*dim:(s+1)*dim], k, v, stride, n, groupHead(scale, sinks, s), scores, out[s*dim:(s+1)*dim])
	}
}

func refAttendGroupF32(q []float32, k, v []float32, stride, n int, scale float32, sinks, scores, out []float32) {
	dim := len(q) / GroupSlots
	for s := 0; s < GroupSlots; s++ {
		AttendF32(q[s*dim:(s+1)*dim], k, v, stride, n, groupHead(scale, sinks, s), scores, out[s*dim:(s+1)*dim])
	}
}

// Softmax replaces x with softmax(x): the maximum subtracted, each
// exponential rounded to float32, their sum accumulated in float64 in
// order, then each value multiplied by float32(1/sum).
func Softmax(x []float32) {
	mx := float32(math.Inf(-1))
	for _, v := range x {
		if v > mx {
			mx = v
		}
	}
	inv := float32(1.0 / expShift(x, mx))
	for i := range x {
		x[i] *= inv
	}
}

// SoftmaxSink is Softmax with one extra logit, sink, in the denominator
// only (ggml_soft_max with sinks: the maximum includes the sink and
// exp(sink - max) is added to the float64 sum after the others).
func SoftmaxSink(x []float32, sink float32) {
	mx := float32(math.Inf(-1))
	for _, v := range x {
		if v > mx {
			mx = v
		}
	}
	if sink > mx {
		mx = sink
	}
	sum := expShift(x, mx)
	sum += float64(float32(math.Exp(float64(sink - mx))))
	inv := float32(1.0 / sum)
	for i := range x {
		x[i] *= inv
	}
}

// refExpShift replaces x[i] with float32(exp(x[i] - m)) and returns the
// float64 sum of the results in order (expShift: the same, vectorized where
// the assembly runs).
func refExpShift(x []float32, m float32) float64 { return expShiftFrom(x, m, 0) }

// expShiftFrom is refExpShift with the sum continued from sum.
func expShiftFrom(x []float32, m float32, sum float64) float64 {
	for i, v := range x {
		e := float32(math.Exp(float64(v - m)))
		x[i] = e
		sum += float64(e)
	}
	return sum
}

// refRoundF16s rounds every x[i] to the nearest F16 value (ties to even)
// and back to float32, as the F16 cache stores values (roundF16s: the same,
// vectorized where the assembly runs).
func refRoundF16s(x []float32) {
	tab := f16Table()
	for i, v := range x {
		x[i] = tab[quant.FP32ToFP16(v)]
	}
}
