//go:build amd64 && !purego

package kernels

import (
	"encoding/binary"
	"maps"
	"math"
	"unsafe"

	"github.com/pipe-engine/pipe/quant"
)

// AVX2 multi-token kernels (gemm_amd64.s): Q4_K rows against 8 tokens
// (packQ4_KLanes) then 4 then 2, Q6_K rows against 8 (packQ6_KLanes) then
// 4 then 2, Q8_0, Q5_0 and MXFP4 rows against 8 then 4 then 2 (tokChain);
// F32 and F16 rows against 3 (gemmf_amd64.go). The assembly reads the tile's activations from a
// packed buffer (packQ4_KLanes, packQ6_KLanes, packQ8_K, packQ8_0) and writes y[t*ys+r].

const (
	gemmTileK   = 4 // tokens per Q4_K/Q6_K call (16 YMM registers)
	gemmTileQ80 = 8 // tokens per Q8_0 call
)

// gemmK4Shuf[k]: VPSHUFB control broadcasting int16 lane k of each 128-bit
// half to all its lanes (Q4_K sub-block scales).
var gemmK4Shuf [8][32]byte

// gemmQ6Shuf[c]: 8 × byte 2c then 8 × byte 2c+1 (Q6_K scale pairs).
var gemmQ6Shuf [8][16]byte

// gemmQ6PairShuf[k]: VPSHUFB control of the 16 Q6_K scale bytes giving the
// scales of parts 2k and 2k+1 alternately, lanes 0–3 (bytes 4k, 4k+2) then
// lanes 4–7 (4k+1, 4k+3), for VPMOVSXBW (the 8-token kernel's scale pairs).
var gemmQ6PairShuf [4][16]byte

func init() {
	for k := 0; k < 8; k++ {
		for i := 0; i < 16; i++ {
			gemmK4Shuf[k][2*i] = byte(2 * k)
			gemmK4Shuf[k][2*i+1] = byte(2*k + 1)
		}
		for i := 0; i < 8; i++ {
			gemmQ6Shuf[k][i] = byte(2 * k)
			gemmQ6Shuf[k][8+i] = byte(2*k + 1)
		}
	}
	for k := range gemmQ6PairShuf {
		for i := 0; i < 8; i++ {
			gemmQ6PairShuf[k][i] = byte(4*k + 2*(i%2))
			gemmQ6PairShuf[k][8+i] = byte(4*k + 1 + 2*(i%2))
		}
	}
}

//go:noescape
func gemmQ4_KAVX2(w *byte, rb, rows, nb int, pk *byte, y *float32, ys int, macc *[16]float32)

//go:noescape
func gemmQ4_KAVX2x8(w *byte, rb, rows, nb int, pk *byte, y *float32, ys int)

//go:noescape
func gemmQ6_KAVX2x8(w *byte, rb, rows, nb int, pk *byte, y *float32, ys int)

//go:noescape
func gemmQ6_KAVX2(w *byte, rb, rows, nb int, pk *byte, y *float32, ys int)

//go:noescape
func gemmQ4_K2AVX2(w *byte, rb, rows, nb int, pk *byte, y *float32, ys int, macc *[16]float32)

//go:noescape
func gemmQ6_K2AVX2(w *byte, rb, rows, nb int, pk *byte, y *float32, ys int)

//go:noescape
func gemmQ8_0AVX2(w *byte, rb, rows, nb int, pk *byte, y *float32, ys int)

//go:noescape
func gemmQ5_0AVX2(w *byte, rb, rows, nb int, pk *byte, y *float32, ys int)

//go:noescape
func gemmMXFP4AVX2(w *byte, rb, rows, nb int, pk *byte, y *float32, ys int)

//go:noescape
func gemmQ8_0AVX2x4(w *byte, rb, rows, nb int, pk *byte, y *float32, ys int)

//go:noescape
func gemmQ8_0AVX2x2(w *byte, rb, rows, nb int, pk *byte, y *float32, ys int)

//go:noescape
func gemmQ5_0AVX2x4(w *byte, rb, rows, nb int, pk *byte, y *float32, ys int)

//go:noescape
func gemmQ5_0AVX2x2(w *byte, rb, rows, nb int, pk *byte, y *float32, ys int)

//go:noescape
func gemmMXFP4AVX2x4(w *byte, rb, rows, nb int, pk *byte, y *float32, ys int)

//go:noescape
func gemmMXFP4AVX2x2(w *byte, rb, rows, nb int, pk *byte, y *float32, ys int)

