package kernels

import (
	"encoding/binary"
	"math"

	"github.com/pipe-engine/pipe/quant"
)

// Pure-Go multi-token kernels: each weight block is decoded once into
// integer codes and scales, then dotted with every token of the tile using
// the reference's lane sums (lanes32, lanes256) and float order, so every
// (row, token) equals the reference dot product bit for bit. They serve
// machines without assembly kernels and the purego build.

// refGEMMTile is the pure-Go kernels' tile: tokens per decoded block.
const refGEMMTile = 4

func refGEMMs() map[quant.Type]*gemmKernel {
	return map[quant.Type]*gemmKernel{
		quant.Q8_0:  {tile: refGEMMTile, run: refGEMMQ8_0},
		quant.Q4_0:  {tile: refGEMMTile, run: refGEMMQ4_0},
		quant.MXFP4: {tile: refGEMMTile, run: refGEMMMXFP4},
		quant.Q4_K:  {tile: refGEMMTile, run: refGEMMQ4_K},
		quant.Q6_K:  {tile: refGEMMTile, run: refGEMMQ6_K},
		quant.F32:   {tile: refGEMMTile, run: refGEMMF32},
		quant.F16:   {tile: refGEMMTile, run: refGEMMF16},
	}
}

// gemmFloat runs float rows against the tokens' activations xs (float32,
// cols each): at(row, e) is weight element e. Each 32-element chunk of a
// row is decoded once and dotted with every token in the vector kernel's
// order (refDotF32: four 8-lane accumulators, a sequential tail,
// combine4x8).
func gemmFloat(w []byte, rb, rows int, xs [][]float32, y []float32, ys int, at func(row []byte, e int) float32) {
	n := len(xs[0])
	var acc [refGEMMTile][4][8]float32
	var tail [refGEMMTile]float32
	var wc [32]float32
	for r := 0; r < rows; r++ {
		row := w[r*rb:]
		acc, tail = [refGEMMTile][4][8]float32{}, [refGEMMTile]float32{}
		i := 0
		for ; i+32 <= n; i += 32 {
			for e := range wc {
				wc[e] = at(row, i+e)
			}
			for t, x := range xs {
				xt := x[i : i+32]
				for k := 0; k < 4; k++ {
					for l := 0; l < 8; l++ {
						acc[t][k][l] = float32(acc[t][k][l] + float32(wc[8*k+l]*xt[8*k+l]))
					}
				}
			}
		}
		for ; i < n; i++ {
			wv := at(row, i)
			for t, x := range xs {
				tail[t] = float32(tail[t] + float32(wv*x[i]))
			}
		}
		for t := range xs {
			y[t*ys+r] = combine4x8(&acc[t], tail[t])
		}
	}
}

func refGEMMF32(w []byte, rb, rows int, acts []*Activation, _ []byte, y []float32, ys int) {
	xs := make([][]float32, len(acts))
	for t, a := range acts {
		xs[t] = a.f[:a.cols]
	}
	gemmFloat(w, rb, rows, xs, y, ys, func(row []byte, e int) float32 {
		return math.Float32frombits(binary.LittleEndian.Uint32(row[4*e:]))
	})
}

func refGEMMF16(w []byte, rb, rows int, acts []*Activation, _ []byte, y []float32, ys int) {
	tab := f16Table()
	xs := make([][]float32, len(acts))
	for t, a := range acts {
		xs[t] = make([]float32, a.cols)
		for i, h := range a.h[:a.cols] {
			xs[t][i] = tab[h] // exact
		}
	}
	gemmFloat(w, rb, rows, xs, y, ys, func(row []byte, e int) float32 {
		return tab[binary.LittleEndian.Uint16(row[2*e:])]
	})
}

// gemm32 runs a 32-element block format: decode(blk, q) fills the block's
// codes (lane l = elements 4l..4l+3) and returns its float32 scale.
func gemm32(w []byte, rb, rows, bs int, acts []*Activation, y []float32, ys int, decode func(blk []byte, q *[32]int8) float32) {
	var acc [refGEMMTile][8]float32
	var q [32]int8
	nb := acts[0].cols / 32
	for r := 0; r < rows; r++ {
		row := w[r*rb : r*rb+nb*bs]
		acc = [refGEMMTile][8]float32{}
		for b := 0; b < nb; b++ {
			dw := decode(row[b*bs:(b+1)*bs], &q)
			for t, a := range acts {
				L := lanes32(&q, a.qs[b*32:])
				accLanes(&acc[t], float32(dw*a.d[b]), &L)
			}
		}
		for t := range acts {
			y[t*ys+r] = hsum8(&acc[t])
		}
	}
}

