//go:build arm64 && !purego

package kernels

import "github.com/pipe-engine/pipe/quant"

// NEON multi-token kernels (gemm_arm64.s): Q4_K and Q6_K rows against up
// to neonGEMMTile tokens per call, each weight block unpacked once for all
// of them, in both kernel sets (SDOT and plain NEON lanes).

// neonGEMMTile is the most tokens one call takes: their activations (256
// quants per block each) stay in L1 while a row's blocks pass.
const neonGEMMTile = 8

// neonTok is one token's activation as the assembly reads it.
type neonTok struct {
	qs    *int8
	d     *float32
	bsums *int16
}

// gemmNEONKernel names one multi-token routine. The routines are called
// directly by name (neonGEMMCall), not through a func value, so that the
// per-call token and accumulator arrays stay on the stack (//go:noescape
// does not reach through an indirect call).
type gemmNEONKernel uint8

const (
	q4KSDOT gemmNEONKernel = iota
	q4KNEON
	q6KSDOT
	q6KNEON
)

// neonGEMMCall runs routine k: rows rows of nb blocks at w (rb bytes
// apart) against ntok tokens, y[t*ys+r]; acc is scratch of 12 floats per
// token.
func neonGEMMCall(k gemmNEONKernel, w *byte, rb, rows, nb int, toks *neonTok, ntok int, y *float32, ys int, acc *float32) {
	switch k {
	case q4KSDOT:
		gemmQ4_KSDOT(w, rb, rows, nb, toks, ntok, y, ys, acc)
	case q4KNEON:
		gemmQ4_KNEON(w, rb, rows, nb, toks, ntok, y, ys, acc)
	case q6KSDOT:
		gemmQ6_KSDOT(w, rb, rows, nb, toks, ntok, y, ys, acc)
	case q6KNEON:
		gemmQ6_KNEON(w, rb, rows, nb, toks, ntok, y, ys, acc)
	}
}

//go:noescape
func gemmQ4_KSDOT(w *byte, rb, rows, nb int, toks *neonTok, ntok int, y *float32, ys int, acc *float32)

//go:noescape
func gemmQ4_KNEON(w *byte, rb, rows, nb int, toks *neonTok, ntok int, y *float32, ys int, acc *float32)

//go:noescape
func gemmQ6_KSDOT(w *byte, rb, rows, nb int, toks *neonTok, ntok int, y *float32, ys int, acc *float32)

//go:noescape
func gemmQ6_KNEON(w *byte, rb, rows, nb int, toks *neonTok, ntok int, y *float32, ys int, acc *float32)

// neonGEMMSet is one kernel set's multi-token routines.
type neonGEMMSet struct{ q4k, q6k gemmNEONKernel }

var (
	sdotGEMMs  = neonGEMMSet{q4KSDOT, q6KSDOT}
	plainGEMMs = neonGEMMSet{q4KNEON, q6KNEON}
)

// neonGEMMs is a set's multi-token kernels: Q4_K and Q6_K against 8
// tokens, then one call of the same routine for the 2-7 left (a tile of
// each width; a single token runs the vector kernel).
func neonGEMMs(set neonGEMMSet) map[quant.Type]*gemmKernel {
	return map[quant.Type]*gemmKernel{
		quant.Q4_K: neonChain(set.q4k, fmtQ4_K),
		quant.Q6_K: neonChain(set.q6k, fmtQ6_K),
	}
}

func neonChain(k gemmNEONKernel, f blockFormat) *gemmKernel {
	var next *gemmKernel
	for tile := 2; tile <= neonGEMMTile; tile++ {
		next = &gemmKernel{tile: tile, run: neonGEMMRun(k, f), next: next}
	}
	return next
}

// neonGEMMRun checks a call's buffers and runs k over its tokens.
func neonGEMMRun(k gemmNEONKernel, f blockFormat) gemmRun {
	return func(w []byte, rb, rows int, acts []*Activation, _ []byte, y []float32, ys int) {
		n := len(acts)
		if n == 0 || n > neonGEMMTile || rows <= 0 || ys < rows || len(y) < (n-1)*ys+rows {
			fillNaN(y[:min(len(y), rows)])
			return
		}
		nb := acts[0].cols / f.qk
		if nb <= 0 || rb < nb*f.bs || len(w) < (rows-1)*rb+nb*f.bs {
			fillNaN(y[:rows])
			return
		}
		var toks [neonGEMMTile]neonTok
		for t, a := range acts {
			if f.blocks(w[:nb*f.bs], a) != nb {
				fillNaN(y[:rows])
				return
			}
			toks[t] = neonTok{&a.qs[0], &a.d[0], f.bsumsPtr(a)}
		}
		var acc [neonGEMMTile * 12]float32
		neonGEMMCall(k, &w[0], rb, rows, nb, &toks[0], n, &y[0], ys, &acc[0])
	}
}

func init() {
	if hasDotProd {
		nativeGEMMSets = append(nativeGEMMSets, gemmSet{"sdot", neonGEMMs(sdotGEMMs)})
	}
	nativeGEMMSets = append(nativeGEMMSets, gemmSet{"neon", neonGEMMs(plainGEMMs)})
}
