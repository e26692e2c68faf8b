//go:build arm64 && !purego

package kernels

import (
	"math"

	"github.com/pipe-engine/pipe/quant"
)

// blockKernel is the shape of every quantized-row assembly routine: one row
// of nb blocks at w against nb activation blocks (quants qs, scales d and,
// for Q8_K, bsums; routines that do not need bsums ignore it).
type blockKernel func(w *byte, qs *int8, d *float32, bsums *int16, nb int) float32

// blockFormat describes a weight format for the length checks: bs bytes
// per block of qk elements; bsums when the routine reads the Q8_K sums.
type blockFormat struct {
	bs, qk int
	bsums  bool
}

var (
	fmtQ8_0  = blockFormat{34, 32, false}
	fmtQ4_K  = blockFormat{144, 256, true}
	fmtQ5_K  = blockFormat{176, 256, true}
	fmtQ6_K  = blockFormat{210, 256, false}
	fmtMXFP4 = blockFormat{17, 32, false}
	fmtQ4_0  = blockFormat{18, 32, false}
	fmtQ5_0  = blockFormat{22, 32, false}
)

// blocks checks one row against a and returns its block count (0 when the
// lengths do not fit: the public API validates shapes first, so that is
// unreachable; assembly is never entered with bad lengths).
func (f blockFormat) blocks(row []byte, a *Activation) int {
	nb := a.cols / f.qk
	if nb <= 0 || len(row) != nb*f.bs || len(a.qs) < nb*f.qk || len(a.d) < nb ||
		(f.bsums && len(a.bsums) < nb*16) {
		return 0
	}
	return nb
}

// bsumsPtr is a's Q8_K sums for routines that read them, nil otherwise.
func (f blockFormat) bsumsPtr(a *Activation) *int16 {
	if !f.bsums {
		return nil
	}
	return &a.bsums[0]
}

var nan = float32(math.NaN())

// kvaluesMXFP4 is package quant's MXFP4 code table where the assembly can
// load it (·kvaluesMXFP4(SB)).
var kvaluesMXFP4 = quant.KValuesMXFP4

// q5Lanes are the Q5_0 kernels' tables (·q5Lanes(SB), 64 bytes, loaded
// into V22-V25): the VTBL indexes spreading qh bytes 0-1 and 2-3 over 8
// lanes each, 16 × 16 (a set bit's value and the codes' offset), and each
// lane's bit (1 << lane%8).
var q5Lanes = [64]byte{
	0, 0, 0, 0, 0, 0, 0, 0, 1, 1, 1, 1, 1, 1, 1, 1,
	2, 2, 2, 2, 2, 2, 2, 2, 3, 3, 3, 3, 3, 3, 3, 3,
	16, 16, 16, 16, 16, 16, 16, 16, 16, 16, 16, 16, 16, 16, 16, 16,
	1, 2, 4, 8, 16, 32, 64, 128, 1, 2, 4, 8, 16, 32, 64, 128,
}

// e8m0HalfTable[e] = e8m0Half(e): the MXFP4 block scales, read by the
// assembly.
var e8m0HalfTable [256]float32

func init() {
	for e := range e8m0HalfTable {
		e8m0HalfTable[e] = e8m0Half(uint8(e))
	}
}

func (k blockKernel) dot(f blockFormat) dotFunc {
	return func(w []byte, a *Activation) float32 {
		nb := f.blocks(w, a)
		if nb == 0 {
			return nan
		}
		return k(&w[0], &a.qs[0], &a.d[0], f.bsumsPtr(a), nb)
	}
}

func (k blockKernel) rows(f blockFormat) rowsFunc {
	return func(w []byte, rb int, a *Activation, y []float32) {
		if len(y) == 0 || rb <= 0 || len(w) < len(y)*rb || f.blocks(w[:rb], a) == 0 {
			fillNaN(y)
			return
		}
		nb, bs := f.blocks(w[:rb], a), f.bsumsPtr(a)
		for i := range y {
			y[i] = k(&w[i*rb], &a.qs[0], &a.d[0], bs, nb)
		}
	}
}

// fillNaN marks outputs when an internal length check fails (unreachable
// through the public API).
func fillNaN(y []float32) {
	for i := range y {
		y[i] = nan
	}
}

// neonKernel is one assembly routine with its format.
type neonKernel struct {
	k blockKernel
	f blockFormat
}

