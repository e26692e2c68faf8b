//go:build amd64 && !purego

package kernels

// packPerm reorders the lanes after VPACKSSDW/VPACKSSWB (which work per
// 128-bit half) back into element order.
var packPerm = [8]int32{0, 4, 1, 5, 2, 6, 3, 7}

//go:noescape
func quantQ8_0AVX2(x *float32, qs *int8, d *float32, nb int)

//go:noescape
func quantQ8_KAVX2(x *float32, qs *int8, d *float32, bsums *int16, nb int)

func avx2QuantQ8_0(x []float32, qs []int8, d []float32) {
	nb := len(d)
	if nb == 0 || len(x) < nb*32 || len(qs) < nb*32 {
		refQuantQ8_0(x, qs, d)
		return
	}
	quantQ8_0AVX2(&x[0], &qs[0], &d[0], nb)
}

func avx2QuantQ8_K(x []float32, qs []int8, d []float32, bsums []int16) {
	nb := len(d)
	if nb == 0 || len(x) < nb*256 || len(qs) < nb*256 || len(bsums) < nb*16 {
		refQuantQ8_K(x, qs, d, bsums)
		return
	}
	quantQ8_KAVX2(&x[0], &qs[0], &d[0], &bsums[0], nb)
}
