package quant

import (
	"encoding/binary"
	"math"
)

// This file holds the K-quant reference quantizers, translated from
// ggml-quants.c (quantize_row_{q2,q3,q4,q5,q6,q8}_K_ref and their helpers
// make_qkx2_quants, make_qx_quants, make_q3_quants, nearest_int).
//
// Bit-exactness rules followed throughout: operations happen in float32 in
// C's evaluation order (left to right, int operands converted to float where
// C converts them), and every product that feeds an addition or subtraction
// is wrapped in float32() so the Go compiler cannot fuse it into an FMA.

func init() {
	quantizers[Q2_K] = quantizeQ2_K
	quantizers[Q3_K] = quantizeQ3_K
	quantizers[Q4_K] = quantizeQ4_K
	quantizers[Q5_K] = quantizeQ5_K
	quantizers[Q6_K] = quantizeQ6_K
	quantizers[Q8_K] = quantizeQ8_K
}

// groupMaxEps is ggml's GROUP_MAX_EPS: a group whose largest magnitude is
// below it counts as all zero.
const groupMaxEps = float32(1e-15)

// nearestInt is ggml's nearest_int: round to nearest, ties to even, via the
// 1.5*2^23 magic constant. Valid for |f| <= 4194303; outside that range it
// returns the same wrapped value as the C code.
func nearestInt(f float32) int {
	val := float32(f) + 12582912
	i := int32(math.Float32bits(val))
	return int((i & 0x007fffff) - 0x00400000)
}

func sqrt32(f float32) float32 { return float32(math.Sqrt(float64(f))) }

func clampInt(v, lo, hi int) int {
	// C: MAX(lo, MIN(hi, v))
	if v > hi {
		v = hi
	}
	if v < lo {
		v = lo
	}
	return v
}

// makeQKX2Quants is ggml's make_qkx2_quants: fit x ≈ scale*L - theMin with
// L in [0, nmax] under weights, trying nstep+1 candidate scales. It returns
// scale and theMin (the negated offset, >= 0).
func makeQKX2Quants(nmax int, x, weights []float32, L, Laux []uint8, rmin, rdelta float32, nstep int, useMad bool) (scale, theMin float32) {
	n := len(x)
	weights = weights[:n]
	L = L[:n]
	Laux = Laux[:n]
	min, max := x[0], x[0]
	sumW := weights[0]
	sumX := float32(sumW * x[0])
	for i := 1; i < n; i++ {
		if x[i] < min {
			min = x[i]
		}
		if x[i] > max {
			max = x[i]
		}
		w := weights[i]
		sumW += w
		sumX += float32(w * x[i])
	}
	if min > 0 {
		min = 0
	}
	if max == min {
		for i := range L {
			L[i] = 0
		}
		return 0, -min
	}
	fnmax := float32(nmax)
	iscale := fnmax / (max - min)
	scale = 1 / iscale
	var bestError float32
	for i := 0; i < n; i++ {
		l := clampInt(nearestInt(float32(iscale*(x[i]-min))), 0, nmax)
		L[i] = uint8(l)
		diff := float32(float32(scale*float32(l))+min) - x[i]
		if useMad {
			diff = abs32(diff)
		} else {
			diff = float32(diff * diff)
		}
		bestError += float32(weights[i] * diff)
	}
	if nstep < 1 {
		return scale, -min
	}
	for is := 0; is <= nstep; is++ {
		iscale = (float32(rmin+float32(rdelta*float32(is))) + fnmax) / (max - min)
		var sumL, sumL2, sumXL float32
		for i := 0; i < n; i++ {
			l := clampInt(nearestInt(float32(iscale*(x[i]-min))), 0, nmax)
			Laux[i] = uint8(l)
			w := weights[i]
			fl := float32(l)
			wl := float32(w * fl)
			sumL += wl
			sumL2 += float32(wl * fl)
			sumXL += float32(wl * x[i])
		}
		D := float32(sumW*sumL2) - float32(sumL*sumL)
		if D > 0 {
			thisScale := (float32(sumW*sumXL) - float32(sumX*sumL)) / D
			thisMin := (float32(sumL2*sumX) - float32(sumL*sumXL)) / D
			if thisMin > 0 {
				thisMin = 0
				thisScale = sumXL / sumL2
			}
			var curError float32
			for i := 0; i < n; i++ {
				diff := float32(float32(thisScale*float32(Laux[i]))+thisMin) - x[i]
				if useMad {
					diff = abs32(diff)
				} else {
					diff = float32(diff * diff)
				}
				curError += float32(weights[i] * diff)
			}
			if curError < bestError {
				copy(L, Laux)
				bestError = curError
				scale = thisScale
				min = thisMin
			}
		}
	}
	return scale, -min
}

