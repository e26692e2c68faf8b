//go:build amd64 && !purego

package kernels

//go:noescape
func dotsF16AVX2(q *float32, k *uint16, stride, dim, n int, out *float32)

//go:noescape
func dotsF32AVX2(q *float32, k *float32, stride, dim, n int, out *float32)

//go:noescape
func axpysF16AVX2(out *float32, p *float32, v *uint16, stride, dim, n int)

//go:noescape
func axpysF32AVX2(out *float32, p *float32, v *float32, stride, dim, n int)

// The assembly needs AVX2 and F16C and takes row lengths that are
// multiples of 4 (dots) or 8 (axpys) and at least one row; other shapes and
// machines run the reference.

func dotsOk(dim, stride, n, have int) bool {
	return n > 0 && dim > 0 && dim%4 == 0 && stride >= 0 && have >= (n-1)*stride+dim
}

func dotsF16(q []float32, k []uint16, stride int, out []float32) {
	if !hasAVX2 || !dotsOk(len(q), stride, len(out), len(k)) {
		refDotsF16(q, k, stride, out)
		return
	}
	dotsF16AVX2(&q[0], &k[0], stride, len(q), len(out), &out[0])
}

func dotsF32(q, k []float32, stride int, out []float32) {
	if !hasAVX2 || !dotsOk(len(q), stride, len(out), len(k)) {
		refDotsF32(q, k, stride, out)
		return
	}
	dotsF32AVX2(&q[0], &k[0], stride, len(q), len(out), &out[0])
}

func axpysOk(dim, stride, n, have int) bool {
	return n > 0 && dim > 0 && dim%8 == 0 && stride >= 0 && have >= (n-1)*stride+dim
}

func axpysF16(out, p []float32, v []uint16, stride int) {
	if !hasAVX2 || !axpysOk(len(out), stride, len(p), len(v)) {
		refAxpysF16(out, p, v, stride)
		return
	}
	axpysF16AVX2(&out[0], &p[0], &v[0], stride, len(out), len(p))
}

func axpysF32(out, p, v []float32, stride int) {
	if !hasAVX2 || !axpysOk(len(out), stride, len(p), len(v)) {
		refAxpysF32(out, p, v, stride)
		return
	}
	axpysF32AVX2(&out[0], &p[0], &v[0], stride, len(out), len(p))
}
