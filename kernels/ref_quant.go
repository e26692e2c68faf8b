package kernels

import "math"

// Reference activation quantizers: transcriptions of llama.cpp's
// quantize_row_q8_0_ref, quantize_row_q8_1_ref and quantize_row_q8_K_ref
// (ggml/src/ggml-quants.c), plus the scalar FP16/BF16 conversions of
// ggml-impl.h. float32(...) conversions keep every operation rounded to
// float32 on its own (no fusion).

// fp16ToFP32 converts IEEE half bits to float32 (exact).
func fp16ToFP32(h uint16) float32 {
	sign := uint32(h&0x8000) << 16
	exp := uint32(h>>10) & 0x1f
	man := uint32(h & 0x3ff)
	switch {
	case exp == 0x1f: // inf / nan
		return math.Float32frombits(sign | 0x7f800000 | man<<13)
	case exp != 0:
		return math.Float32frombits(sign | (exp+112)<<23 | man<<13)
	case man == 0:
		return math.Float32frombits(sign)
	}
	// subnormal: man * 2^-24
	v := float32(man) * (1.0 / (1 << 24))
	if sign != 0 {
		v = -v
	}
	return v
}

// fp32ToFP16 converts float32 to IEEE half with round-to-nearest-even
// (ggml_compute_fp32_to_fp16; NaN becomes 0x7e00 with the sign kept).
func fp32ToFP16(f float32) uint16 {
	const scaleToInf = float32(0x1.0p+112)
	const scaleToZero = float32(0x1.0p-110)
	base := float32(float32(abs32(f)*scaleToInf) * scaleToZero)
	w := math.Float32bits(f)
	shl1w := w + w
	sign := w & 0x80000000
	bias := shl1w & 0xff000000
	if bias < 0x71000000 {
		bias = 0x71000000
	}
	base = float32(math.Float32frombits((bias>>1)+0x07800000) + base)
	bits := math.Float32bits(base)
	expBits := (bits >> 13) & 0x00007c00
	manBits := bits & 0x00000fff
	nonsign := expBits + manBits
	if shl1w > 0xff000000 {
		nonsign = 0x7e00
	}
	return uint16(sign>>16) | uint16(nonsign)
}

// fp32ToBF16 is ggml_compute_fp32_to_bf16 (round to nearest even, NaN quieted).
func fp32ToBF16(f float32) uint16 {
	u := math.Float32bits(f)
	if u&0x7fffffff > 0x7f800000 {
		return uint16(u>>16) | 64
	}
	return uint16((u + (0x7fff + ((u >> 16) & 1))) >> 16)
}

func bf16ToFP32(h uint16) float32 { return math.Float32frombits(uint32(h) << 16) }

func abs32(f float32) float32 { return math.Float32frombits(math.Float32bits(f) &^ (1 << 31)) }

// roundf is C's roundf: nearest, ties away from zero.
func roundf(v float32) int8 { return int8(math.Round(float64(v))) }

// e8m0Half is GGML_E8M0_TO_FP32_HALF: 2^(e-128) as float32.
func e8m0Half(e uint8) float32 {
	if e < 2 {
		return math.Float32frombits(0x00200000 << e)
	}
	return math.Float32frombits(uint32(e-1) << 23)
}

// refQuantQ8_0 is quantize_row_q8_0_ref; d receives fp16(d) as float32.
func refQuantQ8_0(x []float32, qs []int8, d []float32) {
	for b := range d {
		xb := x[b*32 : b*32+32]
		var amax float32
		for _, v := range xb {
			amax = max32(amax, abs32(v))
		}
		dd := amax / 127
		var id float32
		if dd != 0 {
			id = 1 / dd
		}
		d[b] = fp16ToFP32(fp32ToFP16(dd))
		q := qs[b*32 : b*32+32]
		for j, v := range xb {
			q[j] = roundf(float32(v * id))
		}
	}
}

// max32 is C's MAX(a, b) = a > b ? a : b.
func max32(a, b float32) float32 {
	if a > b {
		return a
	}
	return b
}

// refQuantQ8_1 is quantize_row_q8_1_ref; s receives fp16(sum*d) as float32.
func refQuantQ8_1(x []float32, qs []int8, d, s []float32) {
	for b := range d {
		xb := x[b*32 : b*32+32]
		var amax float32
		for _, v := range xb {
			amax = max32(amax, abs32(v))
		}
		dd := amax / 127
		var id float32
		if dd != 0 {
			id = 1 / dd
		}
		d[b] = fp16ToFP32(fp32ToFP16(dd))
		q := qs[b*32 : b*32+32]
		sum := 0
		for j, v := range xb {
			q[j] = roundf(float32(v * id))
			sum += int(q[j])
		}
		s[b] = fp16ToFP32(fp32ToFP16(float32(float32(sum) * dd)))
	}
}

// nearestInt is ggml's nearest_int: round to nearest even via the
// 1.5·2^23 trick (valid for |v| < 2^22).
func nearestInt(v float32) int32 {
	f := float32(v + 12582912)
	return int32(math.Float32bits(f)&0x007fffff) - 0x00400000
}

// refQuantQ8_K is quantize_row_q8_K_ref; all-zero blocks get zero bsums too.
func refQuantQ8_K(x []float32, qs []int8, d []float32, bsums []int16) {
	for b := range d {
		xb := x[b*256 : b*256+256]
		q := qs[b*256 : b*256+256]
		var amax, mx float32
		for _, v := range xb {
			if av := abs32(v); av > amax {
				amax, mx = av, v
			}
		}
		if amax == 0 {
			d[b] = 0
			clear(q)
			clear(bsums[b*16 : b*16+16])
			continue
		}
		iscale := -127 / mx
		for j, v := range xb {
			q[j] = int8(min(127, nearestInt(float32(iscale*v))))
		}
		for j := 0; j < 16; j++ {
			sum := 0
			for _, v := range q[j*16 : j*16+16] {
				sum += int(v)
			}
			bsums[b*16+j] = int16(sum)
		}
		d[b] = 1 / iscale
	}
}