// makeQXQuants is ggml's make_qx_quants for symmetric types: L[i] in
// [0, 2*nmax) holds the level plus nmax. rmseType selects the weighting
// (1: x², 2: 1, 3: |x|, else sqrt|x|) when qw is nil; a negative rmseType
// returns after the first fit.
func makeQXQuants(nmax int, x []float32, L []int8, rmseType int, qw []float32) float32 {
	n := len(x)
	L = L[:n]
	var max, amax float32
	for i := 0; i < n; i++ {
		if ax := abs32(x[i]); ax > amax {
			amax, max = ax, x[i]
		}
	}
	if amax < groupMaxEps {
		for i := range L {
			L[i] = 0
		}
		return 0
	}
	fnmax := float32(nmax)
	iscale := float32(-nmax) / max
	if rmseType == 0 {
		for i := 0; i < n; i++ {
			l := nearestInt(float32(iscale * x[i]))
			L[i] = int8(nmax + clampInt(l, -nmax, nmax-1))
		}
		return 1 / iscale
	}
	returnEarly := false
	if rmseType < 0 {
		rmseType = -rmseType
		returnEarly = true
	}
	// The weights are fixed for the whole search: compute them once.
	var wbuf [32]float32
	var w []float32
	if n <= len(wbuf) {
		w = wbuf[:n]
	} else {
		w = make([]float32, n)
	}
	for i := range w {
		switch {
		case qw != nil:
			w[i] = qw[i]
		case rmseType == 1:
			w[i] = float32(x[i] * x[i])
		case rmseType == 2:
			w[i] = 1
		case rmseType == 3:
			w[i] = abs32(x[i])
		default:
			w[i] = sqrt32(abs32(x[i]))
		}
	}
	x = x[:len(w)]
	var sumlx, suml2 float32
	for i := 0; i < n; i++ {
		l := clampInt(nearestInt(float32(iscale*x[i])), -nmax, nmax-1)
		L[i] = int8(l + nmax)
		fl := float32(l)
		sumlx += float32(float32(w[i]*x[i]) * fl)
		suml2 += float32(float32(w[i]*fl) * fl)
	}
	var scale float32
	if suml2 != 0 {
		scale = sumlx / suml2
	}
	if returnEarly {
		if suml2 > 0 {
			return float32(0.5 * float32(scale+1/iscale))
		}
		return 1 / iscale
	}
	best := float32(scale * sumlx)
	for is := -9; is <= 9; is++ {
		if is == 0 {
			continue
		}
		iscale = -(fnmax + float32(0.1*float32(is))) / max
		sumlx, suml2 = 0, 0
		for i := 0; i < n; i++ {
			l := clampInt(nearestInt(float32(iscale*x[i])), -nmax, nmax-1)
			fl := float32(l)
			sumlx += float32(float32(w[i]*x[i]) * fl)
			suml2 += float32(float32(w[i]*fl) * fl)
		}
		if suml2 > 0 && float32(sumlx*sumlx) > float32(best*suml2) {
			for i := 0; i < n; i++ {
				l := nearestInt(float32(iscale * x[i]))
				L[i] = int8(nmax + clampInt(l, -nmax, nmax-1))
			}
			scale = sumlx / suml2
			best = float32(scale * sumlx)
		}
	}
	return scale
}

