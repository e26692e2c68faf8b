package kernels

import (
	"encoding/binary"
	"math"
	"sync"

	"github.com/pipe-engine/pipe/quant"
)

// Pure-Go reference dot products, one weight row against an Activation.
// The integer work per block is llama.cpp's; the float order is the
// package's lane order (see the package doc). Callers guarantee
// len(w) == row size and a.cols == row length.

func f16at(b []byte, off int) float32 { return quant.FP16ToFP32(binary.LittleEndian.Uint16(b[off:])) }

// hsum8 is the fixed horizontal reduction of 8 lanes.
func hsum8(a *[8]float32) float32 {
	r0 := float32(a[0] + a[4])
	r1 := float32(a[1] + a[5])
	r2 := float32(a[2] + a[6])
	r3 := float32(a[3] + a[7])
	return float32(float32(r0+r2) + float32(r1+r3))
}

// hsum4 reduces 4 lanes: (m0+m2) + (m1+m3).
func hsum4(m *[4]float32) float32 {
	return float32(float32(m[0]+m[2]) + float32(m[1]+m[3]))
}

// accLanes does acc[l] += float32(d * float32(lanes[l])).
func accLanes(acc *[8]float32, d float32, lanes *[8]int32) {
	for l := range acc {
		acc[l] = float32(acc[l] + float32(d*float32(lanes[l])))
	}
}

// lanes32: lane l = sum over elements 4l..4l+3 of q*y.
func lanes32(q *[32]int8, y []int8) (L [8]int32) {
	y = y[:32]
	for l := 0; l < 8; l++ {
		b := 4 * l
		L[l] = int32(q[b])*int32(y[b]) + int32(q[b+1])*int32(y[b+1]) +
			int32(q[b+2])*int32(y[b+2]) + int32(q[b+3])*int32(y[b+3])
	}
	return
}

// lanes256: lane l = sum over elements e with (e%32)/4 == l of
// sc[e/16] * q[e] * y[e].
func lanes256(q *[256]int8, sc *[16]int32, y []int8) (L [8]int32) {
	y = y[:256]
	for c := 0; c < 8; c++ {
		for l := 0; l < 8; l++ {
			b := 32*c + 4*l
			s := int32(q[b])*int32(y[b]) + int32(q[b+1])*int32(y[b+1]) +
				int32(q[b+2])*int32(y[b+2]) + int32(q[b+3])*int32(y[b+3])
			L[l] += sc[b/16] * s
		}
	}
	return
}

// ---- 32-element blocks against Q8_0 / Q8_1 ----

func refDotQ8_0(w []byte, a *Activation) float32 {
	var acc [8]float32
	nb := a.cols / 32
	for b := 0; b < nb; b++ {
		blk := (*[34]byte)(w[b*34:])
		y := (*[32]int8)(a.qs[b*32:])
		var L [8]int32
		for l := 0; l < 8; l++ {
			i := 4 * l
			L[l] = int32(int8(blk[2+i]))*int32(y[i]) + int32(int8(blk[3+i]))*int32(y[i+1]) +
				int32(int8(blk[4+i]))*int32(y[i+2]) + int32(int8(blk[5+i]))*int32(y[i+3])
		}
		accLanes(&acc, float32(f16at(blk[:], 0)*a.d[b]), &L)
	}
	return hsum8(&acc)
}

func refDotQ4_0(w []byte, a *Activation) float32 {
	var acc [8]float32
	var q [32]int8
	nb := a.cols / 32
	for b := 0; b < nb; b++ {
		blk := w[b*18 : b*18+18]
		for j := 0; j < 16; j++ {
			q[j] = int8(blk[2+j]&0xf) - 8
			q[j+16] = int8(blk[2+j]>>4) - 8
		}
		L := lanes32(&q, a.qs[b*32:])
		accLanes(&acc, float32(f16at(blk, 0)*a.d[b]), &L)
	}
	return hsum8(&acc)
}

func refDotQ5_0(w []byte, a *Activation) float32 {
	var acc [8]float32
	var q [32]int8
	nb := a.cols / 32
	for b := 0; b < nb; b++ {
		blk := w[b*22 : b*22+22]
		qh := binary.LittleEndian.Uint32(blk[2:])
		for j := 0; j < 16; j++ {
			q[j] = int8(blk[6+j]&0xf|uint8(qh>>j&1)<<4) - 16
			q[j+16] = int8(blk[6+j]>>4|uint8(qh>>(j+16)&1)<<4) - 16
		}
		L := lanes32(&q, a.qs[b*32:])
		accLanes(&acc, float32(f16at(blk, 0)*a.d[b]), &L)
	}
	return hsum8(&acc)
}

