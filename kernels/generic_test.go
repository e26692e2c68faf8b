package kernels

import (
	"encoding/binary"
	"math"
	"math/rand/v2"
	"testing"

	"github.com/pipe-engine/pipe/quant"
)

// Transcriptions of llama.cpp's ggml_vec_dot_*_generic (ggml-cpu/quants.c,
// vec.cpp) in their own summation order. Each returns the dot product and
// B = Σ over blocks of |d|·Σ|scale·q·y| (+ |dmin|·Σ|min·bsum|), a bound on
// the sum of the magnitudes of every float term either order adds.
//
// Tolerance: the integer block sums are exact in both codes, so they differ
// only in how float32 block terms are rounded and summed: llama.cpp sums
// nb terms sequentially, this package sums 8 lanes of nb terms each plus a
// 3-step horizontal sum. Each is within γ(nb+8)·B of the exact value
// (γ(n) = n·u/(1-n·u), u = 2^-24, standard recursive-summation bound), so
// they differ by at most 2·γ(nb+8)·B. We test with that bound.

type genericDot func(w []byte, a *Activation) (float32, float64)

func f16(b []byte) float32 { return quant.FP16ToFP32(binary.LittleEndian.Uint16(b)) }

func genQ8_0(w []byte, a *Activation) (float32, float64) {
	var sumf float32
	var B float64
	for ib := 0; ib < a.cols/32; ib++ {
		x := w[ib*34:]
		y := a.qs[ib*32:]
		sumi, abs := 0, 0
		for j := 0; j < 32; j++ {
			p := int(int8(x[2+j])) * int(y[j])
			sumi += p
			abs += iabs(p)
		}
		d := float32(f16(x) * a.d[ib])
		sumf = float32(sumf + float32(float32(sumi)*d))
		B += math.Abs(float64(d)) * float64(abs)
	}
	return sumf, B
}

func iabs(v int) int {
	if v < 0 {
		return -v
	}
	return v
}

// gen32 covers Q4_0, Q5_0, MXFP4 (values from val) with d = scale(x)·y.d.
func gen32(bs int, val func(x []byte, j int) int, scale func(x []byte) float32) genericDot {
	return func(w []byte, a *Activation) (float32, float64) {
		var sumf float32
		var B float64
		for ib := 0; ib < a.cols/32; ib++ {
			x := w[ib*bs:]
			y := a.qs[ib*32:]
			sumi, abs := 0, 0
			for j := 0; j < 32; j++ {
				p := val(x, j) * int(y[j])
				sumi += p
				abs += iabs(p)
			}
			d := float32(scale(x) * a.d[ib])
			sumf = float32(sumf + float32(d*float32(sumi)))
			B += math.Abs(float64(d)) * float64(abs)
		}
		return sumf, B
	}
}

// gen32m covers Q4_1, Q5_1: + m·s per block.
func gen32m(bs int, val func(x []byte, j int) int) genericDot {
	return func(w []byte, a *Activation) (float32, float64) {
		var sumf float32
		var B float64
		for ib := 0; ib < a.cols/32; ib++ {
			x := w[ib*bs:]
			y := a.qs[ib*32:]
			sumi, abs := 0, 0
			for j := 0; j < 32; j++ {
				p := val(x, j) * int(y[j])
				sumi += p
				abs += iabs(p)
			}
			d := float32(f16(x) * a.d[ib])
			ms := float32(f16(x[2:]) * a.s[ib])
			sumf = float32(sumf + float32(float32(d*float32(sumi))+ms))
			B += math.Abs(float64(d))*float64(abs) + math.Abs(float64(ms))
		}
		return sumf, B
	}
}

func nib(x []byte, off, j int) int {
	if j < 16 {
		return int(x[off+j] & 0xf)
	}
	return int(x[off+j-16] >> 4)
}

func hbit(x []byte, off, j int) int {
	return int(binary.LittleEndian.Uint32(x[off:])>>j&1) << 4
}

