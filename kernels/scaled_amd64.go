//go:build amd64 && !purego

package kernels

//go:noescape
func mulScalarAVX2(out, y *float32, n int, w float32)

//go:noescape
func addMulScalarAVX2(out, y *float32, n int, w float32)

// mulScalar is refMulScalar with whole groups of 8 in assembly.
func mulScalar(out, y []float32, w float32) {
	n8 := len(out) &^ 7
	if hasAVX2 && n8 > 0 {
		mulScalarAVX2(&out[0], &y[0], n8, w)
	}
	refMulScalar(out[n8:], y[n8:], w)
}

// addMulScalar is refAddMulScalar with whole groups of 8 in assembly
// (VMULPS then VADDPS: the product rounds before the addition).
func addMulScalar(out, y []float32, w float32) {
	n8 := len(out) &^ 7
	if hasAVX2 && n8 > 0 {
		addMulScalarAVX2(&out[0], &y[0], n8, w)
	}
	refAddMulScalar(out[n8:], y[n8:], w)
}
