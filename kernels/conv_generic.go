//go:build !(amd64 || arm64) || purego

package kernels

func conv4(out, in0, in1, in2, w []float32) { refConv4(out, in0, in1, in2, w) }

func convStep4(state, x, w []float32) { refConvStep4(state, x, w) }