func avx2GEMMs() map[quant.Type]*gemmKernel {
	q4x4 := &gemmKernel{tile: gemmTileK, pack: packQ8_K, packBytes: q8KPack4Bytes, run: avx2GEMMQ4_K, minFill: 3,
		next: &gemmKernel{tile: 2, pack: packQ8_K, packBytes: q8KPack2Bytes, run: avx2GEMMQ4_K2}}
	q6x4 := &gemmKernel{tile: gemmTileK, pack: packQ8_K, packBytes: q8KPack4Bytes, run: avx2GEMMQ6_K, minFill: 3,
		next: &gemmKernel{tile: 2, pack: packQ8_K, packBytes: q8KPack2Bytes, run: avx2GEMMQ6_K2}}
	m := map[quant.Type]*gemmKernel{
		// a last 6 or 7 tokens padded to 8; 5 run as 4 + 1
		quant.Q4_K: {tile: 8, pack: packQ4_KLanes, packBytes: q4KPairsBytes(8),
			run: tileGEMM(8, 144, 256, q4KPairsBytes(8), gemmQ4_KAVX2x8), minFill: 6, next: q4x4},
		quant.Q6_K: {tile: 8, pack: packQ6_KLanes, packBytes: q6KLanesBytes,
			run: tileGEMM(8, 210, 256, q6KLanesBytes, gemmQ6_KAVX2x8), minFill: 6, next: q6x4},
		quant.Q8_0: tokChain(34, gemmQ8_0AVX2, gemmQ8_0AVX2x4, gemmQ8_0AVX2x2),
		quant.Q5_0: tokChain(22, gemmQ5_0AVX2, gemmQ5_0AVX2x4, gemmQ5_0AVX2x2),
		// gpt-oss's experts: without it an AVX2-only CPU ran MXFP4 prompt
		// products one token at a time
		quant.MXFP4: tokChain(17, gemmMXFP4AVX2, gemmMXFP4AVX2x4, gemmMXFP4AVX2x2),
	}
	maps.Copy(m, floatGEMMs())
	return m
}

func init() {
	if !hasAVX2 {
		return
	}
	nativeGEMMSets = append(nativeGEMMSets, gemmSet{"avx2", avx2GEMMs()})
	if hasAVX512 {
		nativeGEMMSets = append(nativeGEMMSets, gemmSet{"avx512", avx512GEMMs()})
	}
	if hasVNNI {
		nativeGEMMSets = append(nativeGEMMSets, gemmSet{"avx512vnni", vnniGEMMs()})
	}
}

// installGEMMAVX2 puts the AVX2 multi-token kernels into m, and over them
// the AVX-512 ones where the CPU has AVX-512 (their VNNI variants with
// AVX-512 VNNI).
//
// For Q4_K and Q6_K the AVX-512 (F, BW) 8-token tile is followed by the
// AVX2 4- and 2-token ones, not by the AVX-512 pair kernel: for the last 2–4
// tokens of a product (and an expert's 2–4 tokens) they measured 1.15–1.6×
// faster per CPU-second (BenchmarkGEMM n2/n4, docs/measurements.md). With
// VNNI the 8-token tile is followed by the VNNI 4-token one (1.35–2.1× the
// AVX2 4-token kernel per CPU-second on Zen 5, BenchmarkGEMM n4), then by
// the VNNI 2-token one for Q6_K (1.1–1.4×) and the AVX2 one for Q4_K (the
// VNNI one was not faster).
func installGEMMAVX2(m *implementation) {
	avx2 := avx2GEMMs()
	maps.Copy(m.gemm, avx2)
	if hasAVX512 {
		maps.Copy(m.gemm, avx512GEMMs())
	}
	if hasVNNI {
		maps.Copy(m.gemm, vnniGEMMs())
		k8, k4 := *m.gemm[quant.Q4_K], *m.gemm[quant.Q4_K].next
		k4.next = below(avx2[quant.Q4_K], 4)
		k8.next = &k4
		m.gemm[quant.Q4_K] = &k8
		return
	}
	if hasAVX512 {
		for _, t := range []quant.Type{quant.Q4_K, quant.Q6_K} {
			k8 := *m.gemm[t]
			k8.next = below(avx2[t], 8)
			m.gemm[t] = &k8
		}
	}
}

// below is the first kernel of chain k with a tile smaller than tile.
func below(k *gemmKernel, tile int) *gemmKernel {
	for k != nil && k.tile >= tile {
		k = k.next
	}
	return k
}

