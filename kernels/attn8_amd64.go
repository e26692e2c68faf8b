//go:build amd64 && !purego

package kernels

import (
	"math"

	"golang.org/x/sys/cpu"
)

//go:noescape
func packQ8AVX2(q *float32, dim int, qp *float32, round bool)

//go:noescape
func dots8F16AVX2(qp *float32, k *uint16, stride, dim, n int, out *float32)

//go:noescape
func dots8F32AVX2(qp *float32, k *float32, stride, dim, n int, out *float32)

//go:noescape
func axpys8F16AVX2(out *float32, p *float32, v *uint16, stride, dim, n int)

//go:noescape
func axpys8F32AVX2(out *float32, p *float32, v *float32, stride, dim, n int)

//go:noescape
func scaleMax8AVX2(sc *float32, n int, scale float32, mx *[GroupSlots]float32)

//go:noescape
func expSum8AVX2(sc *float32, n int, mx *[GroupSlots]float32, sum *[GroupSlots]float64)

//go:noescape
func expShiftAVX2(x *float32, n int, m float32) float64

//go:noescape
func roundF16AVX2(x *float32, n int)

//go:noescape
func mulRound8AVX2(sc *float32, n int, inv *[GroupSlots]float32, round bool)

// hasGroupAVX2: the grouped kernels also need FMA, with which math.Exp
// computes on amd64 (its exp is replicated, not approximated).
var hasGroupAVX2 = hasAVX2 && cpu.X86.HasAVX && cpu.X86.HasFMA

// groupOk: the AVX2 assembly runs the shapes groupShape admits.
func groupOk(q, out []float32, have, stride, n int, sinks, scores []float32) bool {
	return hasGroupAVX2 && groupShape(q, out, have, stride, n, sinks, scores)
}

func attendGroupF16(q []float32, k, v []uint16, stride, n int, scale float32, sinks, scores, out []float32) {
	if !groupOk(q, out, min(len(k), len(v)), stride, n, sinks, scores) {
		refAttendGroupF16(q, k, v, stride, n, scale, sinks, scores, out)
		return
	}
	dim := len(q) / GroupSlots
	var qp [GroupSlots * maxGroupDim]float32
	packQ8AVX2(&q[0], dim, &qp[0], true)
	dots8F16AVX2(&qp[0], &k[0], stride, dim, n, &scores[0])
	softmax8(scores, n, scale, sinks, true)
	o := out[:len(q)]
	clear(o)
	axpys8F16AVX2(&o[0], &scores[0], &v[0], stride, dim, n)
}

func attendGroupF32(q []float32, k, v []float32, stride, n int, scale float32, sinks, scores, out []float32) {
	if !groupOk(q, out, min(len(k), len(v)), stride, n, sinks, scores) {
		refAttendGroupF32(q, k, v, stride, n, scale, sinks, scores, out)
		return
	}
	dim := len(q) / GroupSlots
	var qp [GroupSlots * maxGroupDim]float32
	packQ8AVX2(&q[0], dim, &qp[0], false)
	dots8F32AVX2(&qp[0], &k[0], stride, dim, n, &scores[0])
	softmax8(scores, n, scale, sinks, false)
	o := out[:len(q)]
	clear(o)
	axpys8F32AVX2(&o[0], &scores[0], &v[0], stride, dim, n)
}

// softmax8 is softmaxScaled for each slot of n rows of GroupSlots scores,
// the probabilities rounded to F16 when round is set.
func softmax8(sc []float32, n int, scale float32, sinks []float32, round bool) {
	var mx [GroupSlots]float32
	scaleMax8AVX2(&sc[0], n, scale, &mx)
	if sinks != nil {
		for s, x := range sinks[:GroupSlots] {
			if x > mx[s] {
				mx[s] = x
			}
		}
	}
	var sum [GroupSlots]float64
	expSum8AVX2(&sc[0], n, &mx, &sum)
	var inv [GroupSlots]float32
	for s := range inv {
		if sinks != nil {
			sum[s] += float64(float32(math.Exp(float64(sinks[s] - mx[s]))))
		}
		inv[s] = float32(1.0 / sum[s])
	}
	mulRound8AVX2(&sc[0], n, &inv, round)
}

