//go:build arm64 && !purego

package kernels

//go:noescape
func quantQ8_0NEON(x *float32, qs *int8, d *float32, nb int)

//go:noescape
func quantQ8_KNEON(x *float32, qs *int8, d *float32, bsums *int16, nb int)

func neonQuantQ8_0(x []float32, qs []int8, d []float32) {
	nb := len(d)
	if nb == 0 || len(x) < nb*32 || len(qs) < nb*32 {
		refQuantQ8_0(x, qs, d)
		return
	}
	quantQ8_0NEON(&x[0], &qs[0], &d[0], nb)
}

func neonQuantQ8_K(x []float32, qs []int8, d []float32, bsums []int16) {
	nb := len(d)
	if nb == 0 || len(x) < nb*256 || len(qs) < nb*256 || len(bsums) < nb*16 {
		refQuantQ8_K(x, qs, d, bsums)
		return
	}
	quantQ8_KNEON(&x[0], &qs[0], &d[0], &bsums[0], nb)
}