// gemmOk checks the buffers of one call: rows rows of nb blocks of bs
// bytes, a packed tile of pkLen bytes, tile outputs at stride ys.
func gemmOk(w []byte, rb, rows, nb, bs int, pk []byte, pkLen int, y []float32, ys, tile int) bool {
	return rows > 0 && nb > 0 && rb >= nb*bs && len(w) >= (rows-1)*rb+nb*bs &&
		len(pk) >= pkLen && ys >= rows && len(y) >= (tile-1)*ys+rows
}

func avx2GEMMQ4_K(w []byte, rb, rows int, acts []*Activation, pk []byte, y []float32, ys int) {
	nb := acts[0].cols / 256
	if len(acts) != gemmTileK || !gemmOk(w, rb, rows, nb, 144, pk, q8KPackBytes(acts[0].cols, gemmTileK), y, ys, gemmTileK) {
		fillNaN(y[:min(len(y), rows)])
		return
	}
	var macc [16]float32
	gemmQ4_KAVX2(&w[0], rb, rows, nb, &pk[0], &y[0], 4*ys, &macc)
}

func avx2GEMMQ6_K(w []byte, rb, rows int, acts []*Activation, pk []byte, y []float32, ys int) {
	nb := acts[0].cols / 256
	if len(acts) != gemmTileK || !gemmOk(w, rb, rows, nb, 210, pk, q8KPackBytes(acts[0].cols, gemmTileK), y, ys, gemmTileK) {
		fillNaN(y[:min(len(y), rows)])
		return
	}
	gemmQ6_KAVX2(&w[0], rb, rows, nb, &pk[0], &y[0], 4*ys)
}

func avx2GEMMQ4_K2(w []byte, rb, rows int, acts []*Activation, pk []byte, y []float32, ys int) {
	nb := acts[0].cols / 256
	if len(acts) != 2 || !gemmOk(w, rb, rows, nb, 144, pk, q8KPackBytes(acts[0].cols, 2), y, ys, 2) {
		fillNaN(y[:min(len(y), rows)])
		return
	}
	var macc [16]float32
	gemmQ4_K2AVX2(&w[0], rb, rows, nb, &pk[0], &y[0], 4*ys, &macc)
}

func avx2GEMMQ6_K2(w []byte, rb, rows int, acts []*Activation, pk []byte, y []float32, ys int) {
	nb := acts[0].cols / 256
	if len(acts) != 2 || !gemmOk(w, rb, rows, nb, 210, pk, q8KPackBytes(acts[0].cols, 2), y, ys, 2) {
		fillNaN(y[:min(len(y), rows)])
		return
	}
	gemmQ6_K2AVX2(&w[0], rb, rows, nb, &pk[0], &y[0], 4*ys)
}

// tokKernel is the signature of the TOKX kernels (gemm_amd64.s).
type tokKernel func(w *byte, rb, rows, nb int, pk *byte, y *float32, ys int)

// tokChain is the AVX2 chain of a 32-element format with signed codes
// (blocks of bs bytes): 8-token tiles, a last 7 tokens padded to 8;
// then 4-token tiles, then 2-token tiles (3 tokens run as 2 + 1); a last
// single token goes to the vector kernel. A product's tail (an expert's
// few tokens of a prompt) ran one token at a time before the 4- and 2-token
// kernels.
func tokChain(bs int, k8, k4, k2 tokKernel) *gemmKernel {
	two := &gemmKernel{tile: 2, pack: packQ8_0, packBytes: q8_0TileBytes(2), run: avx2GEMMTok(2, bs, k2)}
	four := &gemmKernel{tile: 4, pack: packQ8_0, packBytes: q8_0TileBytes(4), run: avx2GEMMTok(4, bs, k4), next: two}
	return &gemmKernel{tile: gemmTileQ80, pack: packQ8_0, packBytes: q8_0Pack8Bytes, run: avx2GEMMTok(gemmTileQ80, bs, k8), minFill: 7, next: four}
}

// avx2GEMMTok runs kern, a kernel of tile tokens over rows of 32-element
// blocks of bs bytes, after checking the buffers.
func avx2GEMMTok(tile, bs int, kern tokKernel) gemmRun {
	return func(w []byte, rb, rows int, acts []*Activation, pk []byte, y []float32, ys int) {
		nb := acts[0].cols / 32
		if len(acts) != tile || !gemmOk(w, rb, rows, nb, bs, pk, q8_0PackBytes(acts[0].cols, tile), y, ys, tile) {
			fillNaN(y[:min(len(y), rows)])
			return
		}
		kern(&w[0], rb, rows, nb, &pk[0], &y[0], 4*ys)
	}
}

