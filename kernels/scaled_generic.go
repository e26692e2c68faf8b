//go:build !(amd64 || arm64) || purego

package kernels

func mulScalar(out, y []float32, w float32) { refMulScalar(out, y, w) }

func addMulScalar(out, y []float32, w float32) { refAddMulScalar(out, y, w) }
