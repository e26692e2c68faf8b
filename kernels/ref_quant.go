package kernels

import (
	"math"

	"github.com/pipe-engine/pipe/quant"
)

// Reference activation quantizers: transcriptions of llama.cpp's
// quantize_row_q8_0_ref, quantize_row_q8_1_ref and quantize_row_q8_K_ref
// (ggml/src/ggml-quants.c). float32(...) conversions keep every operation
// rounded to float32 on its own (no fusion). The FP16/BF16 conversions and
// the MXFP4 code values are package quant's.

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
		d[b] = quant.FP16ToFP32(quant.FP32ToFP16(dd))
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
		d[b] = quant.FP16ToFP32(quant.FP32ToFP16(dd))
		q := qs[b*32 : b*32+32]
		sum := 0
		for j, v := range xb {
			q[j] = roundf(float32(v * id))
			sum += int(q[j])
		}
		s[b] = quant.FP16ToFP32(quant.FP32ToFP16(float32(float32(sum) * dd)))
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