// makeQ3Quants is ggml's make_q3_quants (the do_rmse variant refines each
// level greedily under x² weights). L[i] ends in [0, 2*nmax).
func makeQ3Quants(nmax int, x []float32, L []int8, doRmse bool) float32 {
	n := len(x)
	L = L[:n]
	var max, amax float32
	for i := 0; i < n; i++ {
		if ax := abs32(x[i]); ax > amax {
			amax, max = ax, x[i]
		}
	}
	if amax < groupMaxEps {
		for i := range L {
			L[i] = 0
		}
		return 0
	}
	iscale := float32(-nmax) / max
	if doRmse {
		var sumlx, suml2 float32
		for i := 0; i < n; i++ {
			l := clampInt(nearestInt(float32(iscale*x[i])), -nmax, nmax-1)
			L[i] = int8(l)
			w := float32(x[i] * x[i])
			fl := float32(l)
			sumlx += float32(float32(w*x[i]) * fl)
			suml2 += float32(float32(w*fl) * fl)
		}
		for itry := 0; itry < 5; itry++ {
			nChanged := 0
			for i := 0; i < n; i++ {
				w := float32(x[i] * x[i])
				fLi := float32(L[i])
				slx := sumlx - float32(float32(w*x[i])*fLi)
				if slx > 0 {
					sl2 := suml2 - float32(float32(w*fLi)*fLi)
					newL := clampInt(nearestInt(float32(x[i]*sl2)/slx), -nmax, nmax-1)
					if newL != int(L[i]) {
						fn := float32(newL)
						slx += float32(float32(w*x[i]) * fn)
						sl2 += float32(float32(w*fn) * fn)
						if sl2 > 0 && float32(float32(slx*slx)*suml2) > float32(float32(sumlx*sumlx)*sl2) {
							L[i] = int8(newL)
							sumlx, suml2 = slx, sl2
							nChanged++
						}
					}
				}
			}
			if nChanged == 0 {
				break
			}
		}
		for i := range L {
			L[i] += int8(nmax)
		}
		if suml2 > 0 {
			return sumlx / suml2
		}
		return 0
	}
	for i := 0; i < n; i++ {
		l := clampInt(nearestInt(float32(iscale*x[i])), -nmax, nmax-1)
		L[i] = int8(l + nmax)
	}
	return 1 / iscale
}

// ---------------------------------------------------------------- Q2_K

func quantizeQ2_K(x []float32, y []byte) {
	var L [QK_K]uint8
	var Laux [16]uint8
	var weights [16]float32
	var mins, scales [QK_K / 16]float32
	const q4scale = float32(15)
	for i := 0; i*QK_K < len(x); i++ {
		xb := x[i*QK_K : i*QK_K+QK_K]
		yb := y[i*84 : i*84+84]
		sc := yb[0:16]
		var maxScale, maxMin float32
		for j := 0; j < QK_K/16; j++ {
			xs := xb[16*j : 16*j+16]
			for l := 0; l < 16; l++ {
				weights[l] = abs32(xs[l])
			}
			scales[j], mins[j] = makeQKX2Quants(3, xs, weights[:], L[16*j:16*j+16], Laux[:], -0.5, 0.1, 15, true)
			if scales[j] > maxScale {
				maxScale = scales[j]
			}
			if mins[j] > maxMin {
				maxMin = mins[j]
			}
		}
		if maxScale > 0 {
			iscale := q4scale / maxScale
			for j := 0; j < QK_K/16; j++ {
				sc[j] = uint8(nearestInt(float32(iscale * scales[j])))
			}
			putHalf(yb[80:], maxScale/q4scale)
		} else {
			for j := range sc {
				sc[j] = 0
			}
			putHalf(yb[80:], 0)
		}
		if maxMin > 0 {
			iscale := q4scale / maxMin
			for j := 0; j < QK_K/16; j++ {
				l := nearestInt(float32(iscale * mins[j]))
				sc[j] |= uint8(l << 4)
			}
			putHalf(yb[82:], maxMin/q4scale)
		} else {
			putHalf(yb[82:], 0)
		}
		dAll, mAll := half(yb[80:]), half(yb[82:])
		for j := 0; j < QK_K/16; j++ {
			d := float32(dAll * float32(sc[j]&0x0f))
			if d == 0 {
				continue
			}
			dm := float32(mAll * float32(sc[j]>>4))
			for ii := 0; ii < 16; ii++ {
				l := nearestInt((xb[16*j+ii] + dm) / d)
				L[16*j+ii] = uint8(clampInt(l, 0, 3))
			}
		}
		packQ2(yb[16:80], L[:])
	}
}