// Packed Q8_K tile of T tokens, per 256-element block: T float32 scales,
// then T × 16 int16 bsums, then T × 256 int8 quants.
func q8KPackBytes(cols, tile int) int { return cols / 256 * q8KBlockBytes(tile) }

func q8KPack4Bytes(cols int) int { return q8KPackBytes(cols, gemmTileK) }

func q8KPack2Bytes(cols int) int { return q8KPackBytes(cols, 2) }

func q8KBlockBytes(tile int) int { return tile * (4 + 32 + 256) }

func packQ8_K(acts []*Activation, dst []byte) {
	T := len(acts)
	nb := acts[0].cols / 256
	stride := q8KBlockBytes(T)
	for b := 0; b < nb; b++ {
		blk := dst[b*stride : (b+1)*stride]
		for t, a := range acts {
			binary.LittleEndian.PutUint32(blk[4*t:], math.Float32bits(a.d[b]))
			bs := blk[4*T+32*t:]
			for i, v := range a.bsums[b*16 : b*16+16] {
				binary.LittleEndian.PutUint16(bs[2*i:], uint16(v))
			}
			copy(blk[36*T+256*t:36*T+256*(t+1)], int8Bytes(a.qs[b*256:b*256+256]))
		}
	}
}

// q6KLanesBytes: per 256-element block, 8 × 32 bytes of scales, 8 × 256
// quants and 8 × 128 bytes of corrections (packQ6_KLanes).
func q6KLanesBytes(cols int) int { return cols / 256 * 3328 }

// packQ6_KLanes packs 8 Q8_K activations for gemmQ6_KAVX2x8: per block,
// token t's d 8 times at 32t; its quants at 256+256t in packQ4_KLanes'
// order; at 2304+128t+32k, for chunk k (parts X = 2k, Y = 2k+1) and lane l,
// int16 32·Σ of X's elements 4l..4l+3 then the same of Y's.
func packQ6_KLanes(acts []*Activation, dst []byte) {
	nb := acts[0].cols / 256
	for b := 0; b < nb; b++ {
		blk := dst[b*3328 : (b+1)*3328]
		for t, a := range acts {
			d := math.Float32bits(a.d[b])
			for e := 0; e < 8; e++ {
				binary.LittleEndian.PutUint32(blk[32*t+4*e:], d)
			}
			qs := a.qs[b*256 : b*256+256]
			putLaneQuants(blk, 256, t, int8Bytes(qs))
			for k := 0; k < 4; k++ {
				for l := 0; l < 8; l++ {
					var sx, sy int16
					for i := 0; i < 4; i++ {
						sx += int16(qs[64*k+4*l+i])
						sy += int16(qs[64*k+32+4*l+i])
					}
					c := blk[2304+128*t+32*k+4*l:]
					binary.LittleEndian.PutUint16(c, uint16(32*sx))
					binary.LittleEndian.PutUint16(c[2:], uint16(32*sy))
				}
			}
		}
	}
}

// Packed Q8_0 tile of T tokens, per 32-element block: T float32 scales,
// then T × 32 int8 quants.
func q8_0PackBytes(cols, tile int) int { return cols / 32 * 36 * tile }

func q8_0Pack8Bytes(cols int) int { return q8_0PackBytes(cols, gemmTileQ80) }

// q8_0TileBytes is the packed size of a tile of T tokens (packQ8_0).
func q8_0TileBytes(tile int) func(cols int) int {
	return func(cols int) int { return q8_0PackBytes(cols, tile) }
}

func packQ8_0(acts []*Activation, dst []byte) {
	T := len(acts)
	nb := acts[0].cols / 32
	stride := 36 * T
	for b := 0; b < nb; b++ {
		blk := dst[b*stride : (b+1)*stride]
		for t, a := range acts {
			binary.LittleEndian.PutUint32(blk[4*t:], math.Float32bits(a.d[b]))
			copy(blk[4*T+32*t:4*T+32*(t+1)], int8Bytes(a.qs[b*32:b*32+32]))
		}
	}
}

func int8Bytes(s []int8) []byte {
	if len(s) == 0 {
		return nil
	}
	return unsafe.Slice((*byte)(unsafe.Pointer(&s[0])), len(s))
}
