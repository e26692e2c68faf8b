package quant

import (
	"encoding/binary"
	"errors"
	"fmt"
	"math"
)

// Sentinel errors; callers match them with errors.Is.
var (
	// ErrUnsupported: the type has no dequantizer / quantizer here.
	ErrUnsupported = errors.New("quant: unsupported type")
	// ErrLength: a buffer length does not fit the type's block layout.
	ErrLength = errors.New("quant: bad buffer length")
)

// QK_K is the number of elements of a K-quant super-block.
const QK_K = 256

// KValuesMXFP4 is ggml's kvalues_mxfp4: the E2M1 code points doubled, indexed
// by the 4-bit code (bit 3 is the sign).
var KValuesMXFP4 = [16]int8{0, 1, 2, 3, 4, 6, 8, 12, 0, -1, -2, -3, -4, -6, -8, -12}

// CanDequantize reports whether Dequantize supports t.
func CanDequantize(t Type) bool {
	switch t {
	case F32, F16, BF16, Q4_0, Q4_1, Q5_0, Q5_1, Q8_0, Q2_K, Q3_K, Q4_K, Q5_K, Q6_K, Q8_K, MXFP4:
		return true
	}
	return false
}

// checkLengths validates that n elements of t need exactly nbytes bytes and
// returns the block count.
func checkLengths(op string, t Type, nbytes, n int) (int, error) {
	tr, ok := traits[t]
	if !ok {
		return 0, fmt.Errorf("quant: %s: %w %d", op, ErrUnknownType, uint32(t))
	}
	if n%tr.BlockSize != 0 {
		return 0, fmt.Errorf("quant: %s %s: %d elements is not a multiple of the block size %d: %w", op, tr.Name, n, tr.BlockSize, ErrLength)
	}
	nb := n / tr.BlockSize
	if nbytes != nb*tr.TypeSize {
		return 0, fmt.Errorf("quant: %s %s: %d elements need %d bytes, buffer has %d: %w", op, tr.Name, n, nb*tr.TypeSize, nbytes, ErrLength)
	}
	return nb, nil
}

// Dequantize converts src, a whole number of blocks of type t, into dst.
// len(dst) must be a multiple of t's block size and len(src) must equal
// t.RowSize(len(dst)). The result equals ggml's dequantize_row_* bit for bit.
func Dequantize(t Type, src []byte, dst []float32) error {
	if !CanDequantize(t) {
		if !t.Known() {
			return fmt.Errorf("quant: dequantize: %w %d", ErrUnknownType, uint32(t))
		}
		return fmt.Errorf("quant: dequantize %s: %w", t, ErrUnsupported)
	}
	nb, err := checkLengths("dequantize", t, len(src), len(dst))
	if err != nil {
		return err
	}
	switch t {
	case F32:
		for i := range dst {
			dst[i] = math.Float32frombits(binary.LittleEndian.Uint32(src[4*i:]))
		}
	case F16:
		for i := range dst {
			dst[i] = FP16ToFP32(binary.LittleEndian.Uint16(src[2*i:]))
		}
	case BF16:
		for i := range dst {
			dst[i] = BF16ToFP32(binary.LittleEndian.Uint16(src[2*i:]))
		}
	case Q4_0:
		for i := 0; i < nb; i++ {
			dequantQ4_0(src[i*18:i*18+18], dst[i*32:i*32+32])
		}
	case Q4_1:
		for i := 0; i < nb; i++ {
			dequantQ4_1(src[i*20:i*20+20], dst[i*32:i*32+32])
		}
	case Q5_0:
		for i := 0; i < nb; i++ {
			dequantQ5_0(src[i*22:i*22+22], dst[i*32:i*32+32])
		}
	case Q5_1:
		for i := 0; i < nb; i++ {
			dequantQ5_1(src[i*24:i*24+24], dst[i*32:i*32+32])
		}
	case Q8_0:
		for i := 0; i < nb; i++ {
			dequantQ8_0(src[i*34:i*34+34], dst[i*32:i*32+32])
		}
	case MXFP4:
		for i := 0; i < nb; i++ {
			dequantMXFP4(src[i*17:i*17+17], dst[i*32:i*32+32])
		}
	case Q2_K:
		for i := 0; i < nb; i++ {
			dequantQ2_K(src[i*84:i*84+84], dst[i*QK_K:i*QK_K+QK_K])
		}
	case Q3_K:
		for i := 0; i < nb; i++ {
			dequantQ3_K(src[i*110:i*110+110], dst[i*QK_K:i*QK_K+QK_K])
		}
	case Q4_K:
		for i := 0; i < nb; i++ {
			dequantQ4_K(src[i*144:i*144+144], dst[i*QK_K:i*QK_K+QK_K])
		}
	case Q5_K:
		for i := 0; i < nb; i++ {
			dequantQ5_K(src[i*176:i*176+176], dst[i*QK_K:i*QK_K+QK_K])
		}
	case Q6_K:
		for i := 0; i < nb; i++ {
			dequantQ6_K(src[i*210:i*210+210], dst[i*QK_K:i*QK_K+QK_K])
		}
	case Q8_K:
		for i := 0; i < nb; i++ {
			dequantQ8_K(src[i*292:i*292+292], dst[i*QK_K:i*QK_K+QK_K])
		}
	}
	return nil
}

