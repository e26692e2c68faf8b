//go:build amd64 && !purego

package kernels

import (
	"encoding/binary"
	"math"

	"github.com/pipe-engine/pipe/quant"
	"golang.org/x/sys/cpu"
)

// AVX-512 Q4_K, Q6_K, MXFP4 and Q8_0 multi-token kernels (gemm_amd64.s): 8 tokens (4
// pairs) per call, and 2 tokens (one pair) for the tokens left after whole
// tiles of 8 (the VNNI Q4_K and Q6_K sets also 4 tokens, two pairs). Used where AVX-512 F/BW exist (the VNNI variants where
// AVX-512 VNNI does): they measured faster than the AVX2 4-token kernels
// (BenchmarkGEMM).

// gemmK4Shuf512[k]: VPSHUFB control broadcasting int16 lane k of each
// 128-bit lane to all its lanes (gemmK4Shuf for 512-bit registers).
var gemmK4Shuf512 [8][64]byte

// MXFP4 pair kernel tables: the signed E2M1 code values in every 128-bit
// lane, VPSRLVD counts putting the high nibbles in each 256-bit half's
// upper lane, VPERMPS indices spreading tokens 2p and 2p+1 over pair p's
// halves, and the E8M0 half-scales.
var (
	gemmMXKv    [16]int8
	gemmMXShift = [16]uint32{0, 0, 0, 0, 4, 4, 4, 4, 0, 0, 0, 0, 4, 4, 4, 4}
	gemmMXIdx   [4][16]uint32
	gemmE8M0    [256]float32
)

func init() {
	gemmMXKv = quant.KValuesMXFP4
	for p := range gemmMXIdx {
		for i := 0; i < 16; i++ {
			gemmMXIdx[p][i] = uint32(2*p + i/8)
		}
	}
	for e := range gemmE8M0 {
		gemmE8M0[e] = e8m0Half(uint8(e))
	}
	for k := range gemmK4Shuf512 {
		for i := 0; i < 32; i++ {
			gemmK4Shuf512[k][2*i] = byte(2 * k)
			gemmK4Shuf512[k][2*i+1] = byte(2*k + 1)
		}
	}
}

//go:noescape
func gemmQ4_KAVX512x8(w *byte, rb, rows, nb int, pk *byte, y *float32, ys int)

//go:noescape
func gemmQ6_KAVX512x8(w *byte, rb, rows, nb int, pk *byte, y *float32, ys int)

//go:noescape
func gemmQ6_KAVX512x2(w *byte, rb, rows, nb int, pk *byte, y *float32, ys int)

//go:noescape
func gemmQ4_KVNNIx8(w *byte, rb, rows, nb int, pk *byte, y *float32, ys int)

//go:noescape
func gemmQ4_KVNNIx4(w *byte, rb, rows, nb int, pk *byte, y *float32, ys int)

//go:noescape
func gemmQ6_KVNNIx4(w *byte, rb, rows, nb int, pk *byte, y *float32, ys int)

//go:noescape
func gemmQ4_KVNNIx2(w *byte, rb, rows, nb int, pk *byte, y *float32, ys int)

//go:noescape
func gemmQ6_KVNNIx8(w *byte, rb, rows, nb int, pk *byte, y *float32, ys int)

//go:noescape
func gemmQ6_KVNNIx2(w *byte, rb, rows, nb int, pk *byte, y *float32, ys int)

//go:noescape
func gemmMXFP4AVX512x8(w *byte, rb, rows, nb int, pk *byte, y *float32, ys int)

//go:noescape
func gemmMXFP4AVX512x2(w *byte, rb, rows, nb int, pk *byte, y *float32, ys int)

//go:noescape
func gemmQ8_0AVX512x8(w *byte, rb, rows, nb int, pk *byte, y *float32, ys int)

//go:noescape
func gemmQ8_0AVX512x2(w *byte, rb, rows, nb int, pk *byte, y *float32, ys int)

//go:noescape
func gemmQ4_KAVX512x2(w *byte, rb, rows, nb int, pk *byte, y *float32, ys int)

// q4KPairsLayout is the packed tile of T tokens per 256-element block (see
// gemm_amd64.s): offsets of DM, PS and Q, and the block stride.
func q4KPairsLayout(T int) (dm, ps, q, stride int) {
	p, g := T/2, (T+3)/4
	dm = 64 * p
	ps = dm + 64*g
	q = ps + 64*g
	return dm, ps, q, q + 512*p
}

func q4KPairsBytes(T int) func(cols int) int {
	return func(cols int) int {
		_, _, _, s := q4KPairsLayout(T)
		return cols / 256 * s
	}
}

// packQ4_KPairs packs len(acts) (8 or 2) Q8_K activations for the pair
// kernels.
func packQ4_KPairs(acts []*Activation, dst []byte) { packK4Tile(acts, dst, putPairQuants) }

