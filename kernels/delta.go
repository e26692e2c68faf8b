package kernels

// DeltaRule applies one token of the gated delta rule (qwen35moe's
// gated delta-net, ggml_gated_delta_net) to a value head's state m, whose
// len(out) rows of len(k) floats are contiguous (row r is column r of the
// state, ggml's layout), and writes the head's output. Each row is
// independent; for row r, with all arithmetic in float32:
//
//	m_r = m_r·eg                          (every element)
//	δ   = (v[r] − k·m_r)·beta             (k·m_r in DotsF32's order)
//	m_r = m_r + float32(k·δ)              (the product rounded: never fused)
//	out[r] = (q·m_r)·scale                (DotsF32's order)
//
// which is, bit for bit, scaling the whole state, DotsF32 of k against it,
// the rank-1 update and DotsF32 of q, done one row at a time in a single
// pass. q has len(k) values, v len(out), m len(out)·len(k). The AVX2 and
// AVX-512 (delta_amd64.s) and NEON (delta_arm64.s) versions run four rows
// at a time in the same order.
func DeltaRule(m, k, q, v, out []float32, eg, beta, scale float32) {
	w := len(k)
	deltaRule(m[:len(out)*w], k, q[:w], v[:len(out)], out, eg, beta, scale)
}

// refDeltaRule is DeltaRule in Go.
func refDeltaRule(m, k, q, v, out []float32, eg, beta, scale float32) {
	w := len(k)
	var d [1]float32
	for r := range out {
		row := m[r*w : (r+1)*w]
		for i := range row {
			row[i] *= eg
		}
		refDotsF32(k, row, w, d[:])
		dr := (v[r] - d[0]) * beta
		for i, ki := range k {
			row[i] += float32(ki * dr) // explicit rounding: never fused into an FMA
		}
		refDotsF32(q, row, w, d[:])
		out[r] = d[0] * scale
	}
}
