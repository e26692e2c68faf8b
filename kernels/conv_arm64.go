//go:build arm64 && !purego

package kernels

//go:noescape
func conv4NEON(out, in0, in1, in2, w *float32, n int)

//go:noescape
func convStep4NEON(state, x, w *float32, n int)

// conv4 and convStep4 run whole groups of 4 channels in assembly
// (conv_arm64.s: LD4 and LD3 de-interleave the taps and the state) and the
// rest in the reference.
func conv4(out, in0, in1, in2, w []float32) {
	n4 := len(out) &^ 3
	if n4 > 0 {
		conv4NEON(&out[0], &in0[0], &in1[0], &in2[0], &w[0], n4)
	}
	refConv4(out[n4:], in0[n4:], in1[n4:], in2[n4:], w[4*n4:])
}

func convStep4(state, x, w []float32) {
	n4 := len(x) &^ 3
	if n4 > 0 {
		convStep4NEON(&state[0], &x[0], &w[0], n4)
	}
	refConvStep4(state[3*n4:], x[n4:], w[4*n4:])
}
