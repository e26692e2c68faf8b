package kernels

import "math"

// SwiGLU writes silu(gate[i])·up[i] into out as ggml's scalar code computes
// it, gate/(1+float32(exp(-gate)))·up in float32 with math.Exp's float64
// exponential: the same values bit for bit where the assembly runs (which
// replicates math.Exp, as the softmax's exponentials do). out may alias gate
// or up; gate and up hold at least len(out) values.
func SwiGLU(out, gate, up []float32) {
	swiGLU(out, gate[:len(out)], up[:len(out)])
}

// refSwiGLU is SwiGLU in Go.
func refSwiGLU(out, gate, up []float32) {
	for i := range out {
		g := gate[i]
		out[i] = g / (1 + float32(math.Exp(float64(-g)))) * up[i]
	}
}

// SiLU writes silu(x[i]) = x[i]/(1+float32(exp(-x[i]))) into out as
// ggml's scalar code computes it (SwiGLU without the up factor): the same
// values bit for bit where the assembly runs. out may alias x; x holds at
// least len(out) values.
func SiLU(out, x []float32) { silu(out, x[:len(out)]) }

// refSiLU is SiLU in Go.
func refSiLU(out, x []float32) {
	for i := range out {
		v := x[i]
		out[i] = v / (1 + float32(math.Exp(float64(-v))))
	}
}

// Exp replaces every x[i] with float32(math.Exp(float64(x[i]))): the same
// values bit for bit where the assembly runs (the softmax's exponentials,
// which replicate math.Exp), for activations other than SwiGLU's.
func Exp(x []float32) { expShift(x, 0) }
