//go:build arm64 && !purego

package kernels

import "github.com/pipe-engine/pipe/quant"

//go:noescape
func dotsF16NEON(q *float32, k *uint16, stride, dim, n int, out *float32)

//go:noescape
func dotsF32NEON(q *float32, k *float32, stride, dim, n int, out *float32)

//go:noescape
func axpysF16NEON(out *float32, p *float32, v *uint16, stride, dim, n int)

//go:noescape
func axpysF32NEON(out *float32, p *float32, v *float32, stride, dim, n int)

//go:noescape
func roundF16sNEON(x *float32, n int) bool

// The assembly (attn_arm64.s) takes row lengths that are multiples of 4
// and at least one row; other shapes run the reference. Every AArch64 core
// has the Advanced SIMD and half-precision conversions it uses.

func attnOk(dim, stride, n, have int) bool {
	return n > 0 && dim > 0 && dim%4 == 0 && stride >= 0 && have >= (n-1)*stride+dim
}

func dotsF16(q []float32, k []uint16, stride int, out []float32) {
	if !attnOk(len(q), stride, len(out), len(k)) {
		refDotsF16(q, k, stride, out)
		return
	}
	dotsF16NEON(&q[0], &k[0], stride, len(q), len(out), &out[0])
}

func dotsF32(q, k []float32, stride int, out []float32) {
	if !attnOk(len(q), stride, len(out), len(k)) {
		refDotsF32(q, k, stride, out)
		return
	}
	dotsF32NEON(&q[0], &k[0], stride, len(q), len(out), &out[0])
}

func axpysF16(out, p []float32, v []uint16, stride int) {
	if !attnOk(len(out), stride, len(p), len(v)) {
		refAxpysF16(out, p, v, stride)
		return
	}
	axpysF16NEON(&out[0], &p[0], &v[0], stride, len(out), len(p))
}

func axpysF32(out, p, v []float32, stride int) {
	if !attnOk(len(out), stride, len(p), len(v)) {
		refAxpysF32(out, p, v, stride)
		return
	}
	axpysF32NEON(&out[0], &p[0], &v[0], stride, len(out), len(p))
}

// roundF16s is refRoundF16s with whole groups of 4 in assembly. A NaN
// comes back from FCVTN/FCVTL a NaN of the same sign, and
// quant.FP32ToFP16 maps every NaN of a sign to one value, so the NaNs are
// redone from the assembly's output.
func roundF16s(x []float32) {
	n4 := len(x) &^ 3
	if n4 > 0 && roundF16sNEON(&x[0], n4) {
		refRoundNaNs(x[:n4])
	}
	refRoundF16s(x[n4:])
}

func refRoundNaNs(x []float32) {
	tab := f16Table()
	for i, v := range x {
		if v != v {
			x[i] = tab[quant.FP32ToFP16(v)]
		}
	}
}
