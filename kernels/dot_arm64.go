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
	fmtQ8_0 = blockFormat{34, 32, false}
	fmtQ4_K = blockFormat{144, 256, true}
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
		quant.Q8_0: {dotQ8_0SDOT, fmtQ8_0},
		quant.Q4_K: {dotQ4_KSDOT, fmtQ4_K},
	}
	plainSet = map[quant.Type]neonKernel{
		quant.Q8_0: {dotQ8_0NEON, fmtQ8_0},
		quant.Q4_K: {dotQ4_KNEON, fmtQ4_K},
	}
)

// installNEON swaps the kernels of set into m.
func installNEON(m *implementation, set map[quant.Type]neonKernel) {
	for t, k := range set {
		m.dots[t], m.rows[t], m.native[t] = k.k.dot(k.f), k.k.rows(k.f), true
	}
}

// The assembly routines (dot_arm64.s).

//go:noescape
func dotQ8_0SDOT(w *byte, qs *int8, d *float32, bsums *int16, nb int) float32

//go:noescape
func dotQ8_0NEON(w *byte, qs *int8, d *float32, bsums *int16, nb int) float32

//go:noescape
func dotQ4_KSDOT(w *byte, qs *int8, d *float32, bsums *int16, nb int) float32

//go:noescape
func dotQ4_KNEON(w *byte, qs *int8, d *float32, bsums *int16, nb int) float32
