package quant

import "math"

// FP16ToFP32 converts an IEEE binary16 value to float32 exactly, as ggml's
// ggml_compute_fp16_to_fp32. The conversion is exact for every finite value,
// infinity and subnormal; a NaN keeps sign and payload and comes out quiet
// (as the multiply in ggml's version makes it on x86 and arm).
func FP16ToFP32(h uint16) float32 {
	return math.Float32frombits(fp16Bits(h))
}

func fp16Bits(h uint16) uint32 {
	sign := uint32(h&0x8000) << 16
	exp := uint32(h>>10) & 0x1f
	mant := uint32(h & 0x3ff)
	switch {
	case exp == 0x1f: // Inf or NaN
		if mant != 0 {
			return sign | 0x7fc00000 | mant<<13
		}
		return sign | 0x7f800000
	case exp != 0: // normal
		return sign | (exp+112)<<23 | mant<<13
	case mant == 0: // signed zero
		return sign
	default: // subnormal: mant * 2^-24, normalised
		e := uint32(113) // exponent of 2^-14 as float32 biased exponent
		for mant&0x400 == 0 {
			mant <<= 1
			e--
		}
		return sign | e<<23 | (mant&0x3ff)<<13
	}
}

// FP32ToFP16 converts f to IEEE binary16 with round-to-nearest-even, as
// ggml_compute_fp32_to_fp16: values too large become ±Inf, tiny ones round to
// subnormals or ±0, and every NaN becomes 0x7E00 with f's sign.
func FP32ToFP16(f float32) uint16 {
	const scaleToInf = float32(0x1.0p+112)
	const scaleToZero = float32(0x1.0p-110)
	// Each product is rounded to float32 on its own (explicit conversions
	// forbid fusing them with the addition below).
	base := float32(float32(abs32(f)*scaleToInf) * scaleToZero)

	w := math.Float32bits(f)
	shl1w := w + w
	sign := w & 0x80000000
	bias := shl1w & 0xff000000
	if bias < 0x71000000 {
		bias = 0x71000000
	}
	base = math.Float32frombits(bias>>1+0x07800000) + base
	bits := math.Float32bits(base)
	expBits := (bits >> 13) & 0x00007c00
	mantBits := bits & 0x00000fff
	nonsign := expBits + mantBits
	if shl1w > 0xff000000 {
		return uint16(sign>>16) | 0x7e00
	}
	return uint16(sign>>16) | uint16(nonsign)
}

// BF16ToFP32 converts a bfloat16 value to float32 exactly (the high half of
// the float32 bit pattern), as ggml_compute_bf16_to_fp32.
func BF16ToFP32(h uint16) float32 { return math.Float32frombits(uint32(h) << 16) }

// FP32ToBF16 converts f to bfloat16 as ggml_compute_fp32_to_bf16: round to
// nearest even; a NaN is truncated and forced quiet (bit 6 of the result).
func FP32ToBF16(f float32) uint16 {
	u := math.Float32bits(f)
	if u&0x7fffffff > 0x7f800000 {
		return uint16(u>>16) | 64
	}
	return uint16((u + (0x7fff + ((u >> 16) & 1))) >> 16)
}

// E8M0ToFP32Half decodes an MXFP4 block exponent as ggml_e8m0_to_fp32_half:
// 2^(e-128) (half the E8M0 value, because kvalues_mxfp4 holds doubled E2M1
// values). e = 0 and 1 give the subnormals 2^-128 and 2^-127; e = 255 gives
// 2^127 (ggml does not special-case NaN).
func E8M0ToFP32Half(e uint8) float32 {
	if e < 2 {
		return math.Float32frombits(0x00200000 << e)
	}
	return math.Float32frombits(uint32(e-1) << 23)
}

func abs32(f float32) float32 { return math.Float32frombits(math.Float32bits(f) &^ 0x80000000) }
