//go:build arm64 && !purego

package kernels

//go:noescape
func mulScalarNEON(out, y *float32, n int, w float32)

//go:noescape
func addMulScalarNEON(out, y *float32, n int, w float32)

// mulScalar and addMulScalar run whole groups of 4 in assembly
// (attn_arm64.s: FMUL, then FADD for the sum, never fused) and the rest in
// the reference.
func mulScalar(out, y []float32, w float32) {
	n4 := len(out) &^ 3
	if n4 > 0 {
		mulScalarNEON(&out[0], &y[0], n4, w)
	}
	refMulScalar(out[n4:], y[n4:], w)
}

func addMulScalar(out, y []float32, w float32) {
	n4 := len(out) &^ 3
	if n4 > 0 {
		addMulScalarNEON(&out[0], &y[0], n4, w)
	}
	refAddMulScalar(out[n4:], y[n4:], w)
}