// genK: the K-quant generic structure: 8 float sums over aux32 lanes
// (position mod 8), then sumf -= dmin·summins; val gives q(e)·scale(e).
func genK(bs int, dOff int, val func(x []byte, e int) (q, sc int), mins func(x []byte, bsums []int16) int, dminOff int) genericDot {
	return func(w []byte, a *Activation) (float32, float64) {
		var sums [8]float32
		var sumf float32
		var B float64
		for i := 0; i < a.cols/256; i++ {
			x := w[i*bs:]
			y := a.qs[i*256:]
			var aux32 [8]int
			abs := 0
			for e := 0; e < 256; e++ {
				q, sc := val(x, e)
				p := q * int(y[e])
				aux32[e%8] += sc * p
				abs += iabs(sc * p)
			}
			d := float32(f16(x[dOff:]) * a.d[i])
			for l := 0; l < 8; l++ {
				sums[l] = float32(sums[l] + float32(d*float32(aux32[l])))
			}
			B += math.Abs(float64(d)) * float64(abs)
			if mins != nil {
				sumi := mins(x, a.bsums[i*16:i*16+16])
				dmin := float32(f16(x[dminOff:]) * a.d[i])
				sumf = float32(sumf - float32(dmin*float32(sumi)))
				B += math.Abs(float64(dmin)) * math.Abs(float64(sumi)) * 2
			}
		}
		for l := 0; l < 8; l++ {
			sumf = float32(sumf + sums[l])
		}
		return sumf, B
	}
}

func k4mins(x []byte, bsums []int16) int {
	_, mn := unpackScaleMinK4(x[4:16])
	s := 0
	for j := 0; j < 16; j++ {
		s += int(bsums[j]) * int(mn[j/2])
	}
	return s
}

func genFloat(get func(w []byte, i int) float32, act func(a *Activation, i int) float32) genericDot {
	return func(w []byte, a *Activation) (float32, float64) {
		var sumf, B float64
		for i := 0; i < a.cols; i++ {
			p := float32(get(w, i) * act(a, i))
			sumf += float64(p)
			B += math.Abs(float64(p))
		}
		return float32(sumf), B
	}
}