// packQ2 stores 256 2-bit levels as ggml's q2_K/q3_K qs: byte j/4+l of
// 128-element half j holds levels j+l, j+l+32, j+l+64, j+l+96.
func packQ2(qs []byte, L []uint8) {
	for j := 0; j < QK_K; j += 128 {
		for l := 0; l < 32; l++ {
			qs[j/4+l] = L[j+l] | L[j+l+32]<<2 | L[j+l+64]<<4 | L[j+l+96]<<6
		}
	}
}

// ---------------------------------------------------------------- Q3_K

func quantizeQ3_K(x []float32, y []byte) {
	var L [QK_K]int8
	var scales [QK_K / 16]float32
	for i := 0; i*QK_K < len(x); i++ {
		xb := x[i*QK_K : i*QK_K+QK_K]
		yb := y[i*110 : i*110+110]
		hmask, qs, sc := yb[0:32], yb[32:96], yb[96:108]
		var maxScale, amax float32
		for j := 0; j < QK_K/16; j++ {
			scales[j] = makeQ3Quants(4, xb[16*j:16*j+16], L[16*j:16*j+16], true)
			if s := abs32(scales[j]); s > amax {
				amax, maxScale = s, scales[j]
			}
		}
		for j := range sc {
			sc[j] = 0
		}
		if maxScale != 0 {
			iscale := -32 / maxScale
			for j := 0; j < QK_K/16; j++ {
				l := int(int8(nearestInt(float32(iscale * scales[j]))))
				l = clampInt(l, -32, 31) + 32
				if j < 8 {
					sc[j] = uint8(l & 0xf)
				} else {
					sc[j-8] |= uint8((l & 0xf) << 4)
				}
				l >>= 4
				sc[j%4+8] |= uint8(l << (2 * uint(j/4)))
			}
			putHalf(yb[108:], 1/iscale)
		} else {
			putHalf(yb[108:], 0)
		}
		dAll := half(yb[108:])
		for j := 0; j < QK_K/16; j++ {
			var lo uint8
			if j < 8 {
				lo = sc[j] & 0xf
			} else {
				lo = sc[j-8] >> 4
			}
			s := int(int8(lo|((sc[8+j%4]>>(2*uint(j/4)))&3)<<4)) - 32
			d := float32(dAll * float32(s))
			if d == 0 {
				continue
			}
			for ii := 0; ii < 16; ii++ {
				l := clampInt(nearestInt(xb[16*j+ii]/d), -4, 3)
				L[16*j+ii] = int8(l + 4)
			}
		}
		for j := range hmask {
			hmask[j] = 0
		}
		m, hm := 0, uint8(1)
		var U [QK_K]uint8
		for j := 0; j < QK_K; j++ {
			v := uint8(L[j])
			if L[j] > 3 {
				hmask[m] |= hm
				v -= 4
			}
			U[j] = v
			if m++; m == QK_K/8 {
				m, hm = 0, hm<<1
			}
		}
		packQ2(qs, U[:])
	}
}