func refDotMXFP4(w []byte, a *Activation) float32 {
	var acc [8]float32
	nb := a.cols / 32
	for b := 0; b < nb; b++ {
		blk := (*[17]byte)(w[b*17:])
		y0 := (*[16]int8)(a.qs[b*32:])
		y1 := (*[16]int8)(a.qs[b*32+16:])
		var L [8]int32
		for l := 0; l < 4; l++ {
			i := 4 * l
			L[l] = int32(quant.KValuesMXFP4[blk[1+i]&0xf])*int32(y0[i]) + int32(quant.KValuesMXFP4[blk[2+i]&0xf])*int32(y0[i+1]) +
				int32(quant.KValuesMXFP4[blk[3+i]&0xf])*int32(y0[i+2]) + int32(quant.KValuesMXFP4[blk[4+i]&0xf])*int32(y0[i+3])
			L[l+4] = int32(quant.KValuesMXFP4[blk[1+i]>>4])*int32(y1[i]) + int32(quant.KValuesMXFP4[blk[2+i]>>4])*int32(y1[i+1]) +
				int32(quant.KValuesMXFP4[blk[3+i]>>4])*int32(y1[i+2]) + int32(quant.KValuesMXFP4[blk[4+i]>>4])*int32(y1[i+3])
		}
		accLanes(&acc, float32(e8m0Half(blk[0])*a.d[b]), &L)
	}
	return hsum8(&acc)
}

func refDotQ4_1(w []byte, a *Activation) float32 {
	var acc [8]float32
	var macc float32
	var q [32]int8
	nb := a.cols / 32
	for b := 0; b < nb; b++ {
		blk := w[b*20 : b*20+20]
		for j := 0; j < 16; j++ {
			q[j] = int8(blk[4+j] & 0xf)
			q[j+16] = int8(blk[4+j] >> 4)
		}
		L := lanes32(&q, a.qs[b*32:])
		accLanes(&acc, float32(f16at(blk, 0)*a.d[b]), &L)
		macc = float32(macc + float32(f16at(blk, 2)*a.s[b]))
	}
	return float32(hsum8(&acc) + macc)
}

func refDotQ5_1(w []byte, a *Activation) float32 {
	var acc [8]float32
	var macc float32
	var q [32]int8
	nb := a.cols / 32
	for b := 0; b < nb; b++ {
		blk := w[b*24 : b*24+24]
		qh := binary.LittleEndian.Uint32(blk[4:])
		for j := 0; j < 16; j++ {
			q[j] = int8(blk[8+j]&0xf | uint8(qh>>j&1)<<4)
			q[j+16] = int8(blk[8+j]>>4 | uint8(qh>>(j+16)&1)<<4)
		}
		L := lanes32(&q, a.qs[b*32:])
		accLanes(&acc, float32(f16at(blk, 0)*a.d[b]), &L)
		macc = float32(macc + float32(f16at(blk, 2)*a.s[b]))
	}
	return float32(hsum8(&acc) + macc)
}

// ---- K-quants against Q8_K ----

// unpackScaleMinK4 is llama.cpp's utmp shuffle: 8 6-bit scales and 8 6-bit
// mins from the 12 scale bytes of Q4_K/Q5_K.
func unpackScaleMinK4(s []byte) (sc, mn [8]uint8) {
	for j := 0; j < 4; j++ {
		sc[j] = s[j] & 63
		mn[j] = s[j+4] & 63
	}
	for j := 4; j < 8; j++ {
		sc[j] = s[j+4]&0xf | (s[j-4]>>6)<<4
		mn[j] = s[j+4]>>4 | (s[j]>>6)<<4
	}
	return
}

// minLanesK4 are the 4 integer lanes of the minimum term of Q4_K/Q5_K:
// lane k = mn[2k]*(bs[4k]+bs[4k+1]) + mn[2k+1]*(bs[4k+2]+bs[4k+3]).
func minLanesK4(mn *[8]uint8, bs []int16) (m [4]int32) {
	bs = bs[:16]
	for k := 0; k < 4; k++ {
		m[k] = int32(mn[2*k])*(int32(bs[4*k])+int32(bs[4*k+1])) +
			int32(mn[2*k+1])*(int32(bs[4*k+2])+int32(bs[4*k+3]))
	}
	return
}