func half(b []byte) float32 { return FP16ToFP32(uint16(b[0]) | uint16(b[1])<<8) }

// Block layouts (ggml-common.h), offsets in bytes:
//   q4_0  {d f16; qs[16]}                    q4_1 {d, m f16; qs[16]}
//   q5_0  {d f16; qh[4]; qs[16]}             q5_1 {d, m f16; qh[4]; qs[16]}
//   q8_0  {d f16; qs int8[32]}               mxfp4 {e u8; qs[16]}
//   q2_K  {scales[16]; qs[64]; d, dmin f16}  q3_K {hmask[32]; qs[64]; scales[12]; d f16}
//   q4_K  {d, dmin f16; scales[12]; qs[128]} q5_K {d, dmin f16; scales[12]; qh[32]; qs[128]}
//   q6_K  {ql[128]; qh[64]; scales int8[16]; d f16}
//   q8_K  {d f32; qs int8[256]; bsums int16[16]}

func dequantQ4_0(b []byte, y []float32) {
	_ = b[17]
	_ = y[31]
	d := half(b)
	qs := b[2:18]
	for j := 0; j < 16; j++ {
		y[j] = float32(int(qs[j]&0x0f)-8) * d
		y[j+16] = float32(int(qs[j]>>4)-8) * d
	}
}

func dequantQ4_1(b []byte, y []float32) {
	_ = b[19]
	_ = y[31]
	d, m := half(b), half(b[2:])
	qs := b[4:20]
	for j := 0; j < 16; j++ {
		y[j] = float32(float32(qs[j]&0x0f)*d) + m
		y[j+16] = float32(float32(qs[j]>>4)*d) + m
	}
}

func dequantQ5_0(b []byte, y []float32) {
	_ = b[21]
	_ = y[31]
	d := half(b)
	qh := binary.LittleEndian.Uint32(b[2:])
	qs := b[6:22]
	for j := 0; j < 16; j++ {
		xh0 := byte((qh>>uint(j))<<4) & 0x10
		xh1 := byte(qh>>uint(j+12)) & 0x10
		y[j] = float32(int32(qs[j]&0x0f|xh0)-16) * d
		y[j+16] = float32(int32(qs[j]>>4|xh1)-16) * d
	}
}

