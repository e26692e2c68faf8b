//go:build amd64 && !purego

package kernels

import (
	"math"

	"github.com/pipe-engine/pipe/quant"
)

// Tables read by the assembly.
var (
	// k4Shuf[k]: VPSHUFB control broadcasting int16 lane k of a register
	// to all 16 lanes (Q4_K/Q5_K sub-block scales).
	k4Shuf [8][32]byte
	// q6Shuf[c]: 8 × byte 2c then 8 × byte 2c+1 (Q6_K scale pairs).
	q6Shuf [8][16]byte
	// quant.KValuesMXFP4 as a 16-byte VPSHUFB table is quant.KValuesMXFP4 itself.
	e8m0HalfTable [256]float32
	// kvaluesMXFP4u: quant.KValuesMXFP4 + 12, unsigned (0..24).
	kvaluesMXFP4u [16]byte
	// mxShift: VPSRLVD counts putting high nibbles in the upper half.
	mxShift = [8]uint32{0, 0, 0, 0, 4, 4, 4, 4}
	// q5Spread: VPSHUFB control giving lane i byte i/8 of a broadcast
	// dword (each 128-bit half indexes its own copy: bytes 2 and 3 in the
	// upper half), so lane i holds the byte with Q5_0 high bit i.
	q5Spread = [32]byte{0, 0, 0, 0, 0, 0, 0, 0, 1, 1, 1, 1, 1, 1, 1, 1,
		2, 2, 2, 2, 2, 2, 2, 2, 3, 3, 3, 3, 3, 3, 3, 3}
	// q5Bits: byte i is every bit but bit i%8, so ORing it in leaves all
	// ones exactly where that bit was set.
	q5Bits = [4]uint64{0x7fbfdfeff7fbfdfe, 0x7fbfdfeff7fbfdfe, 0x7fbfdfeff7fbfdfe, 0x7fbfdfeff7fbfdfe}
	// low4x32: 32 × 0x0F (the AVX2 Q5_0 multi-token kernel reads it from
	// memory: its registers hold the tokens' sums).
	low4x32 = [4]uint64{0x0F0F0F0F0F0F0F0F, 0x0F0F0F0F0F0F0F0F, 0x0F0F0F0F0F0F0F0F, 0x0F0F0F0F0F0F0F0F}
)

func init() {
	for k := 0; k < 8; k++ {
		for i := 0; i < 16; i++ {
			k4Shuf[k][2*i] = byte(2 * k)
			k4Shuf[k][2*i+1] = byte(2*k + 1)
		}
		for i := 0; i < 8; i++ {
			q6Shuf[k][i] = byte(2 * k)
			q6Shuf[k][8+i] = byte(2*k + 1)
		}
	}
	for i, v := range quant.KValuesMXFP4 {
		kvaluesMXFP4u[i] = byte(v + 12)
	}
	for e := range e8m0HalfTable {
		e8m0HalfTable[e] = e8m0Half(uint8(e))
	}
}

//go:noescape
func dotQ8_0AVX2(w *byte, qs *int8, d *float32, nb int) float32

// dotQ8_0x4AVX2 and dotMXFP4x4AVX2 write the dots of four rows rb bytes
// apart, each bit-identical to the single-row kernel on that row.
//
//go:noescape
func dotQ8_0x4AVX2(w *byte, rb int, qs *int8, d *float32, nb int, y *float32)

//go:noescape
func dotMXFP4x4AVX2(w *byte, rb int, qs *int8, d *float32, corr *int32, nb int, y *float32)

//go:noescape
func dotQ5_0x4AVX2(w *byte, rb int, qs *int8, d *float32, corr *int32, nb int, y *float32)

//go:noescape
func dotQ4_0AVX2(w *byte, qs *int8, d *float32, corr *int32, nb int) float32

//go:noescape
func dotQ5_0AVX2(w *byte, qs *int8, d *float32, corr *int32, nb int) float32

//go:noescape
func dotMXFP4AVX2(w *byte, qs *int8, d *float32, corr *int32, nb int) float32

//go:noescape
func dotQ4_KAVX2(w *byte, qs *int8, d *float32, bsums *int16, nb int) float32

//go:noescape
func dotQ5_KAVX2(w *byte, qs *int8, d *float32, bsums *int16, nb int) float32

//go:noescape
func dotQ6_KAVX2(w *byte, qs *int8, d *float32, nb int) float32

//go:noescape
func dotF32AVX2(w *byte, x *float32, n int) float32

//go:noescape
func dotF16AVX2(w *byte, x *uint16, n int) float32

// nan marks an internal length mismatch (the public API validates shapes
// first, so it is unreachable); assembly is never entered with bad lengths.
var nan = float32(math.NaN())