// packQ4_KLanes packs 8 Q8_K activations for gemmQ4_KAVX2x8: the pair
// tile's DV, DM and PS, then per token t and chunk j 64 quant bytes at
// 512+256t+64j, in the order of that kernel's weight registers (X, Y =
// sub-blocks 2j, 2j+1): dword l of the first 32 holds X's elements 4l, 4l+1
// then Y's 4l, 4l+1; of the second 32, X's 4l+2, 4l+3 then Y's 4l+2, 4l+3.
func packQ4_KLanes(acts []*Activation, dst []byte) { packK4Tile(acts, dst, putLaneQuants) }

func putPairQuants(blk []byte, q, t int, qs []byte) {
	p, h := t/2, t%2
	for j := 0; j < 4; j++ {
		o := q + 512*p + 128*j + 32*h
		copy(blk[o:o+32], qs[64*j:64*j+32])
		copy(blk[o+64:o+96], qs[64*j+32:64*j+64])
	}
}

func putLaneQuants(blk []byte, q, t int, qs []byte) {
	for j := 0; j < 4; j++ {
		o := blk[q+256*t+64*j:]
		x, y := qs[64*j:64*j+32], qs[64*j+32:64*j+64]
		for l := 0; l < 8; l++ {
			copy(o[4*l:4*l+2], x[4*l:4*l+2])
			copy(o[4*l+2:4*l+4], y[4*l:4*l+2])
			copy(o[32+4*l:32+4*l+2], x[4*l+2:4*l+4])
			copy(o[32+4*l+2:32+4*l+4], y[4*l+2:4*l+4])
		}
	}
}

// packK4Tile writes the Q4_K tile of len(acts) tokens (q4KPairsLayout),
// each token's quants placed by put.
func packK4Tile(acts []*Activation, dst []byte, put func(blk []byte, q, t int, qs []byte)) {
	T := len(acts)
	dm, ps, q, stride := q4KPairsLayout(T)
	nb := acts[0].cols / 256
	clear(dst[:nb*stride])
	for b := 0; b < nb; b++ {
		blk := dst[b*stride : (b+1)*stride]
		for t, a := range acts {
			p, h, g, i := t/2, t%2, t/4, t%4
			d := math.Float32bits(a.d[b])
			for e := 0; e < 8; e++ {
				binary.LittleEndian.PutUint32(blk[64*p+32*h+4*e:], d)
			}
			for e := 0; e < 4; e++ {
				binary.LittleEndian.PutUint32(blk[dm+64*g+16*i+4*e:], d)
			}
			bs := a.bsums[b*16 : b*16+16]
			for k := 0; k < 8; k++ {
				binary.LittleEndian.PutUint16(blk[ps+64*g+16*i+2*k:], uint16(bs[2*k]+bs[2*k+1]))
			}
			put(blk, q, t, int8Bytes(a.qs[b*256:b*256+256]))
		}
	}
}

// q6KPairsBytes: per 256-element block, 64 bytes of scales and 1024 of
// quants and corrections per pair.
func q6KPairsBytes(T int) func(cols int) int {
	return func(cols int) int { return cols / 256 * 1088 * (T / 2) }
}

// packQ6_KPairs packs len(acts) (8 or 2) Q8_K activations for the Q6_K
// pair kernels: scales, quants, and 32·(sum of each quant pair).
func packQ6_KPairs(acts []*Activation, dst []byte) {
	P := len(acts) / 2
	stride := 1088 * P
	nb := acts[0].cols / 256
	for b := 0; b < nb; b++ {
		blk := dst[b*stride : (b+1)*stride]
		for t, a := range acts {
			p, h := t/2, t%2
			d := math.Float32bits(a.d[b])
			for e := 0; e < 8; e++ {
				binary.LittleEndian.PutUint32(blk[64*p+32*h+4*e:], d)
			}
			qs := a.qs[b*256 : b*256+256]
			base := 64*P + 1024*p + 32*h
			for c := 0; c < 8; c++ {
				y := qs[32*c : 32*c+32]
				copy(blk[base+64*c:base+64*c+32], int8Bytes(y))
				for i := 0; i < 16; i++ {
					binary.LittleEndian.PutUint16(blk[base+512+64*c+2*i:], uint16(32*(int16(y[2*i])+int16(y[2*i+1]))))
				}
			}
		}
	}
}

// mxPairsBytes: per 32-element block, 8 scales and 64 bytes per pair.
func mxPairsBytes(T int) func(cols int) int {
	return func(cols int) int { return cols / 32 * (32 + 64*(T/2)) }
}