// ---------------------------------------------------------------- Q4_K / Q5_K

// kScales runs the shared first half of quantize_row_q{4,5}_K_ref on one
// super-block: per-32 make_qkx2_quants, then the 6-bit packing of scales and
// mins into sc (12 bytes), and returns the fp16 d and dmin it stored.
func kScales(xb []float32, nmax int, rmin float32, nstep int, L *[QK_K]uint8, hdr []byte) {
	var Laux [32]uint8
	var weights [32]float32
	var mins, scales [QK_K / 32]float32
	var maxScale, maxMin float32
	for j := 0; j < QK_K/32; j++ {
		xs := xb[32*j : 32*j+32]
		var sumX2 float32
		for l := 0; l < 32; l++ {
			sumX2 += float32(xs[l] * xs[l])
		}
		avX := sqrt32(sumX2 / 32)
		for l := 0; l < 32; l++ {
			weights[l] = avX + abs32(xs[l])
		}
		scales[j], mins[j] = makeQKX2Quants(nmax, xs, weights[:], L[32*j:32*j+32], Laux[:], rmin, 0.1, nstep, false)
		if scales[j] > maxScale {
			maxScale = scales[j]
		}
		if mins[j] > maxMin {
			maxMin = mins[j]
		}
	}
	var invScale, invMin float32
	if maxScale > 0 {
		invScale = 63 / maxScale
	}
	if maxMin > 0 {
		invMin = 63 / maxMin
	}
	sc := hdr[4:16]
	for j := 0; j < QK_K/32; j++ {
		ls := min(63, uint8(nearestInt(float32(invScale*scales[j]))))
		lm := min(63, uint8(nearestInt(float32(invMin*mins[j]))))
		if j < 4 {
			sc[j] = ls
			sc[j+4] = lm
		} else {
			sc[j+4] = ls&0xf | (lm&0xf)<<4
			sc[j-4] |= (ls >> 4) << 6
			sc[j] |= (lm >> 4) << 6
		}
	}
	putHalf(hdr[0:], maxScale/63)
	putHalf(hdr[2:], maxMin/63)
	dAll, mAll := half(hdr[0:]), half(hdr[2:])
	for j := 0; j < QK_K/32; j++ {
		s, m := scaleMinK4(j, sc)
		d := float32(dAll * float32(s))
		if d == 0 {
			continue
		}
		dm := float32(mAll * float32(m))
		for ii := 0; ii < 32; ii++ {
			l := nearestInt((xb[32*j+ii] + dm) / d)
			L[32*j+ii] = uint8(clampInt(l, 0, nmax))
		}
	}
}

func quantizeQ4_K(x []float32, y []byte) {
	var L [QK_K]uint8
	for i := 0; i*QK_K < len(x); i++ {
		xb := x[i*QK_K : i*QK_K+QK_K]
		yb := y[i*144 : i*144+144]
		kScales(xb, 15, -1, 20, &L, yb)
		q := yb[16:144]
		for j := 0; j < QK_K; j += 64 {
			qq := q[j/2 : j/2+32]
			for l := 0; l < 32; l++ {
				qq[l] = L[j+l] | L[j+l+32]<<4
			}
		}
	}
}

func quantizeQ5_K(x []float32, y []byte) {
	var L [QK_K]uint8
	for i := 0; i*QK_K < len(x); i++ {
		xb := x[i*QK_K : i*QK_K+QK_K]
		yb := y[i*176 : i*176+176]
		kScales(xb, 31, -0.5, 15, &L, yb)
		qh, ql := yb[16:48], yb[48:176]
		for j := range qh {
			qh[j] = 0
		}
		m1, m2 := uint8(1), uint8(2)
		for n := 0; n < QK_K; n += 64 {
			qq := ql[n/2 : n/2+32]
			for j := 0; j < 32; j++ {
				l1 := L[n+j]
				if l1 > 15 {
					l1 -= 16
					qh[j] |= m1
				}
				l2 := L[n+j+32]
				if l2 > 15 {
					l2 -= 16
					qh[j] |= m2
				}
				qq[j] = l1 | l2<<4
			}
			m1 <<= 2
			m2 <<= 2
		}
	}
}

