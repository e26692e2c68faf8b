//go:build amd64 && !purego

package kernels

//go:noescape
func deltaRuleAVX2(m, k, q, v, out *float32, w, rows int, eg, beta, scale float32)

//go:noescape
func deltaRuleAVX512(m, k, q, v, out *float32, w, rows int, eg, beta, scale float32, idx *int32)

// deltaIdx holds deltaRuleAVX512's VPERMPS indices: four values spread
// over the four 128-bit lanes, then element 0 of each lane gathered.
var deltaIdx = [32]int32{0, 0, 0, 0, 1, 1, 1, 1, 2, 2, 2, 2, 3, 3, 3, 3, 0, 4, 8, 12}

// deltaAsm is the assembly deltaRule runs for rows of w floats: AVX-512
// for multiples of 16 where the CPU has it, else AVX2 for multiples of 4;
// nil for the reference.
func deltaAsm(w int) func(m, k, q, v, out []float32, r4 int, eg, beta, scale float32) {
	switch {
	case w > 0 && w%16 == 0 && hasAVX512:
		return deltaAVX512
	case w > 0 && w%4 == 0 && hasAVX2:
		return deltaAVX2
	}
	return nil
}

func deltaAVX512(m, k, q, v, out []float32, r4 int, eg, beta, scale float32) {
	deltaRuleAVX512(&m[0], &k[0], &q[0], &v[0], &out[0], len(k), r4, eg, beta, scale, &deltaIdx[0])
}

func deltaAVX2(m, k, q, v, out []float32, r4 int, eg, beta, scale float32) {
	deltaRuleAVX2(&m[0], &k[0], &q[0], &v[0], &out[0], len(k), r4, eg, beta, scale)
}

// deltaRule is refDeltaRule with whole groups of four rows in assembly
// (deltaAsm); the other rows, and widths no assembly takes, run the
// reference.
func deltaRule(m, k, q, v, out []float32, eg, beta, scale float32) {
	w, r4 := len(k), len(out)&^3
	asm := deltaAsm(w)
	if asm == nil || r4 == 0 {
		refDeltaRule(m, k, q, v, out, eg, beta, scale)
		return
	}
	asm(m, k, q, v, out, r4, eg, beta, scale)
	refDeltaRule(m[r4*w:], k, q, v[r4:], out[r4:], eg, beta, scale)
}
