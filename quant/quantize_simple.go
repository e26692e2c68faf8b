package quant

import (
	"encoding/binary"
	"math"
)

// This file holds the quantizers of the 32-element block types and the
// float conversions: quantize_row_{q4_0,q4_1,q5_0,q5_1,q8_0,mxfp4}_ref and
// ggml_fp32_to_{fp16,bf16}_row.

func init() {
	quantizers[F32] = quantizeF32
	quantizers[F16] = quantizeF16
	quantizers[BF16] = quantizeBF16
	quantizers[Q4_0] = quantizeQ4_0
	quantizers[Q4_1] = quantizeQ4_1
	quantizers[Q5_0] = quantizeQ5_0
	quantizers[Q5_1] = quantizeQ5_1
	quantizers[Q8_0] = quantizeQ8_0
	quantizers[MXFP4] = quantizeMXFP4
}

func putHalf(b []byte, f float32) { binary.LittleEndian.PutUint16(b, FP32ToFP16(f)) }

func quantizeF32(x []float32, y []byte) {
	for i, v := range x {
		binary.LittleEndian.PutUint32(y[4*i:], math.Float32bits(v))
	}
}

func quantizeF16(x []float32, y []byte) {
	for i, v := range x {
		binary.LittleEndian.PutUint16(y[2*i:], FP32ToFP16(v))
	}
}

func quantizeBF16(x []float32, y []byte) {
	for i, v := range x {
		binary.LittleEndian.PutUint16(y[2*i:], FP32ToBF16(v))
	}
}

// absMaxSigned returns the largest |v| and the first v reaching it (ggml's
// "amax < fabsf(v)" scan, which keeps the earliest maximum).
func absMaxSigned(x []float32) (amax, max float32) {
	for _, v := range x {
		if a := abs32(v); amax < a {
			amax, max = a, v
		}
	}
	return amax, max
}

// truncInt8 is C's (int8_t)(float) conversion for in-range values: truncation
// toward zero. Out-of-range inputs (only reachable with Inf/NaN data) give an
// implementation-defined but panic-free result, as in C.
func truncInt8(f float32) int { return int(int8(int32(f))) }

func quantizeQ4_0(x []float32, y []byte) {
	for i := 0; i*32 < len(x); i++ {
		xb := x[i*32 : i*32+32]
		yb := y[i*18 : i*18+18]
		_, max := absMaxSigned(xb)
		d := max / -8
		var id float32
		if d != 0 {
			id = 1 / d
		}
		putHalf(yb, d)
		for j := 0; j < 16; j++ {
			x0 := float32(xb[j] * id)
			x1 := float32(xb[16+j] * id)
			xi0 := min(15, truncInt8(x0+8.5))
			xi1 := min(15, truncInt8(x1+8.5))
			yb[2+j] = uint8(xi0) | uint8(xi1)<<4
		}
	}
}

func minMax(x []float32) (lo, hi float32) {
	lo, hi = math.MaxFloat32, -math.MaxFloat32
	for _, v := range x {
		if v < lo {
			lo = v
		}
		if v > hi {
			hi = v
		}
	}
	return lo, hi
}

func quantizeQ4_1(x []float32, y []byte) {
	for i := 0; i*32 < len(x); i++ {
		xb := x[i*32 : i*32+32]
		yb := y[i*20 : i*20+20]
		lo, hi := minMax(xb)
		d := (hi - lo) / 15
		var id float32
		if d != 0 {
			id = 1 / d
		}
		putHalf(yb, d)
		putHalf(yb[2:], lo)
		for j := 0; j < 16; j++ {
			x0 := float32((xb[j] - lo) * id)
			x1 := float32((xb[16+j] - lo) * id)
			xi0 := min(15, truncInt8(x0+0.5))
			xi1 := min(15, truncInt8(x1+0.5))
			yb[4+j] = uint8(xi0) | uint8(xi1)<<4
		}
	}
}

func quantizeQ5_0(x []float32, y []byte) {
	for i := 0; i*32 < len(x); i++ {
		xb := x[i*32 : i*32+32]
		yb := y[i*22 : i*22+22]
		_, max := absMaxSigned(xb)
		d := max / -16
		var id float32
		if d != 0 {
			id = 1 / d
		}
		putHalf(yb, d)
		var qh uint32
		for j := 0; j < 16; j++ {
			x0 := float32(xb[j] * id)
			x1 := float32(xb[16+j] * id)
			xi0 := uint8(min(31, truncInt8(x0+16.5)))
			xi1 := uint8(min(31, truncInt8(x1+16.5)))
			yb[6+j] = xi0&0x0f | (xi1&0x0f)<<4
			qh |= uint32(xi0&0x10) >> 4 << uint(j)
			qh |= uint32(xi1&0x10) >> 4 << uint(j+16)
		}
		binary.LittleEndian.PutUint32(yb[2:], qh)
	}
}