// packMXFP4Pairs packs len(acts) (8 or 2) Q8_0 activations for the MXFP4
// and Q8_0 pair kernels.
func packMXFP4Pairs(acts []*Activation, dst []byte) {
	P := len(acts) / 2
	stride := 32 + 64*P
	nb := acts[0].cols / 32
	clear(dst[:nb*stride])
	for b := 0; b < nb; b++ {
		blk := dst[b*stride : (b+1)*stride]
		for t, a := range acts {
			binary.LittleEndian.PutUint32(blk[4*t:], math.Float32bits(a.d[b]))
			o := 32 + 64*(t/2) + 32*(t%2)
			copy(blk[o:o+32], int8Bytes(a.qs[b*32:b*32+32]))
		}
	}
}

// pairKernel is a multi-token kernel on a pair tile (the AVX-512 ones and
// the AVX2 8-token Q4_K one). Its 384 bytes of scratch
// (the per-token sums it reduces) are its own stack frame: a scratch
// array passed in from Go escaped to the heap on every call, the kernel
// being called through a func value.
type pairKernel func(w *byte, rb, rows, nb int, pk *byte, y *float32, ys int)

// tileGEMM wraps a pair kernel of T tokens for rows of blocks of bs
// bytes.
func tileGEMM(T, bs, qk int, size func(cols int) int, kern pairKernel) gemmRun {
	return func(w []byte, rb, rows int, acts []*Activation, pk []byte, y []float32, ys int) {
		nb := acts[0].cols / qk
		if len(acts) != T || !gemmOk(w, rb, rows, nb, bs, pk, size(acts[0].cols), y, ys, T) {
			fillNaN(y[:min(len(y), rows)])
			return
		}
		kern(&w[0], rb, rows, nb, &pk[0], &y[0], 4*ys)
	}
}

// pairGEMM is the 8-token kernel (also for a last tile of 5–7 tokens,
// padded) with the 2-token one for the remainder.
func pairGEMM(bs, qk int, size func(T int) func(cols int) int, pack func([]*Activation, []byte), k8, k2 pairKernel) *gemmKernel {
	two := &gemmKernel{tile: 2, pack: pack, packBytes: size(2), run: tileGEMM(2, bs, qk, size(2), k2)}
	return &gemmKernel{tile: 8, pack: pack, packBytes: size(8), run: tileGEMM(8, bs, qk, size(8), k8), next: two, minFill: 5}
}

// pairGEMM4 is pairGEMM with a 4-token kernel between the 8- and the
// 2-token ones (also for a last tile of 3 tokens, padded).
func pairGEMM4(bs, qk int, size func(T int) func(cols int) int, pack func([]*Activation, []byte), k8, k4, k2 pairKernel) *gemmKernel {
	k := pairGEMM(bs, qk, size, pack, k8, k2)
	k.next = &gemmKernel{tile: 4, pack: pack, packBytes: size(4), run: tileGEMM(4, bs, qk, size(4), k4), next: k.next, minFill: 3}
	return k
}

// hasAVX512 gates the AVX-512 kernels (F, BW, DQ, VL on top of AVX2; never
// under the noavx512 build tag).
var hasAVX512 = avx512Allowed && hasAVX2 && cpu.X86.HasAVX512F && cpu.X86.HasAVX512BW &&
	cpu.X86.HasAVX512DQ && cpu.X86.HasAVX512VL

// hasVNNI gates the VNNI variants (VPDPWSSD).
var hasVNNI = hasAVX512 && cpu.X86.HasAVX512VNNI

// vnniGEMMs: the pair kernels with VPDPWSSD, 8, 4 and 2 tokens per call.
func vnniGEMMs() map[quant.Type]*gemmKernel {
	return map[quant.Type]*gemmKernel{
		quant.Q4_K: pairGEMM4(144, 256, q4KPairsBytes, packQ4_KPairs, gemmQ4_KVNNIx8, gemmQ4_KVNNIx4, gemmQ4_KVNNIx2),
		quant.Q6_K: pairGEMM4(210, 256, q6KPairsBytes, packQ6_KPairs, gemmQ6_KVNNIx8, gemmQ6_KVNNIx4, gemmQ6_KVNNIx2),
	}
}

// avx512GEMMs: the Q4_K, Q6_K, MXFP4 and Q8_0 pair kernels.
func avx512GEMMs() map[quant.Type]*gemmKernel {
	return map[quant.Type]*gemmKernel{
		quant.Q4_K:  pairGEMM(144, 256, q4KPairsBytes, packQ4_KPairs, gemmQ4_KAVX512x8, gemmQ4_KAVX512x2),
		quant.Q6_K:  pairGEMM(210, 256, q6KPairsBytes, packQ6_KPairs, gemmQ6_KAVX512x8, gemmQ6_KAVX512x2),
		quant.MXFP4: pairGEMM(17, 32, mxPairsBytes, packMXFP4Pairs, gemmMXFP4AVX512x8, gemmMXFP4AVX512x2),
		quant.Q8_0:  pairGEMM(34, 32, mxPairsBytes, packMXFP4Pairs, gemmQ8_0AVX512x8, gemmQ8_0AVX512x2),
	}
}
