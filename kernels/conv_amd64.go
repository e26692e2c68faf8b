//go:build amd64 && !purego

package kernels

//go:noescape
func conv4AVX2(out, in0, in1, in2, w *float32, n int)

//go:noescape
func convStep4AVX2(state, x, w *float32, n int)

// conv4 and convStep4 run whole groups of 8 channels in assembly
// (conv_amd64.s) and the rest in the reference.
func conv4(out, in0, in1, in2, w []float32) {
	n8 := len(out) &^ 7
	if hasAVX2 && n8 > 0 {
		conv4AVX2(&out[0], &in0[0], &in1[0], &in2[0], &w[0], n8)
	}
	refConv4(out[n8:], in0[n8:], in1[n8:], in2[n8:], w[4*n8:])
}

func convStep4(state, x, w []float32) {
	n8 := len(x) &^ 7
	if hasAVX2 && n8 > 0 {
		convStep4AVX2(&state[0], &x[0], &w[0], n8)
	}
	refConvStep4(state[3*n8:], x[n8:], w[4*n8:])
}
