//go:build amd64 && !purego

package kernels

import (
	"math"
	"unsafe"

	"github.com/pipe-engine/pipe/quant"
)

// AVX2 multi-token kernels for float rows (gemmf_amd64.s): F32 and F16
// rows against 3 tokens (4 accumulators per token fill 12 of the 16 YMM
// registers), a last pair padded to 3. Their activations are packed as
// float32 (F16 ones converted exactly), token after token.

const gemmTileF = 3

//go:noescape
func gemmF32x3AVX2(w *byte, rb, rows, n int, pk *float32, y *float32, ys int)

//go:noescape
func gemmF16x3AVX2(w *byte, rb, rows, n int, pk *float32, y *float32, ys int)

func floatGEMMs() map[quant.Type]*gemmKernel {
	return map[quant.Type]*gemmKernel{
		quant.F32: {tile: gemmTileF, pack: packFloat, packBytes: floatPackBytes, run: avx2GEMMF32, minFill: 2},
		quant.F16: {tile: gemmTileF, pack: packFloat, packBytes: floatPackBytes, run: avx2GEMMF16, minFill: 2},
	}
}

func floatPackBytes(cols int) int { return gemmTileF * 4 * cols }

// packFloat writes the tile's activations as float32, token after token.
func packFloat(acts []*Activation, dst []byte) {
	n := acts[0].cols
	tab := f16Table()
	for t, a := range acts {
		d := dst[4*n*t : 4*n*(t+1)]
		if a.typ == quant.F32 {
			copy(d, unsafe.Slice((*byte)(unsafe.Pointer(&a.f[0])), 4*n))
			continue
		}
		for i, h := range a.h[:n] {
			*(*uint32)(unsafe.Pointer(&d[4*i])) = math.Float32bits(tab[h])
		}
	}
}

// floatOk checks one call: tile activations of n columns packed in pk,
// rows of eb-byte elements, outputs at stride ys.
func floatOk(w []byte, rb, rows int, acts []*Activation, pk []byte, y []float32, ys, eb int) bool {
	n := acts[0].cols
	return len(acts) == gemmTileF && n > 0 && rows > 0 && rb >= eb*n && len(w) >= (rows-1)*rb+eb*n &&
		len(pk) >= floatPackBytes(n) && ys >= rows && len(y) >= (gemmTileF-1)*ys+rows
}

func avx2GEMMF32(w []byte, rb, rows int, acts []*Activation, pk []byte, y []float32, ys int) {
	if !floatOk(w, rb, rows, acts, pk, y, ys, 4) {
		fillNaN(y[:min(len(y), rows)])
		return
	}
	gemmF32x3AVX2(&w[0], rb, rows, acts[0].cols, (*float32)(unsafe.Pointer(&pk[0])), &y[0], 4*ys)
}

func avx2GEMMF16(w []byte, rb, rows int, acts []*Activation, pk []byte, y []float32, ys int) {
	if !floatOk(w, rb, rows, acts, pk, y, ys, 2) {
		fillNaN(y[:min(len(y), rows)])
		return
	}
	gemmF16x3AVX2(&w[0], rb, rows, acts[0].cols, (*float32)(unsafe.Pointer(&pk[0])), &y[0], 4*ys)
}
