//go:build !(amd64 || arm64) || purego

package kernels

func swiGLU(out, gate, up []float32) { refSwiGLU(out, gate, up) }

func silu(out, x []float32) { refSiLU(out, x) }
