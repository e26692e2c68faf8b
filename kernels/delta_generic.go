//go:build !(amd64 || arm64) || purego

package kernels

func deltaRule(m, k, q, v, out []float32, eg, beta, scale float32) {
	refDeltaRule(m, k, q, v, out, eg, beta, scale)
}