// q8Ok checks a row of nb blocks of bs bytes against a Q8_0/Q8_K activation
// with blocks of qk quants.
func q8Ok(w []byte, a *Activation, bs, qk int) (nb int, ok bool) {
	nb = a.cols / qk
	return nb, nb > 0 && len(w) == nb*bs && len(a.qs) >= nb*qk && len(a.d) >= nb
}

func avx2DotQ8_0(w []byte, a *Activation) float32 {
	nb, ok := q8Ok(w, a, 34, 32)
	if !ok {
		return nan
	}
	return dotQ8_0AVX2(&w[0], &a.qs[0], &a.d[0], nb)
}

// offsetKernel is the assembly dot of a 32-element format whose codes the
// kernel makes unsigned, subtracting the offset the activation's corr
// carries per 4-lane group (Q4_0, Q5_0, MXFP4). An activation prepared for
// another weight type has no (or another) corr: the reference serves it.
type offsetKernel struct {
	typ  quant.Type
	bs   int // block bytes
	asm  func(w *byte, qs *int8, d *float32, corr *int32, nb int) float32
	asm4 func(w *byte, rb int, qs *int8, d *float32, corr *int32, nb int, y *float32) // four rows at once, or nil
	ref  dotFunc
}

var (
	q40Kernel   = offsetKernel{quant.Q4_0, 18, dotQ4_0AVX2, nil, refDotQ4_0}
	q50Kernel   = offsetKernel{quant.Q5_0, 22, dotQ5_0AVX2, dotQ5_0x4AVX2, refDotQ5_0}
	mxfp4Kernel = offsetKernel{quant.MXFP4, 17, dotMXFP4AVX2, dotMXFP4x4AVX2, refDotMXFP4}
)

// prepared reports whether a carries the corr of k's format for nb blocks.
func (k *offsetKernel) prepared(a *Activation, nb int) bool {
	return len(a.corr) >= nb*8 && a.weight == k.typ
}

func (k *offsetKernel) dot(w []byte, a *Activation) float32 {
	nb, ok := q8Ok(w, a, k.bs, 32)
	switch {
	case !ok:
		return nan
	case !k.prepared(a, nb):
		return k.ref(w, a)
	}
	return k.asm(&w[0], &a.qs[0], &a.d[0], &a.corr[0], nb)
}

func (k *offsetKernel) rows(w []byte, rb int, a *Activation, y []float32) {
	nb, ok := q8Ok(w[:min(rb, len(w))], a, k.bs, 32)
	if !ok || !rowsOk(w, rb, y) {
		fillNaN(y)
		return
	}
	if !k.prepared(a, nb) {
		for i := range y {
			y[i] = k.ref(w[i*rb:(i+1)*rb], a)
		}
		return
	}
	i := 0
	if k.asm4 != nil {
		for ; i+4 <= len(y); i += 4 {
			k.asm4(&w[i*rb], rb, &a.qs[0], &a.d[0], &a.corr[0], nb, &y[i])
		}
	}
	for ; i < len(y); i++ {
		y[i] = k.asm(&w[i*rb], &a.qs[0], &a.d[0], &a.corr[0], nb)
	}
}

func avx2DotQ4_K(w []byte, a *Activation) float32 {
	nb, ok := q8Ok(w, a, 144, 256)
	if !ok || len(a.bsums) < nb*16 {
		return nan
	}
	return dotQ4_KAVX2(&w[0], &a.qs[0], &a.d[0], &a.bsums[0], nb)
}

func avx2DotQ5_K(w []byte, a *Activation) float32 {
	nb, ok := q8Ok(w, a, 176, 256)
	if !ok || len(a.bsums) < nb*16 {
		return nan
	}
	return dotQ5_KAVX2(&w[0], &a.qs[0], &a.d[0], &a.bsums[0], nb)
}

func avx2DotQ6_K(w []byte, a *Activation) float32 {
	nb, ok := q8Ok(w, a, 210, 256)
	if !ok {
		return nan
	}
	return dotQ6_KAVX2(&w[0], &a.qs[0], &a.d[0], nb)
}

func avx2DotF32(w []byte, a *Activation) float32 {
	n := a.cols
	if n <= 0 || len(w) != 4*n || len(a.f) < n {
		return nan
	}
	return dotF32AVX2(&w[0], &a.f[0], n)
}

func avx2DotF16(w []byte, a *Activation) float32 {
	n := a.cols
	if n <= 0 || len(w) != 2*n || len(a.h) < n {
		return nan
	}
	return dotF16AVX2(&w[0], &a.h[0], n)
}

