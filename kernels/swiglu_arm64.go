//go:build arm64 && !purego

package kernels

//go:noescape
func swiGLUNEON(out, gate, up *float32, n int)

//go:noescape
func siluNEON(out, x *float32, n int)

//go:noescape
func expShiftNEON(x *float32, n int, m float32, sum float64) float64

// swiGLU, silu and expShift run whole groups of 4 in assembly
// (exp_arm64.s, whose exponential is math.Exp's arm64 code lane by lane)
// and the rest in the reference.

func swiGLU(out, gate, up []float32) {
	n4 := len(out) &^ 3
	if n4 > 0 {
		swiGLUNEON(&out[0], &gate[0], &up[0], n4)
	}
	refSwiGLU(out[n4:], gate[n4:], up[n4:])
}

func silu(out, x []float32) {
	n4 := len(out) &^ 3
	if n4 > 0 {
		siluNEON(&out[0], &x[0], n4)
	}
	refSiLU(out[n4:], x[n4:])
}

func expShift(x []float32, m float32) float64 {
	n4 := len(x) &^ 3
	var sum float64
	if n4 > 0 {
		sum = expShiftNEON(&x[0], n4, m, 0)
	}
	return expShiftFrom(x[n4:], m, sum)
}

// expF64NEON is the assembly's float64 exponential alone, for the tests.
//
//go:noescape
func expF64NEON(x *float64, n int)
