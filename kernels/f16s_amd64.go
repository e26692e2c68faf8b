//go:build amd64 && !purego

package kernels

// fp32ToFP16sAVX2 converts n values (a multiple of 8) with VCVTPS2PH,
// rounding to nearest even, and reports whether any was a NaN (which F16C
// converts with its payload, unlike quant.FP32ToFP16).
//
//go:noescape
func fp32ToFP16sAVX2(dst *uint16, src *float32, n int) bool

// fp32ToFP16s is refFP32ToFP16s with whole groups of 8 in assembly, NaNs
// redone by the scalar conversion.
func fp32ToFP16s(dst []uint16, src []float32) {
	n8 := len(dst) &^ 7
	if hasAVX2 && n8 > 0 && fp32ToFP16sAVX2(&dst[0], &src[0], n8) {
		redoNaNs(dst[:n8], src[:n8])
	}
	if !hasAVX2 {
		n8 = 0
	}
	refFP32ToFP16s(dst[n8:], src[n8:])
}