// The two kernel sets differ only in how they form the 4-element integer
// lanes: SDOT (ARMv8.2 dot product) or SMULL/ADDP/SADDLP (plain NEON).
var (
	sdotSet = map[quant.Type]neonKernel{
		quant.Q8_0:  {dotQ8_0SDOT, fmtQ8_0},
		quant.Q4_K:  {dotQ4_KSDOT, fmtQ4_K},
		quant.Q5_K:  {dotQ5_KSDOT, fmtQ5_K},
		quant.Q6_K:  {dotQ6_KSDOT, fmtQ6_K},
		quant.MXFP4: {dotMXFP4SDOT, fmtMXFP4},
		quant.Q4_0:  {dotQ4_0SDOT, fmtQ4_0},
		quant.Q5_0:  {dotQ5_0SDOT, fmtQ5_0},
	}
	plainSet = map[quant.Type]neonKernel{
		quant.Q8_0:  {dotQ8_0NEON, fmtQ8_0},
		quant.Q4_K:  {dotQ4_KNEON, fmtQ4_K},
		quant.Q5_K:  {dotQ5_KNEON, fmtQ5_K},
		quant.Q6_K:  {dotQ6_KNEON, fmtQ6_K},
		quant.MXFP4: {dotMXFP4NEON, fmtMXFP4},
		quant.Q4_0:  {dotQ4_0NEON, fmtQ4_0},
		quant.Q5_0:  {dotQ5_0NEON, fmtQ5_0},
	}
)

// installNEON swaps the kernels of set and the float kernels into m.
func installNEON(m *implementation, set map[quant.Type]neonKernel) {
	for t, k := range set {
		m.dots[t], m.rows[t], m.native[t] = k.k.dot(k.f), k.k.rows(k.f), true
	}
	m.dots[quant.F32], m.rows[quant.F32] = floatDot(dotF32NEON, 4, actF32), floatRows(dotF32NEON, 4, actF32)
	m.dots[quant.F16], m.rows[quant.F16] = floatDot(dotF16NEON, 2, actF16), floatRows(dotF16NEON, 2, actF16)
	m.native[quant.F32], m.native[quant.F16] = true, true
}

// floatKernel is the shape of the F32 (x *float32) and F16 (x *uint16)
// routines (dotf_arm64.s).
type floatKernel[T float32 | uint16] func(w *byte, x *T, n int) float32

// floatDot and floatRows wrap a float-row routine; es is the weight element
// size and act picks the activation's vector.
func floatDot[T float32 | uint16](k floatKernel[T], es int, act func(*Activation) []T) dotFunc {
	return func(w []byte, a *Activation) float32 {
		x, n := act(a), a.cols
		if n <= 0 || len(w) != es*n || len(x) < n {
			return nan
		}
		return k(&w[0], &x[0], n)
	}
}

func floatRows[T float32 | uint16](k floatKernel[T], es int, act func(*Activation) []T) rowsFunc {
	return func(w []byte, rb int, a *Activation, y []float32) {
		x, n := act(a), a.cols
		if n <= 0 || rb != es*n || len(x) < n || len(y) == 0 || len(w) < len(y)*rb {
			fillNaN(y)
			return
		}
		for i := range y {
			y[i] = k(&w[i*rb], &x[0], n)
		}
	}
}

func actF32(a *Activation) []float32 { return a.f }
func actF16(a *Activation) []uint16  { return a.h }

// The assembly routines (dot_arm64.s, dotf_arm64.s).

//go:noescape
func dotQ8_0SDOT(w *byte, qs *int8, d *float32, bsums *int16, nb int) float32

//go:noescape
func dotQ8_0NEON(w *byte, qs *int8, d *float32, bsums *int16, nb int) float32

//go:noescape
func dotQ4_KSDOT(w *byte, qs *int8, d *float32, bsums *int16, nb int) float32

//go:noescape
func dotQ4_KNEON(w *byte, qs *int8, d *float32, bsums *int16, nb int) float32

//go:noescape
func dotQ5_KSDOT(w *byte, qs *int8, d *float32, bsums *int16, nb int) float32

//go:noescape
func dotQ5_KNEON(w *byte, qs *int8, d *float32, bsums *int16, nb int) float32

//go:noescape
func dotQ6_KSDOT(w *byte, qs *int8, d *float32, bsums *int16, nb int) float32

//go:noescape
func dotQ6_KNEON(w *byte, qs *int8, d *float32, bsums *int16, nb int) float32

//go:noescape
func dotMXFP4SDOT(w *byte, qs *int8, d *float32, bsums *int16, nb int) float32

//go:noescape
func dotMXFP4NEON(w *byte, qs *int8, d *float32, bsums *int16, nb int) float32

//go:noescape
func dotQ4_0SDOT(w *byte, qs *int8, d *float32, bsums *int16, nb int) float32

//go:noescape
func dotQ4_0NEON(w *byte, qs *int8, d *float32, bsums *int16, nb int) float32

//go:noescape
func dotQ5_0SDOT(w *byte, qs *int8, d *float32, bsums *int16, nb int) float32

//go:noescape
func dotQ5_0NEON(w *byte, qs *int8, d *float32, bsums *int16, nb int) float32

//go:noescape
func dotF32NEON(w *byte, x *float32, n int) float32

//go:noescape
func dotF16NEON(w *byte, x *uint16, n int) float32
