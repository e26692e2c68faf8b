//go:build !(amd64 || arm64) || purego

package kernels

func dotsF16(q []float32, k []uint16, stride int, out []float32) { refDotsF16(q, k, stride, out) }

func dotsF32(q, k []float32, stride int, out []float32) { refDotsF32(q, k, stride, out) }

func axpysF16(out, p []float32, v []uint16, stride int) { refAxpysF16(out, p, v, stride) }

func axpysF32(out, p, v []float32, stride int) { refAxpysF32(out, p, v, stride) }

func roundF16s(x []float32) { refRoundF16s(x) }

func expShift(x []float32, m float32) float64 { return refExpShift(x, m) }
