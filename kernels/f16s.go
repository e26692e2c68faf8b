package kernels

import "github.com/pipe-engine/pipe/quant"

// FP32ToFP16s writes quant.FP32ToFP16(src[i]) into dst[i] for every i <
// len(dst) (the F16 cache's rounding: nearest, ties to even; a NaN becomes
// sign|0x7e00); src holds at least len(dst) values. Vectorized (F16C on
// amd64, FCVTN on arm64) where the assembly runs, with the same bits.
func FP32ToFP16s(dst []uint16, src []float32) { fp32ToFP16s(dst, src[:len(dst)]) }

// redoNaNs rewrites dst[i] with quant.FP32ToFP16(src[i]) where src[i] is
// a NaN: the hardware conversions (F16C, FCVTN) keep a NaN's payload.
func redoNaNs(dst []uint16, src []float32) {
	for i, v := range src {
		if v != v {
			dst[i] = quant.FP32ToFP16(v)
		}
	}
}

func refFP32ToFP16s(dst []uint16, src []float32) {
	for i, v := range src {
		dst[i] = quant.FP32ToFP16(v)
	}
}