func refDotQ4_K(w []byte, a *Activation) float32 {
	var acc [8]float32
	var macc [4]float32
	nb := a.cols / 256
	for b := 0; b < nb; b++ {
		blk := (*[144]byte)(w[b*144:])
		scs, mns := unpackScaleMinK4(blk[4:16])
		var L [8]int32
		for j := 0; j < 4; j++ {
			qs := (*[32]byte)(blk[16+32*j:])
			y0 := (*[32]int8)(a.qs[b*256+64*j:])
			y1 := (*[32]int8)(a.qs[b*256+64*j+32:])
			s0, s1 := int32(scs[2*j]), int32(scs[2*j+1])
			for l := 0; l < 8; l++ {
				i := 4 * l
				lo := int32(qs[i]&0xf)*int32(y0[i]) + int32(qs[i+1]&0xf)*int32(y0[i+1]) +
					int32(qs[i+2]&0xf)*int32(y0[i+2]) + int32(qs[i+3]&0xf)*int32(y0[i+3])
				hi := int32(qs[i]>>4)*int32(y1[i]) + int32(qs[i+1]>>4)*int32(y1[i+1]) +
					int32(qs[i+2]>>4)*int32(y1[i+2]) + int32(qs[i+3]>>4)*int32(y1[i+3])
				L[l] += s0*lo + s1*hi
			}
		}
		accLanes(&acc, float32(f16at(blk[:], 0)*a.d[b]), &L)
		M := minLanesK4(&mns, a.bsums[b*16:])
		dmin := float32(f16at(blk[:], 2) * a.d[b])
		for k := range macc {
			macc[k] = float32(macc[k] + float32(dmin*float32(M[k])))
		}
	}
	return float32(hsum8(&acc) - hsum4(&macc))
}

func refDotQ5_K(w []byte, a *Activation) float32 {
	var acc [8]float32
	var macc [4]float32
	var q [256]int8
	var sc [16]int32
	nb := a.cols / 256
	for b := 0; b < nb; b++ {
		blk := w[b*176 : b*176+176]
		scs, mns := unpackScaleMinK4(blk[4:16])
		for i := 0; i < 8; i++ {
			sc[2*i], sc[2*i+1] = int32(scs[i]), int32(scs[i])
		}
		qh := blk[16:48]
		qs := blk[48:176]
		for j := 0; j < 4; j++ {
			for l := 0; l < 32; l++ {
				q[64*j+l] = int8(qs[32*j+l]&0xf | (qh[l]>>(2*j)&1)<<4)
				q[64*j+32+l] = int8(qs[32*j+l]>>4 | (qh[l]>>(2*j+1)&1)<<4)
			}
		}
		L := lanes256(&q, &sc, a.qs[b*256:])
		accLanes(&acc, float32(f16at(blk, 0)*a.d[b]), &L)
		M := minLanesK4(&mns, a.bsums[b*16:])
		dmin := float32(f16at(blk, 2) * a.d[b])
		for k := range macc {
			macc[k] = float32(macc[k] + float32(dmin*float32(M[k])))
		}
	}
	return float32(hsum8(&acc) - hsum4(&macc))
}

func refDotQ6_K(w []byte, a *Activation) float32 {
	var acc [8]float32
	nb := a.cols / 256
	for b := 0; b < nb; b++ {
		blk := (*[210]byte)(w[b*210:])
		var L [8]int32
		for n := 0; n < 2; n++ {
			ql := (*[64]byte)(blk[64*n:])
			qh := (*[32]byte)(blk[128+32*n:])
			for part := 0; part < 4; part++ {
				y := (*[32]int8)(a.qs[b*256+128*n+32*part:])
				lo := int32(int8(blk[192+8*n+2*part]))
				hiS := int32(int8(blk[192+8*n+2*part+1]))
				off, shift, hsh := 32*(part&1), 4*(part>>1), 2*part
				for l := 0; l < 8; l++ {
					s := int32(0)
					for i := 4 * l; i < 4*l+4; i++ {
						q := int32((ql[off+i]>>shift)&0xf|((qh[i]>>hsh)&3)<<4) - 32
						s += q * int32(y[i])
					}
					if l < 4 {
						L[l] += lo * s
					} else {
						L[l] += hiS * s
					}
				}
			}
		}
		accLanes(&acc, float32(f16at(blk[:], 208)*a.d[b]), &L)
	}
	return hsum8(&acc)
}

func refDotQ3_K(w []byte, a *Activation) float32 {
	var acc [8]float32
	var q [256]int8
	var sc [16]int32
	nb := a.cols / 256
	for b := 0; b < nb; b++ {
		blk := w[b*110 : b*110+110]
		hm := blk[0:32]
		qs := blk[32:96]
		s := blk[96:108]
		a0 := binary.LittleEndian.Uint32(s[0:])
		a1 := binary.LittleEndian.Uint32(s[4:])
		tmp := binary.LittleEndian.Uint32(s[8:])
		const km1, km2 = 0x03030303, 0x0f0f0f0f
		aux := [4]uint32{
			a0&km2 | (tmp>>0&km1)<<4,
			a1&km2 | (tmp>>2&km1)<<4,
			(a0>>4)&km2 | (tmp>>4&km1)<<4,
			(a1>>4)&km2 | (tmp>>6&km1)<<4,
		}
		for i := 0; i < 16; i++ {
			sc[i] = int32(int8(aux[i/4]>>(8*(i%4)))) - 32
		}
		m := uint8(1)
		for c := 0; c < 2; c++ {
			for sh := 0; sh < 4; sh++ {
				for l := 0; l < 32; l++ {
					v := int8(qs[32*c+l] >> (2 * sh) & 3)
					if hm[l]&m == 0 {
						v -= 4
					}
					q[128*c+32*sh+l] = v
				}
				m <<= 1
			}
		}
		L := lanes256(&q, &sc, a.qs[b*256:])
		accLanes(&acc, float32(f16at(blk, 108)*a.d[b]), &L)
	}
	return hsum8(&acc)
}