func dequantQ5_1(b []byte, y []float32) {
	_ = b[23]
	_ = y[31]
	d, m := half(b), half(b[2:])
	qh := binary.LittleEndian.Uint32(b[4:])
	qs := b[8:24]
	for j := 0; j < 16; j++ {
		xh0 := byte((qh>>uint(j))<<4) & 0x10
		xh1 := byte(qh>>uint(j+12)) & 0x10
		y[j] = float32(float32(qs[j]&0x0f|xh0)*d) + m
		y[j+16] = float32(float32(qs[j]>>4|xh1)*d) + m
	}
}

func dequantQ8_0(b []byte, y []float32) {
	_ = b[33]
	_ = y[31]
	d := half(b)
	qs := b[2:34]
	for j := 0; j < 32; j++ {
		y[j] = float32(int8(qs[j])) * d
	}
}

func dequantMXFP4(b []byte, y []float32) {
	_ = b[16]
	_ = y[31]
	d := E8M0ToFP32Half(b[0])
	qs := b[1:17]
	for j := 0; j < 16; j++ {
		y[j] = float32(KValuesMXFP4[qs[j]&0x0f]) * d
		y[j+16] = float32(KValuesMXFP4[qs[j]>>4]) * d
	}
}

func dequantQ2_K(b []byte, y []float32) {
	_ = b[83]
	_ = y[255]
	scales := b[0:16]
	q := b[16:80]
	d, min := half(b[80:]), half(b[82:])
	is := 0
	for n := 0; n < QK_K; n += 128 {
		qq := q[n/4 : n/4+32]
		shift := uint(0)
		for j := 0; j < 4; j++ {
			sc := scales[is]
			is++
			dl, ml := float32(d*float32(sc&0x0f)), float32(min*float32(sc>>4))
			out := y[n+32*j : n+32*j+32]
			for l := 0; l < 16; l++ {
				out[l] = float32(dl*float32((qq[l]>>shift)&3)) - ml
			}
			sc = scales[is]
			is++
			dl, ml = float32(d*float32(sc&0x0f)), float32(min*float32(sc>>4))
			for l := 0; l < 16; l++ {
				out[16+l] = float32(dl*float32((qq[l+16]>>shift)&3)) - ml
			}
			shift += 2
		}
	}
}

// q3KScales unpacks the sixteen 6-bit Q3_K scales (still biased by 32), as
// dequantize_row_q3_K's kmask shuffle.
func q3KScales(s []byte, out *[16]int8) {
	_ = s[11]
	for j := 0; j < 16; j++ {
		var lo byte
		if j < 8 {
			lo = s[j] & 0x0f
		} else {
			lo = s[j-8] >> 4
		}
		hi := (s[8+j%4] >> (2 * uint(j/4))) & 3
		out[j] = int8(lo | hi<<4)
	}
}

func dequantQ3_K(b []byte, y []float32) {
	_ = b[109]
	_ = y[255]
	hm := b[0:32]
	q := b[32:96]
	var scales [16]int8
	q3KScales(b[96:108], &scales)
	dAll := half(b[108:])
	is := 0
	m := byte(1)
	for n := 0; n < QK_K; n += 128 {
		qq := q[n/4 : n/4+32]
		shift := uint(0)
		for j := 0; j < 4; j++ {
			out := y[n+32*j : n+32*j+32]
			dl := dAll * float32(int(scales[is])-32)
			is++
			for l := 0; l < 16; l++ {
				v := int((qq[l] >> shift) & 3)
				if hm[l]&m == 0 {
					v -= 4
				}
				out[l] = dl * float32(v)
			}
			dl = dAll * float32(int(scales[is])-32)
			is++
			for l := 0; l < 16; l++ {
				v := int((qq[l+16] >> shift) & 3)
				if hm[l+16]&m == 0 {
					v -= 4
				}
				out[16+l] = dl * float32(v)
			}
			shift += 2
			m <<= 1
		}
	}
}