func quantizeQ5_1(x []float32, y []byte) {
	for i := 0; i*32 < len(x); i++ {
		xb := x[i*32 : i*32+32]
		yb := y[i*24 : i*24+24]
		lo, hi := minMax(xb)
		d := (hi - lo) / 31
		var id float32
		if d != 0 {
			id = 1 / d
		}
		putHalf(yb, d)
		putHalf(yb[2:], lo)
		var qh uint32
		for j := 0; j < 16; j++ {
			x0 := float32((xb[j] - lo) * id)
			x1 := float32((xb[16+j] - lo) * id)
			// C: (uint8_t)(x0 + 0.5f); in range for finite input.
			xi0 := uint8(int32(x0 + 0.5))
			xi1 := uint8(int32(x1 + 0.5))
			yb[8+j] = xi0&0x0f | (xi1&0x0f)<<4
			qh |= uint32(xi0&0x10) >> 4 << uint(j)
			qh |= uint32(xi1&0x10) >> 4 << uint(j+16)
		}
		binary.LittleEndian.PutUint32(yb[4:], qh)
	}
}

func quantizeQ8_0(x []float32, y []byte) {
	for i := 0; i*32 < len(x); i++ {
		xb := x[i*32 : i*32+32]
		yb := y[i*34 : i*34+34]
		var amax float32
		for _, v := range xb {
			// MAX(amax, fabsf(v)) = (amax > a) ? amax : a
			if a := abs32(v); !(amax > a) {
				amax = a
			}
		}
		d := amax / 127
		var id float32
		if d != 0 {
			id = 1 / d
		}
		putHalf(yb, d)
		qs := yb[2:34]
		for j, v := range xb {
			// roundf: half away from zero; exact for a float32 in float64.
			qs[j] = uint8(int8(int32(math.Round(float64(float32(v * id))))))
		}
	}
}

// bestIndexMXFP4 is ggml's best_index_mxfp4: the code i whose value
// kvalues_mxfp4[i]*e is nearest to x, the lowest index on ties. pos holds
// float32(kvalues_mxfp4[i]*e) for i = 0..7 (the codes >= 0, ascending).
//
// ggml scans all 16 codes; this scan is equivalent and cheaper: for x >= 0 a
// code of opposite sign is never strictly nearer than code 0 (its error
// rounds to at least x), and once a candidate reaches |x| the later, larger
// ones cannot be strictly nearer (rounding is monotonic). A negative x mirrors
// onto codes 8+i, which carry the negated values in the same order, with code
// 0 (not 8) kept on ties exactly as in ggml's order 0, 8, 9, ... .
func bestIndexMXFP4(x float32, pos *[8]float32) uint8 {
	a := x
	neg := !(x >= 0) // NaN lands here and, like in ggml, yields code 0
	if neg {
		a = -x
	}
	best := 0
	bestErr := abs32(pos[0] - a)
	if !(pos[0] >= a) {
		for i := 1; i < 8; i++ {
			err := abs32(pos[i] - a)
			if err < bestErr {
				best, bestErr = i, err
			}
			if pos[i] >= a {
				break
			}
		}
	}
	if neg && best != 0 {
		best += 8
	}
	return uint8(best)
}

// log2Floor is floorf(log2f(a)) for a > 0, with log2f rounded to float32 as
// glibc's correctly-rounded-in-practice log2f (a value just below a power of
// two whose log rounds up to the integer counts as that power).
func log2Floor(a float32) float32 {
	return float32(math.Floor(float64(float32(math.Log2(float64(a))))))
}

func quantizeMXFP4(x []float32, y []byte) {
	for i := 0; i*32 < len(x); i++ {
		xb := x[i*32 : i*32+32]
		yb := y[i*17 : i*17+17]
		amax, _ := absMaxSigned(xb)
		var e uint8
		if amax > 0 {
			// (uint8_t)(floorf(log2f(amax)) - 2 + 127)
			e = uint8(int32(log2Floor(amax) - 2 + 127))
		}
		d := E8M0ToFP32Half(e)
		yb[0] = e
		var pos [8]float32
		for k := range pos {
			pos[k] = float32(KValuesMXFP4[k]) * d
		}
		for j := 0; j < 16; j++ {
			x0 := bestIndexMXFP4(xb[j], &pos)
			x1 := bestIndexMXFP4(xb[16+j], &pos)
			yb[1+j] = x0 | x1<<4
		}
	}
}
