//go:build arm64 && !purego

package kernels

// fp32ToFP16sNEON converts n values (a multiple of 4) with FCVTN, rounding
// to nearest even, and reports whether any was a NaN (which FCVTN converts
// with its payload, unlike quant.FP32ToFP16).
//
//go:noescape
func fp32ToFP16sNEON(dst *uint16, src *float32, n int) bool

// fp32ToFP16s is refFP32ToFP16s with whole groups of 4 in assembly, NaNs
// redone by the scalar conversion.
func fp32ToFP16s(dst []uint16, src []float32) {
	n4 := len(dst) &^ 3
	if n4 > 0 && fp32ToFP16sNEON(&dst[0], &src[0], n4) {
		redoNaNs(dst[:n4], src[:n4])
	}
	refFP32ToFP16s(dst[n4:], src[n4:])
}
