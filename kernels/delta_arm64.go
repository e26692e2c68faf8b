//go:build arm64 && !purego

package kernels

//go:noescape
func deltaRuleNEON(m, k, q, v, out *float32, w, rows int, eg, beta, scale float32)

// deltaRule is refDeltaRule with whole groups of four rows in NEON
// assembly when the row width is a multiple of 4; the other rows run the
// reference.
func deltaRule(m, k, q, v, out []float32, eg, beta, scale float32) {
	w, r4 := len(k), len(out)&^3
	if w == 0 || w%4 != 0 || r4 == 0 {
		refDeltaRule(m, k, q, v, out, eg, beta, scale)
		return
	}
	deltaRuleNEON(&m[0], &k[0], &q[0], &v[0], &out[0], w, r4, eg, beta, scale)
	refDeltaRule(m[r4*w:], k, q, v[r4:], out[r4:], eg, beta, scale)
}