// scaleMinK4 is ggml's get_scale_min_k4: the 6-bit scale and min of
// sub-block j from the 12 packed bytes of a Q4_K / Q5_K block.
func scaleMinK4(j int, q []byte) (sc, m uint8) {
	_ = q[11]
	if j < 4 {
		return q[j] & 63, q[j+4] & 63
	}
	return (q[j+4] & 0x0f) | ((q[j-4] >> 6) << 4), (q[j+4] >> 4) | ((q[j] >> 6) << 4)
}

func dequantQ4_K(b []byte, y []float32) {
	_ = b[143]
	_ = y[255]
	d, min := half(b), half(b[2:])
	scales := b[4:16]
	q := b[16:144]
	is := 0
	for j := 0; j < QK_K; j += 64 {
		sc, m := scaleMinK4(is, scales)
		d1, m1 := float32(d*float32(sc)), float32(min*float32(m))
		sc, m = scaleMinK4(is+1, scales)
		d2, m2 := float32(d*float32(sc)), float32(min*float32(m))
		qq := q[j/2 : j/2+32]
		out := y[j : j+64]
		for l := 0; l < 32; l++ {
			out[l] = float32(d1*float32(qq[l]&0x0f)) - m1
			out[l+32] = float32(d2*float32(qq[l]>>4)) - m2
		}
		is += 2
	}
}

func dequantQ5_K(b []byte, y []float32) {
	_ = b[175]
	_ = y[255]
	d, min := half(b), half(b[2:])
	scales := b[4:16]
	qh := b[16:48]
	ql := b[48:176]
	is := 0
	u1, u2 := byte(1), byte(2)
	for j := 0; j < QK_K; j += 64 {
		sc, m := scaleMinK4(is, scales)
		d1, m1 := float32(d*float32(sc)), float32(min*float32(m))
		sc, m = scaleMinK4(is+1, scales)
		d2, m2 := float32(d*float32(sc)), float32(min*float32(m))
		qq := ql[j/2 : j/2+32]
		out := y[j : j+64]
		for l := 0; l < 32; l++ {
			v1 := int(qq[l] & 0x0f)
			if qh[l]&u1 != 0 {
				v1 += 16
			}
			v2 := int(qq[l] >> 4)
			if qh[l]&u2 != 0 {
				v2 += 16
			}
			out[l] = float32(d1*float32(v1)) - m1
			out[l+32] = float32(d2*float32(v2)) - m2
		}
		is += 2
		u1 <<= 2
		u2 <<= 2
	}
}

func dequantQ6_K(b []byte, y []float32) {
	_ = b[209]
	_ = y[255]
	d := half(b[208:])
	for n := 0; n < 2; n++ {
		ql := b[64*n : 64*n+64]
		qh := b[128+32*n : 128+32*n+32]
		sc := b[192+8*n : 192+8*n+8]
		out := y[128*n : 128*n+128]
		for l := 0; l < 32; l++ {
			is := l / 16
			q1 := int(ql[l]&0x0f|((qh[l]>>0)&3)<<4) - 32
			q2 := int(ql[l+32]&0x0f|((qh[l]>>2)&3)<<4) - 32
			q3 := int(ql[l]>>4|((qh[l]>>4)&3)<<4) - 32
			q4 := int(ql[l+32]>>4|((qh[l]>>6)&3)<<4) - 32
			out[l] = float32(d*float32(int8(sc[is]))) * float32(q1)
			out[l+32] = float32(d*float32(int8(sc[is+2]))) * float32(q2)
			out[l+64] = float32(d*float32(int8(sc[is+4]))) * float32(q3)
			out[l+96] = float32(d*float32(int8(sc[is+6]))) * float32(q4)
		}
	}
}

func dequantQ8_K(b []byte, y []float32) {
	_ = b[291]
	_ = y[255]
	d := math.Float32frombits(binary.LittleEndian.Uint32(b))
	qs := b[4:260]
	for j := 0; j < QK_K; j++ {
		y[j] = d * float32(int8(qs[j]))
	}
}