// expShift is refExpShift with whole groups of 8 in assembly (the same
// values, the sum continued in order over the tail).
func expShift(x []float32, m float32) float64 {
	n8 := len(x) &^ 7
	if !hasGroupAVX2 || n8 == 0 {
		return refExpShift(x, m)
	}
	return expShiftFrom(x[n8:], m, expShiftAVX2(&x[0], n8, m))
}

// roundF16s is refRoundF16s with whole groups of 8 in assembly.
func roundF16s(x []float32) {
	n8 := len(x) &^ 7
	if hasAVX2 && n8 > 0 {
		roundF16AVX2(&x[0], n8)
	}
	refRoundF16s(x[n8:])
}

// attendTileF16 runs the grouped kernels over the rows of the longest head
// with the scores past each head's last row set to -Inf before the softmax
// (with a positive scale they stay -Inf, their exponentials are exactly 0
// and add exactly 0 to the float64 sum), the value sums over the rows every
// head reads, then each head's own remaining rows in order.
func attendTileF16(q []float32, k, v []uint16, stride int, rows *[GroupSlots]int, scale float32, sinks, scores, out []float32) {
	lo, hi := rowSpan(rows)
	if lo == hi {
		attendGroupF16(q, k, v, stride, hi, scale, sinks, scores, out)
		return
	}
	if lo < 1 || !(scale > 0) || !groupOk(q, out, min(len(k), len(v)), stride, hi, sinks, scores) {
		refAttendTileF16(q, k, v, stride, rows, scale, sinks, scores, out)
		return
	}
	dim := len(q) / GroupSlots
	var qp [GroupSlots * maxGroupDim]float32
	packQ8AVX2(&q[0], dim, &qp[0], true)
	dots8F16AVX2(&qp[0], &k[0], stride, dim, hi, &scores[0])
	maskRows(scores, rows, hi)
	softmax8(scores, hi, scale, sinks, true)
	o := out[:len(q)]
	clear(o)
	axpys8F16AVX2(&o[0], &scores[0], &v[0], stride, dim, lo)
	tailRows(scores, rows, lo, func(s int, p []float32, j int) {
		AxpysF16(o[s*dim:(s+1)*dim], p, v[j*stride:], stride)
	})
}

func attendTileF32(q []float32, k, v []float32, stride int, rows *[GroupSlots]int, scale float32, sinks, scores, out []float32) {
	lo, hi := rowSpan(rows)
	if lo == hi {
		attendGroupF32(q, k, v, stride, hi, scale, sinks, scores, out)
		return
	}
	if lo < 1 || !(scale > 0) || !groupOk(q, out, min(len(k), len(v)), stride, hi, sinks, scores) {
		refAttendTileF32(q, k, v, stride, rows, scale, sinks, scores, out)
		return
	}
	dim := len(q) / GroupSlots
	var qp [GroupSlots * maxGroupDim]float32
	packQ8AVX2(&q[0], dim, &qp[0], false)
	dots8F32AVX2(&qp[0], &k[0], stride, dim, hi, &scores[0])
	maskRows(scores, rows, hi)
	softmax8(scores, hi, scale, sinks, false)
	o := out[:len(q)]
	clear(o)
	axpys8F32AVX2(&o[0], &scores[0], &v[0], stride, dim, lo)
	tailRows(scores, rows, lo, func(s int, p []float32, j int) {
		AxpysF32(o[s*dim:(s+1)*dim], p, v[j*stride:], stride)
	})
}

// maskRows sets head s's scores (lane s of n rows of GroupSlots) past its
// rows[s] rows to -Inf.
func maskRows(sc []float32, rows *[GroupSlots]int, n int) {
	ninf := float32(math.Inf(-1))
	for s, r := range rows {
		for j := r; j < n; j++ {
			sc[j*GroupSlots+s] = ninf
		}
	}
}

// tailRows hands each head's probabilities for its rows from lo on to add,
// in row order, in runs of up to 64 rows starting at row j.
func tailRows(sc []float32, rows *[GroupSlots]int, lo int, add func(s int, p []float32, j int)) {
	var p [64]float32
	for s, r := range rows {
		for j := lo; j < r; j += len(p) {
			m := min(len(p), r-j)
			for i := 0; i < m; i++ {
				p[i] = sc[(j+i)*GroupSlots+s]
			}
			add(s, p[:m], j)
		}
	}
}