// ---------------------------------------------------------------- Q6_K

func quantizeQ6_K(x []float32, y []byte) {
	var L [QK_K]int8
	var scales [QK_K / 16]float32
	for i := 0; i*QK_K < len(x); i++ {
		xb := x[i*QK_K : i*QK_K+QK_K]
		yb := y[i*210 : i*210+210]
		var maxScale, maxAbsScale float32
		for ib := 0; ib < QK_K/16; ib++ {
			scale := makeQXQuants(32, xb[16*ib:16*ib+16], L[16*ib:16*ib+16], 1, nil)
			scales[ib] = scale
			if a := abs32(scale); a > maxAbsScale {
				maxAbsScale, maxScale = a, scale
			}
		}
		if maxAbsScale < groupMaxEps {
			for j := range yb {
				yb[j] = 0
			}
			continue
		}
		sc := yb[192:208]
		iscale := -128 / maxScale
		putHalf(yb[208:], 1/iscale)
		for ib := 0; ib < QK_K/16; ib++ {
			sc[ib] = uint8(int8(min(127, nearestInt(float32(iscale*scales[ib])))))
		}
		dAll := half(yb[208:])
		for j := 0; j < QK_K/16; j++ {
			d := float32(dAll * float32(int8(sc[j])))
			if d == 0 {
				continue
			}
			for ii := 0; ii < 16; ii++ {
				l := clampInt(nearestInt(xb[16*j+ii]/d), -32, 31)
				L[16*j+ii] = int8(l + 32)
			}
		}
		for n := 0; n < 2; n++ {
			ql := yb[64*n : 64*n+64]
			qh := yb[128+32*n : 128+32*n+32]
			Lh := L[128*n : 128*n+128]
			for l := 0; l < 32; l++ {
				q1 := uint8(Lh[l]) & 0xf
				q2 := uint8(Lh[l+32]) & 0xf
				q3 := uint8(Lh[l+64]) & 0xf
				q4 := uint8(Lh[l+96]) & 0xf
				ql[l] = q1 | q3<<4
				ql[l+32] = q2 | q4<<4
				qh[l] = uint8(Lh[l])>>4 | (uint8(Lh[l+32])>>4)<<2 | (uint8(Lh[l+64])>>4)<<4 | (uint8(Lh[l+96])>>4)<<6
			}
		}
	}
}

// ---------------------------------------------------------------- Q8_K

// quantizeQ8_K is quantize_row_q8_K_ref: d = 1/(-127/max) where max is the
// signed element of largest magnitude (so d < 0 when that element is
// positive), qs = min(127, nearest_int(x*(-127/max))), bsums = sums of 16.
// An all-zero block gets d = 0, qs = 0 and (unlike ggml, which leaves them
// untouched) bsums = 0.
func quantizeQ8_K(x []float32, y []byte) {
	for i := 0; i*QK_K < len(x); i++ {
		xb := x[i*QK_K : i*QK_K+QK_K]
		yb := y[i*292 : i*292+292]
		amax, max := absMaxSigned(xb)
		if amax == 0 {
			for j := range yb {
				yb[j] = 0
			}
			continue
		}
		iscale := -127 / max
		qs := yb[4:260]
		for j, v := range xb {
			qs[j] = uint8(int8(min(127, nearestInt(float32(iscale*v)))))
		}
		for j := 0; j < QK_K/16; j++ {
			sum := 0
			for _, q := range qs[16*j : 16*j+16] {
				sum += int(int8(q))
			}
			binary.LittleEndian.PutUint16(yb[260+2*j:], uint16(int16(sum)))
		}
		binary.LittleEndian.PutUint32(yb, math.Float32bits(1/iscale))
	}
}