// fillNaN marks outputs when an internal length check fails (unreachable
// through the public API).
func fillNaN(y []float32) {
	for i := range y {
		y[i] = nan
	}
}

func rowsOk(w []byte, rb int, y []float32) bool {
	return len(y) > 0 && rb > 0 && len(w) >= len(y)*rb
}

// q8RowsFunc is a Q8_0 rows kernel: four rows at a time through four, the
// rows left over through the single-row AVX2 dot.
func q8RowsFunc(four func(w *byte, rb int, qs *int8, d *float32, nb int, y *float32)) rowsFunc {
	return func(w []byte, rb int, a *Activation, y []float32) {
		nb, ok := q8Ok(w[:min(rb, len(w))], a, 34, 32)
		if !ok || !rowsOk(w, rb, y) {
			fillNaN(y)
			return
		}
		i := 0
		for ; i+4 <= len(y); i += 4 {
			four(&w[i*rb], rb, &a.qs[0], &a.d[0], nb, &y[i])
		}
		for ; i < len(y); i++ {
			y[i] = dotQ8_0AVX2(&w[i*rb], &a.qs[0], &a.d[0], nb)
		}
	}
}

var avx2RowsQ8_0 = q8RowsFunc(dotQ8_0x4AVX2)

func avx2RowsQ4_K(w []byte, rb int, a *Activation, y []float32) {
	nb, ok := q8Ok(w[:min(rb, len(w))], a, 144, 256)
	if !ok || !rowsOk(w, rb, y) || len(a.bsums) < nb*16 {
		fillNaN(y)
		return
	}
	for i := range y {
		y[i] = dotQ4_KAVX2(&w[i*rb], &a.qs[0], &a.d[0], &a.bsums[0], nb)
	}
}

func avx2RowsQ5_K(w []byte, rb int, a *Activation, y []float32) {
	nb, ok := q8Ok(w[:min(rb, len(w))], a, 176, 256)
	if !ok || !rowsOk(w, rb, y) || len(a.bsums) < nb*16 {
		fillNaN(y)
		return
	}
	for i := range y {
		y[i] = dotQ5_KAVX2(&w[i*rb], &a.qs[0], &a.d[0], &a.bsums[0], nb)
	}
}

func avx2RowsQ6_K(w []byte, rb int, a *Activation, y []float32) {
	nb, ok := q8Ok(w[:min(rb, len(w))], a, 210, 256)
	if !ok || !rowsOk(w, rb, y) {
		fillNaN(y)
		return
	}
	for i := range y {
		y[i] = dotQ6_KAVX2(&w[i*rb], &a.qs[0], &a.d[0], nb)
	}
}

func avx2RowsF32(w []byte, rb int, a *Activation, y []float32) {
	n := a.cols
	if n <= 0 || rb != 4*n || len(a.f) < n || !rowsOk(w, rb, y) {
		fillNaN(y)
		return
	}
	for i := range y {
		y[i] = dotF32AVX2(&w[i*rb], &a.f[0], n)
	}
}

func avx2RowsF16(w []byte, rb int, a *Activation, y []float32) {
	n := a.cols
	if n <= 0 || rb != 2*n || len(a.h) < n || !rowsOk(w, rb, y) {
		fillNaN(y)
		return
	}
	for i := range y {
		y[i] = dotF16AVX2(&w[i*rb], &a.h[0], n)
	}
}

// installAVX2 swaps the assembly kernels into m.
func installAVX2(m *implementation) {
	for t, f := range map[quant.Type]dotFunc{
		quant.Q8_0:  avx2DotQ8_0,
		quant.MXFP4: mxfp4Kernel.dot,
		quant.Q4_0:  q40Kernel.dot,
		quant.Q5_0:  q50Kernel.dot,
		quant.Q4_K:  avx2DotQ4_K,
		quant.Q5_K:  avx2DotQ5_K,
		quant.Q6_K:  avx2DotQ6_K,
		quant.F32:   avx2DotF32,
		quant.F16:   avx2DotF16,
	} {
		m.dots[t] = f
		m.native[t] = true
	}
	m.rows[quant.Q8_0] = avx2RowsQ8_0
	m.rows[quant.MXFP4] = mxfp4Kernel.rows
	m.rows[quant.Q4_0] = q40Kernel.rows
	m.rows[quant.Q5_0] = q50Kernel.rows
	m.rows[quant.Q4_K] = avx2RowsQ4_K
	m.rows[quant.Q5_K] = avx2RowsQ5_K
	m.rows[quant.Q6_K] = avx2RowsQ6_K
	m.rows[quant.F32] = avx2RowsF32
	m.rows[quant.F16] = avx2RowsF16
}
