//go:build amd64 && !purego

package kernels

//go:noescape
func swiGLUAVX2(out, gate, up *float32, n int)

// swiGLU is refSwiGLU with whole groups of 8 in assembly (hasGroupAVX2:
// math.Exp computes with FMA there, as the assembly does).
func swiGLU(out, gate, up []float32) {
	n8 := len(out) &^ 7
	if hasGroupAVX2 && n8 > 0 {
		swiGLUAVX2(&out[0], &gate[0], &up[0], n8)
	}
	refSwiGLU(out[n8:], gate[n8:], up[n8:])
}

//go:noescape
func siluAVX2(out, x *float32, n int)

// silu is refSiLU with whole groups of 8 in assembly (hasGroupAVX2, as
// swiGLU).
func silu(out, x []float32) {
	n8 := len(out) &^ 7
	if hasGroupAVX2 && n8 > 0 {
		siluAVX2(&out[0], &x[0], n8)
	}
	refSiLU(out[n8:], x[n8:])
}