var genericDots = map[quant.Type]genericDot{
	quant.Q8_0: genQ8_0,
	quant.Q4_0: gen32(18, func(x []byte, j int) int { return nib(x, 2, j) - 8 }, f16),
	quant.Q5_0: gen32(22, func(x []byte, j int) int { return nib(x, 6, j) | hbit(x, 2, j) - 16 }, f16),
	quant.MXFP4: gen32(17, func(x []byte, j int) int { return int(quant.KValuesMXFP4[nib(x, 1, j)]) },
		func(x []byte) float32 { return e8m0Half(x[0]) }),
	quant.Q4_1: gen32m(20, func(x []byte, j int) int { return nib(x, 4, j) }),
	quant.Q5_1: gen32m(24, func(x []byte, j int) int { return nib(x, 8, j) | hbit(x, 4, j) }),
	quant.Q4_K: genK(144, 0, func(x []byte, e int) (int, int) {
		sc, _ := unpackScaleMinK4(x[4:16])
		j, l := e/64, e%64
		v := int(x[16+32*j+l%32] & 0xf)
		if l >= 32 {
			v = int(x[16+32*j+l%32] >> 4)
		}
		return v, int(sc[e/32])
	}, k4mins, 2),
	quant.Q5_K: genK(176, 0, func(x []byte, e int) (int, int) {
		sc, _ := unpackScaleMinK4(x[4:16])
		j, l := e/64, e%64
		v := int(x[48+32*j+l%32] & 0xf)
		if l >= 32 {
			v = int(x[48+32*j+l%32] >> 4)
		}
		if x[16+l%32]&(1<<(e/32)) != 0 {
			v += 16
		}
		return v, int(sc[e/32])
	}, k4mins, 2),
	quant.Q6_K: genK(210, 208, func(x []byte, e int) (int, int) {
		n, r := e/128, e%128
		ql, qh := x[64*n:], x[128+32*n:]
		l, part := r%32, r/32
		var v int
		switch part {
		case 0:
			v = int(ql[l]&0xf) | int(qh[l]&3)<<4
		case 1:
			v = int(ql[l+32]&0xf) | int(qh[l]>>2&3)<<4
		case 2:
			v = int(ql[l]>>4) | int(qh[l]>>4&3)<<4
		case 3:
			v = int(ql[l+32]>>4) | int(qh[l]>>6&3)<<4
		}
		return v - 32, int(int8(x[192+e/16]))
	}, nil, 0),
	quant.Q3_K: genK(110, 108, func(x []byte, e int) (int, int) {
		// get the 6-bit scales the straightforward way (dequantize_row_q3_K)
		s := x[96:108]
		j := e / 16
		var sc int
		if j < 8 {
			sc = int(s[j]&0xf) | int(s[8+j%4]>>(2*(j/4))&3)<<4
		} else {
			sc = int(s[j-8]>>4) | int(s[8+j%4]>>(2*(j/4))&3)<<4
		}
		c, r := e/128, e%128
		sh, l := r/32, r%32
		v := int(x[32+32*c+l] >> (2 * sh) & 3)
		if x[l]&(1<<(4*c+sh)) == 0 {
			v -= 4
		}
		return v, sc - 32
	}, nil, 0),
	quant.Q2_K: genK(84, 80, func(x []byte, e int) (int, int) {
		k, r := e/128, e%128
		j, l := r/32, r%32
		return int(x[16+32*k+l] >> (2 * j) & 3), int(x[e/16] & 0xf)
	}, func(x []byte, bsums []int16) int {
		s := 0
		for j := 0; j < 16; j++ {
			s += int(bsums[j]) * int(x[j]>>4)
		}
		return s
	}, 82),
	quant.F32: genFloat(func(w []byte, i int) float32 {
		return math.Float32frombits(binary.LittleEndian.Uint32(w[4*i:]))
	}, func(a *Activation, i int) float32 { return a.f[i] }),
	quant.F16: genFloat(func(w []byte, i int) float32 { return f16(w[2*i:]) },
		func(a *Activation, i int) float32 { return quant.FP16ToFP32(a.h[i]) }),
	quant.BF16: genFloat(func(w []byte, i int) float32 { return quant.BF16ToFP32(binary.LittleEndian.Uint16(w[2*i:])) },
		func(a *Activation, i int) float32 { return quant.BF16ToFP32(a.h[i]) }),
}

// TestReferenceMatchesGeneric: the reference equals llama.cpp's generic
// code within the float-order tolerance documented above.
func TestReferenceMatchesGeneric(t *testing.T) {
	rng := rand.New(rand.NewPCG(1, 2))
	for _, typ := range allTypes {
		gen := genericDots[typ]
		if gen == nil {
			t.Fatalf("%v: no generic transcription", typ)
		}
		for _, cols := range []int{256, 512, 2048, 2816} {
			if cols%typ.BlockSize() != 0 {
				continue
			}
			rows := 7
			w := randRows(rng, typ, rows, cols)
			rb := len(w) / rows
			x := randX(rng, cols)
			a := new(Activation)
			if err := a.quantizeWith(refImpl, typ, x); err != nil {
				t.Fatal(err)
			}
			for r := 0; r < rows; r++ {
				row := w[r*rb : (r+1)*rb]
				got := refImpl.dots[typ](row, a)
				want, B := gen(row, a)
				nb := float64(cols / typ.BlockSize())
				if typ == quant.F32 || typ == quant.F16 || typ == quant.BF16 {
					nb = float64(cols) / 8
				}
				n := nb + 8
				u := math.Ldexp(1, -24)
				tol := 2 * n * u / (1 - n*u) * B
				if diff := math.Abs(float64(got) - float64(want)); diff > tol || math.IsNaN(float64(got)) {
					t.Errorf("%v cols %d row %d: reference %g, llama.cpp generic %g, diff %g > tol %g", typ, cols, r, got, want, diff, tol)
				}
			}
		}
	}
}