func refDotQ2_K(w []byte, a *Activation) float32 {
	var acc [8]float32
	var macc float32
	var q [256]int8
	var sc [16]int32
	nb := a.cols / 256
	for b := 0; b < nb; b++ {
		blk := w[b*84 : b*84+84]
		s := blk[0:16]
		qs := blk[16:80]
		summs := int32(0)
		bs := a.bsums[b*16 : b*16+16]
		for j := 0; j < 16; j++ {
			sc[j] = int32(s[j] & 0xf)
			summs += int32(bs[j]) * int32(s[j]>>4)
		}
		for k := 0; k < 2; k++ {
			for j := 0; j < 4; j++ {
				for l := 0; l < 32; l++ {
					q[128*k+32*j+l] = int8(qs[32*k+l] >> (2 * j) & 3)
				}
			}
		}
		L := lanes256(&q, &sc, a.qs[b*256:])
		accLanes(&acc, float32(a.d[b]*f16at(blk, 80)), &L)
		dmin := float32(a.d[b] * f16at(blk, 82))
		macc = float32(macc + float32(dmin*float32(summs)))
	}
	return float32(hsum8(&acc) - macc)
}

// ---- float rows ----

// floatDot is the shared 4×8-lane order for F32/F16/BF16 rows; at(i)
// returns the i-th weight·activation product rounded to float32.
func refDotF32(w []byte, a *Activation) float32 {
	x := a.f
	n := len(x)
	var acc [4][8]float32
	i := 0
	for ; i+32 <= n; i += 32 {
		for k := 0; k < 4; k++ {
			for l := 0; l < 8; l++ {
				e := i + 8*k + l
				wv := math.Float32frombits(binary.LittleEndian.Uint32(w[4*e:]))
				acc[k][l] = float32(acc[k][l] + float32(wv*x[e]))
			}
		}
	}
	var tail float32
	for ; i < n; i++ {
		wv := math.Float32frombits(binary.LittleEndian.Uint32(w[4*i:]))
		tail = float32(tail + float32(wv*x[i]))
	}
	return combine4x8(&acc, tail)
}

func combine4x8(acc *[4][8]float32, tail float32) float32 {
	var c [8]float32
	for l := range c {
		c[l] = float32(float32(acc[0][l]+acc[2][l]) + float32(acc[1][l]+acc[3][l]))
	}
	return float32(hsum8(&c) + tail)
}

// f16Table maps every half to float32 (256 KiB, built on first use by the
// F16 reference kernel).
var f16Table = sync.OnceValue(func() *[1 << 16]float32 {
	t := new([1 << 16]float32)
	for h := range t {
		t[h] = quant.FP16ToFP32(uint16(h))
	}
	return t
})

func refDotF16(w []byte, a *Activation) float32 {
	tab := f16Table()
	x := a.h
	n := len(x)
	w = w[:2*n]
	var acc [4][8]float32
	i := 0
	for ; i+32 <= n; i += 32 {
		for k := 0; k < 4; k++ {
			for l := 0; l < 8; l++ {
				e := i + 8*k + l
				p := float32(tab[binary.LittleEndian.Uint16(w[2*e:])] * tab[x[e]])
				acc[k][l] = float32(acc[k][l] + p)
			}
		}
	}
	var tail float32
	for ; i < n; i++ {
		p := float32(tab[binary.LittleEndian.Uint16(w[2*i:])] * tab[x[i]])
		tail = float32(tail + p)
	}
	return combine4x8(&acc, tail)
}

func refDotBF16(w []byte, a *Activation) float32 {
	x := a.h
	n := len(x)
	var acc [4][8]float32
	i := 0
	for ; i+32 <= n; i += 32 {
		for k := 0; k < 4; k++ {
			for l := 0; l < 8; l++ {
				e := i + 8*k + l
				p := float32(quant.BF16ToFP32(binary.LittleEndian.Uint16(w[2*e:])) * quant.BF16ToFP32(x[e]))
				acc[k][l] = float32(acc[k][l] + p)
			}
		}
	}
	var tail float32
	for ; i < n; i++ {
		p := float32(quant.BF16ToFP32(binary.LittleEndian.Uint16(w[2*i:])) * quant.BF16ToFP32(x[i]))
		tail = float32(tail + p)
	}
	return combine4x8(&acc, tail)
}
