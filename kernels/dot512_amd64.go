//go:build amd64 && !purego

package kernels

import (
	"github.com/pipe-engine/pipe/quant"
	"golang.org/x/sys/cpu"
)

// Tables read by dot512_amd64.s.
var (
	// q4kShiftW: VPSRLVW counts leaving the low 256 bits and shifting the
	// high 256 bits down 4 (Q4_K low and high nibbles side by side).
	q4kShiftW [32]uint16
	// k4Shuf512d[j]: VPSHUFB control giving the low 256 bits int16 lane 2j
	// and the high 256 bits lane 2j+1 of each 128-bit lane (the scales of
	// Q4_K sub-blocks 2j and 2j+1).
	k4Shuf512d [4][64]byte
	// q6kShiftL, q6kShiftR: VPSLLVW/VPSRLVW counts putting Q6_K's high
	// bits of two parts at bits 4-5 (left 4 and 2; right 0 and 2).
	q6kShiftL, q6kShiftR [32]uint16
	// Q4_K scale unpacking in vector registers (K4SCALES512): VPSHUFB
	// controls gathering the bytes of scales 0-7 then mins 0-7 (k4ScaleLo:
	// low bits; k4ScaleHi: the bytes whose top two bits become bits 4-5,
	// zero where none), the masks of the low bits as gathered and as
	// shifted down 4, and 0xC0.
	k4ScaleLo = [16]byte{0, 1, 2, 3, 8, 9, 10, 11, 4, 5, 6, 7, 8, 9, 10, 11}
	k4ScaleHi = [16]byte{0x80, 0x80, 0x80, 0x80, 0, 1, 2, 3, 0x80, 0x80, 0x80, 0x80, 4, 5, 6, 7}
	k4MaskA   = [16]byte{63, 63, 63, 63, 15, 15, 15, 15, 63, 63, 63, 63, 0, 0, 0, 0}
	k4MaskB   = [16]byte{12: 15, 13: 15, 14: 15, 15: 15}
	k4MaskC0  = [16]byte{0xc0, 0xc0, 0xc0, 0xc0, 0xc0, 0xc0, 0xc0, 0xc0, 0xc0, 0xc0, 0xc0, 0xc0, 0xc0, 0xc0, 0xc0, 0xc0}
	// q6kPerm[k]: VPERMW indices giving word w the int16 scale 4k + w/8
	// (the four 16-element scales of two Q6_K parts).
	q6kPerm [4][32]uint16
)

func init() {
	for i := 0; i < 16; i++ {
		q4kShiftW[16+i] = 4
		q6kShiftL[i], q6kShiftL[16+i] = 4, 2
		q6kShiftR[16+i] = 2
	}
	for j := range k4Shuf512d {
		for i := 0; i < 16; i++ {
			k4Shuf512d[j][2*i], k4Shuf512d[j][2*i+1] = byte(4*j), byte(4*j+1)
			k4Shuf512d[j][32+2*i], k4Shuf512d[j][32+2*i+1] = byte(4*j+2), byte(4*j+3)
		}
	}
	for k := range q6kPerm {
		for w := range q6kPerm[k] {
			q6kPerm[k][w] = uint16(4*k + w/8)
		}
	}
}

//go:noescape
func dotQ4_KVNNI512(w *byte, qs *int8, d *float32, bsums *int16, nb int) float32

//go:noescape
func dotQ4_Kx4VNNI512(w *byte, rb int, qs *int8, d *float32, bsums *int16, nb int, y *float32)

//go:noescape
func dotQ6_KVNNI512(w *byte, qs *int8, d *float32, nb int) float32

func vnni512DotQ4_K(w []byte, a *Activation) float32 {
	nb, ok := q8Ok(w, a, 144, 256)
	if !ok || len(a.bsums) < nb*16 {
		return nan
	}
	return dotQ4_KVNNI512(&w[0], &a.qs[0], &a.d[0], &a.bsums[0], nb)
}

func vnni512DotQ6_K(w []byte, a *Activation) float32 {
	nb, ok := q8Ok(w, a, 210, 256)
	if !ok {
		return nan
	}
	return dotQ6_KVNNI512(&w[0], &a.qs[0], &a.d[0], nb)
}

// vnni512RowsQ4_K: four rows at a time (dotQ4_Kx4VNNI512), the rows left
// over one at a time; every row bit-identical to dotQ4_KVNNI512.
func vnni512RowsQ4_K(w []byte, rb int, a *Activation, y []float32) {
	nb, ok := q8Ok(w[:min(rb, len(w))], a, 144, 256)
	if !ok || !rowsOk(w, rb, y) || len(a.bsums) < nb*16 {
		fillNaN(y)
		return
	}
	i := 0
	for ; i+4 <= len(y); i += 4 {
		dotQ4_Kx4VNNI512(&w[i*rb], rb, &a.qs[0], &a.d[0], &a.bsums[0], nb, &y[i])
	}
	for ; i < len(y); i++ {
		y[i] = dotQ4_KVNNI512(&w[i*rb], &a.qs[0], &a.d[0], &a.bsums[0], nb)
	}
}

func vnni512RowsQ6_K(w []byte, rb int, a *Activation, y []float32) {
	nb, ok := q8Ok(w[:min(rb, len(w))], a, 210, 256)
	if !ok || !rowsOk(w, rb, y) {
		fillNaN(y)
		return
	}
	for i := range y {
		y[i] = dotQ6_KVNNI512(&w[i*rb], &a.qs[0], &a.d[0], nb)
	}
}

