//go:build arm64 && !purego

package kernels

//go:noescape
func dots8F16NEON(qp *float32, k *uint16, stride, dim, n int, scores *float32)

//go:noescape
func axpys8F16NEON(out *float32, pt *float32, v *uint16, stride, dim, n int)

// groupRows is the rows of one block of the grouped value sums: their
// probabilities, transposed to GroupSlots per row, live on the stack.
const groupRows = 256

// attendGroupF16 is refAttendGroupF16 with each K and V row loaded and
// widened once for the 8 heads (attn8_arm64.s): the queries, rounded to
// F16, packed chunk-major; the scores head-major, so each head's softmax
// and F16 rounding run as AttendF16's on its own contiguous row; the
// probabilities transposed to row order a block of groupRows at a time for
// the value sums.
func attendGroupF16(q []float32, k, v []uint16, stride, n int, scale float32, sinks, scores, out []float32) {
	if !groupShape(q, out, min(len(k), len(v)), stride, n, sinks, scores) {
		refAttendGroupF16(q, k, v, stride, n, scale, sinks, scores, out)
		return
	}
	dim := len(q) / GroupSlots
	var qp [GroupSlots * maxGroupDim]float32
	for s := range GroupSlots {
		for c := 0; c < dim; c += 4 {
			copy(qp[c*GroupSlots+4*s:c*GroupSlots+4*s+4], q[s*dim+c:s*dim+c+4])
		}
	}
	roundF16s(qp[:GroupSlots*dim])
	sc := scores[:GroupSlots*n]
	dots8F16NEON(&qp[0], &k[0], stride, dim, n, &sc[0])
	for s := range GroupSlots {
		h := sc[s*n : (s+1)*n]
		softmaxScaled(h, groupHead(scale, sinks, s))
		roundF16s(h) // the weights are rounded to F16 like the cache
	}
	o := out[:GroupSlots*dim]
	clear(o)
	var pt [groupRows * GroupSlots]float32
	for j0 := 0; j0 < n; j0 += groupRows {
		m := min(groupRows, n-j0)
		for s := range GroupSlots {
			for j, p := range sc[s*n+j0 : s*n+j0+m] {
				pt[j*GroupSlots+s] = p
			}
		}
		axpys8F16NEON(&o[0], &pt[0], &v[j0*stride], stride, dim, m)
	}
}

func attendGroupF32(q []float32, k, v []float32, stride, n int, scale float32, sinks, scores, out []float32) {
	refAttendGroupF32(q, k, v, stride, n, scale, sinks, scores, out)
}

func attendTileF16(q []float32, k, v []uint16, stride int, rows *[GroupSlots]int, scale float32, sinks, scores, out []float32) {
	refAttendTileF16(q, k, v, stride, rows, scale, sinks, scores, out)
}

func attendTileF32(q []float32, k, v []float32, stride int, rows *[GroupSlots]int, scale float32, sinks, scores, out []float32) {
	refAttendTileF32(q, k, v, stride, rows, scale, sinks, scores, out)
}