func refGEMMQ8_0(w []byte, rb, rows int, acts []*Activation, _ []byte, y []float32, ys int) {
	gemm32(w, rb, rows, 34, acts, y, ys, func(blk []byte, q *[32]int8) float32 {
		for i := range q {
			q[i] = int8(blk[2+i])
		}
		return f16at(blk, 0)
	})
}

func refGEMMQ4_0(w []byte, rb, rows int, acts []*Activation, _ []byte, y []float32, ys int) {
	gemm32(w, rb, rows, 18, acts, y, ys, func(blk []byte, q *[32]int8) float32 {
		for j := 0; j < 16; j++ {
			q[j] = int8(blk[2+j]&0xf) - 8
			q[j+16] = int8(blk[2+j]>>4) - 8
		}
		return f16at(blk, 0)
	})
}

func refGEMMMXFP4(w []byte, rb, rows int, acts []*Activation, _ []byte, y []float32, ys int) {
	gemm32(w, rb, rows, 17, acts, y, ys, func(blk []byte, q *[32]int8) float32 {
		for j := 0; j < 16; j++ {
			q[j] = quant.KValuesMXFP4[blk[1+j]&0xf]
			q[j+16] = quant.KValuesMXFP4[blk[1+j]>>4]
		}
		return e8m0Half(blk[0])
	})
}

func refGEMMQ4_K(w []byte, rb, rows int, acts []*Activation, _ []byte, y []float32, ys int) {
	var acc [refGEMMTile][8]float32
	var macc [refGEMMTile][4]float32
	var q [256]int8
	var sc [16]int32
	nb := acts[0].cols / 256
	for r := 0; r < rows; r++ {
		row := w[r*rb : r*rb+nb*144]
		acc, macc = [refGEMMTile][8]float32{}, [refGEMMTile][4]float32{}
		for b := 0; b < nb; b++ {
			blk := (*[144]byte)(row[b*144:])
			scs, mns := unpackScaleMinK4(blk[4:16])
			for i, s := range scs {
				sc[2*i], sc[2*i+1] = int32(s), int32(s)
			}
			for j := 0; j < 4; j++ {
				for l := 0; l < 32; l++ {
					q[64*j+l] = int8(blk[16+32*j+l] & 0xf)
					q[64*j+32+l] = int8(blk[16+32*j+l] >> 4)
				}
			}
			dw, dmw := f16at(blk[:], 0), f16at(blk[:], 2)
			for t, a := range acts {
				L := lanes256(&q, &sc, a.qs[b*256:])
				accLanes(&acc[t], float32(dw*a.d[b]), &L)
				M := minLanesK4(&mns, a.bsums[b*16:])
				dmin := float32(dmw * a.d[b])
				for k := range macc[t] {
					macc[t][k] = float32(macc[t][k] + float32(dmin*float32(M[k])))
				}
			}
		}
		for t := range acts {
			y[t*ys+r] = float32(hsum8(&acc[t]) - hsum4(&macc[t]))
		}
	}
}

func refGEMMQ6_K(w []byte, rb, rows int, acts []*Activation, _ []byte, y []float32, ys int) {
	var acc [refGEMMTile][8]float32
	var q [256]int8
	var sc [16]int32
	nb := acts[0].cols / 256
	for r := 0; r < rows; r++ {
		row := w[r*rb : r*rb+nb*210]
		acc = [refGEMMTile][8]float32{}
		for b := 0; b < nb; b++ {
			blk := (*[210]byte)(row[b*210:])
			for i := range sc {
				sc[i] = int32(int8(blk[192+i]))
			}
			for n := 0; n < 2; n++ {
				ql, qh := blk[64*n:], blk[128+32*n:]
				for i := 0; i < 32; i++ {
					e := 128 * n
					q[e+i] = int8(ql[i]&0xf|(qh[i]&3)<<4) - 32
					q[e+32+i] = int8(ql[32+i]&0xf|(qh[i]>>2&3)<<4) - 32
					q[e+64+i] = int8(ql[i]>>4|(qh[i]>>4&3)<<4) - 32
					q[e+96+i] = int8(ql[32+i]>>4|(qh[i]>>6&3)<<4) - 32
				}
			}
			dw := f16at(blk[:], 208)
			for t, a := range acts {
				L := lanes256(&q, &sc, a.qs[b*256:])
				accLanes(&acc[t], float32(dw*a.d[b]), &L)
			}
		}
		for t := range acts {
			y[t*ys+r] = hsum8(&acc[t])
		}
	}
}