// installVNNI512 swaps the AVX-512 VNNI K-quant dots into m (an AVX2 set).
func installVNNI512(m *implementation) {
	m.dots[quant.Q4_K], m.rows[quant.Q4_K] = vnni512DotQ4_K, vnni512RowsQ4_K
	m.dots[quant.Q6_K], m.rows[quant.Q6_K] = vnni512DotQ6_K, vnni512RowsQ6_K
	m.rows[quant.Q8_0] = vnni512RowsQ8_0
	if hasVBMI {
		m.rows[quant.MXFP4] = mxfp4Kernel512.rows
		m.rows[quant.Q5_0] = q50Kernel512.rows
	}
}

// Tables read by dotMXFP4x4VNNI512.
var (
	// mx512Codes: VPERMB indices putting block b's 16 code bytes (bytes
	// 1-16 of the pair) in 128-bit lanes 0 and 1, block b+1's (18-33) in
	// lanes 2 and 3.
	mx512Codes [64]byte
	// mx512Exps: VPERMB indices putting exponent byte 0 (block b) in the
	// low byte of dwords 0-7 and byte 17 (block b+1) in dwords 8-15 (the
	// other bytes are zeroed by the mask).
	mx512Exps [64]byte
	// mx512KV[i] = quant.KValuesMXFP4[i&15] + 12: a VPERMB table (6-bit indices)
	// that maps a byte holding a code in its low 4 bits and anything in
	// bits 4-5 to the code's value; its low 256 bits are MXROW's table.
	mx512KV [64]byte
	// mx512Shift: VPSRLVD counts, 4 in lanes 1 and 3 (high nibbles).
	mx512Shift = [16]uint32{0, 0, 0, 0, 4, 4, 4, 4, 0, 0, 0, 0, 4, 4, 4, 4}
	// mx512DIdx: VPERMPS indices giving dwords 0-7 activation scale 0 and
	// 8-15 scale 1.
	mx512DIdx = [16]uint32{0, 0, 0, 0, 0, 0, 0, 0, 1, 1, 1, 1, 1, 1, 1, 1}
)

func init() {
	for i := 0; i < 16; i++ {
		mx512Codes[i], mx512Codes[16+i] = byte(1+i), byte(1+i)
		mx512Codes[32+i], mx512Codes[48+i] = byte(18+i), byte(18+i)
	}
	for j := 0; j < 16; j++ {
		mx512Exps[4*j] = byte(17 * (j / 8))
	}
	for i := range mx512KV {
		mx512KV[i] = byte(quant.KValuesMXFP4[i&15] + 12)
	}
}

// q8512Scales: VPERMW indices putting the F16 scale of Q8_0 block b (word
// 0 of the pair) in words 0-7 and block b+1's (word 17) in words 8-15.
var q8512Scales [32]uint16

func init() {
	for i := 0; i < 16; i++ {
		q8512Scales[i] = uint16(17 * (i / 8))
	}
}

//go:noescape
func dotQ8_0x4VNNI512(w *byte, rb int, qs *int8, d *float32, nb int, y *float32)

var vnni512RowsQ8_0 = q8RowsFunc(dotQ8_0x4VNNI512)

// hasVBMI gates dotMXFP4x4VNNI512 (VPERMB).
var hasVBMI = hasVNNI && cpu.X86.HasAVX512VBMI

//go:noescape
func dotMXFP4x4VNNI512(w *byte, rb int, qs *int8, d *float32, corr *int32, nb int, y *float32)

// mxfp4Kernel512 is mxfp4Kernel with the AVX-512 four-row kernel.
var mxfp4Kernel512 = offsetKernel{quant.MXFP4, 17, dotMXFP4AVX2, dotMXFP4x4VNNI512, refDotMXFP4}

//go:noescape
func dotQ5_0x4VNNI512(w *byte, rb int, qs *int8, d *float32, corr *int32, nb int, y *float32)

// q50Kernel512 is q50Kernel with the AVX-512 four-row kernel.
var q50Kernel512 = offsetKernel{quant.Q5_0, 22, dotQ5_0AVX2, dotQ5_0x4VNNI512, refDotQ5_0}

// Tables read by dotQ5_0x4VNNI512 (a pair of Q5_0 blocks is 44 bytes:
// block b's F16 scale at 0, qh at 2-5, codes at 6-21; block b+1's at 22,
// 24-27 and 28-43).
var (
	// q5512Codes: VPERMB indices putting block b's 16 code bytes in 128-bit
	// lanes 0 and 1, block b+1's in lanes 2 and 3.
	q5512Codes [64]byte
	// q5512Qh: VPERMB indices giving byte lane j (code j of the pair) the
	// qh byte that holds its high bit.
	q5512Qh [64]byte
	// q5512Bits: byte lane j holds 1<<(j%8), its code's bit in that byte.
	q5512Bits [64]byte
	// q5512Scales: VPERMW indices putting block b's F16 scale (word 0) in
	// words 0-7 and block b+1's (word 11) in words 8-15.
	q5512Scales [32]uint16
)

func init() {
	for i := 0; i < 16; i++ {
		q5512Codes[i], q5512Codes[16+i] = byte(6+i), byte(6+i)
		q5512Codes[32+i], q5512Codes[48+i] = byte(28+i), byte(28+i)
		q5512Scales[i] = uint16(11 * (i / 8))
	}
	for j := 0; j < 32; j++ {
		q5512Qh[j], q5512Qh[32+j] = byte(2+j/8), byte(24+j/8)
		q5512Bits[j], q5512Bits[32+j] = 1<<(j%8), 1<<(j%8)
	}
}
