//go:build amd64 && !purego

package kernels

import (
	"maps"

	"github.com/pipe-engine/pipe/quant"
	"golang.org/x/sys/cpu"
)

// hasAVX512 gates the AVX-512 kernels (F, BW, DQ, VL on top of AVX2).
var hasAVX512 = hasAVX2 && cpu.X86.HasAVX512F && cpu.X86.HasAVX512BW &&
	cpu.X86.HasAVX512DQ && cpu.X86.HasAVX512VL

//go:noescape
func dotMXFP4AVX512(w *byte, qs *int8, d *float32, corr *int32, nb int) float32

func avx512DotMXFP4(w []byte, a *Activation) float32 {
	nb, ok := q8Ok(w, a, 17, 32)
	if !ok {
		return nan
	}
	if len(a.corr) < nb*8 || a.weight != quant.MXFP4 {
		return refDotMXFP4(w, a)
	}
	return dotMXFP4AVX512(&w[0], &a.qs[0], &a.d[0], &a.corr[0], nb)
}

func avx512RowsMXFP4(w []byte, rb int, a *Activation, y []float32) {
	nb, ok := q8Ok(w[:min(rb, len(w))], a, 17, 32)
	if !ok || !rowsOk(w, rb, y) {
		fillNaN(y)
		return
	}
	if len(a.corr) < nb*8 || a.weight != quant.MXFP4 {
		for i := range y {
			y[i] = refDotMXFP4(w[i*rb:(i+1)*rb], a)
		}
		return
	}
	for i := range y {
		y[i] = dotMXFP4AVX512(&w[i*rb], &a.qs[0], &a.d[0], &a.corr[0], nb)
	}
}

// avx512Impl is the AVX2 set with the AVX-512 kernels swapped in.
func avx512Impl(base *implementation) *implementation {
	m := &implementation{
		name:      "avx512",
		quantQ8_0: base.quantQ8_0,
		quantQ8_K: base.quantQ8_K,
		dots:      maps.Clone(base.dots),
		rows:      maps.Clone(base.rows),
		native:    maps.Clone(base.native),
		gemm:      maps.Clone(base.gemm),
	}
	m.dots[quant.MXFP4] = avx512DotMXFP4
	m.rows[quant.MXFP4] = avx512RowsMXFP4
	return m
}
