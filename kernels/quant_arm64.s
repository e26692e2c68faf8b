//go:build arm64 && !purego

#include "textflag.h"
#include "neon_arm64.h"

// NEON activation quantizers, bit-identical to refQuantQ8_0 / refQuantQ8_K
// (llama.cpp's quantize_row_q8_0_ref / quantize_row_q8_K_ref). The scalar
// steps (the block scale, its inverse, the fp16 rounding) are the same
// single float32 operations as the reference; roundf is FCVTAS (nearest,
// ties away from zero) and nearest_int is FCVTNS (nearest, ties to even,
// what the 1.5·2^23 trick computes for |v| < 2^22).

// NARROW32(a, b): the 8 int32 vectors Va..Va+3 and Vb..Vb+3 (elements 0-15
// and 16-31) to 32 int8 in Va.16B and Vb.16B (saturating; the values are in
// [-127,127]).
#define NARROW16(a, a1, a2, a3) \
	SQXTN4H(a, a)     \
	SQXTN28H(a, a1)   \
	SQXTN4H(a2, a2)   \
	SQXTN28H(a2, a3)  \
	SQXTN8B(a, a)     \
	SQXTN216B(a, a2)

// func quantQ8_0NEON(x *float32, qs *int8, d *float32, nb int)
TEXT ·quantQ8_0NEON(SB), NOSPLIT, $0-32
	MOVD  x+0(FP), R0
	MOVD  qs+8(FP), R1
	MOVD  d+16(FP), R2
	MOVD  nb+24(FP), R3
	MOVW  $0x42fe0000, R5 // 127.0
	FMOVS R5, F27
	MOVW  $0x3f800000, R5 // 1.0
	FMOVS R5, F26
	FMOVS ZR, F25

loop:
	VLD1.P 64(R0), [V0.S4, V1.S4, V2.S4, V3.S4]
	VLD1.P 64(R0), [V4.S4, V5.S4, V6.S4, V7.S4]
	FABS4S(16, 0)
	FABS4S(17, 1)
	FABS4S(18, 2)
	FABS4S(19, 3)
	FABS4S(20, 4)
	FABS4S(21, 5)
	FABS4S(22, 6)
	FABS4S(23, 7)
	FMAX4S(16, 16, 17)
	FMAX4S(18, 18, 19)
	FMAX4S(20, 20, 21)
	FMAX4S(22, 22, 23)
	FMAX4S(16, 16, 18)
	FMAX4S(20, 20, 22)
	FMAX4S(16, 16, 20)
	FMAXV(16, 16)                 // amax
	FDIVS   F27, F16, F17         // d = amax / 127
	FDIVS   F17, F26, F18         // 1/d
	FCMPS   F25, F17
	FCSELS  EQ, F25, F18, F18     // id = d != 0 ? 1/d : 0
	FCVTSH  F17, F19              // d rounded to fp16 and back
	FCVTHS  F19, F19
	FMOVS.P F19, 4(R2)
	FMULE(0, 0, 18, 0)
	FMULE(1, 1, 18, 0)
	FMULE(2, 2, 18, 0)
	FMULE(3, 3, 18, 0)
	FMULE(4, 4, 18, 0)
	FMULE(5, 5, 18, 0)
	FMULE(6, 6, 18, 0)
	FMULE(7, 7, 18, 0)
	FCVTAS4S(0, 0)
	FCVTAS4S(1, 1)
	FCVTAS4S(2, 2)
	FCVTAS4S(3, 3)
	FCVTAS4S(4, 4)
	FCVTAS4S(5, 5)
	FCVTAS4S(6, 6)
	FCVTAS4S(7, 7)
	NARROW16(0, 1, 2, 3)
	NARROW16(4, 5, 6, 7)
	VST1.P [V0.B16], 16(R1)
	VST1.P [V4.B16], 16(R1)
	SUBS   $1, R3, R3
	BNE    loop
	RET

// func quantQ8_KNEON(x *float32, qs *int8, d *float32, bsums *int16, nb int)
//
// Per 256-element block: pass 1 finds the largest and smallest element; the
// reference's max is the first element of largest magnitude, which is the
// largest (or the smallest) element unless both have that magnitude, when a
// scalar scan finds the first. Pass 2 quantizes 32 elements at a time and
// forms their two bsums.
TEXT ·quantQ8_KNEON(SB), NOSPLIT, $0-40
	MOVD  x+0(FP), R0
	MOVD  qs+8(FP), R1
	MOVD  d+16(FP), R2
	MOVD  bsums+24(FP), R3
	MOVD  nb+32(FP), R4
	MOVW  $0xc2fe0000, R5 // -127.0
	FMOVS R5, F27
	MOVW  $0x3f800000, R5 // 1.0
	FMOVS R5, F26
	FMOVS ZR, F25
	MOVW  $127, R5
	VDUP  R5, V24.S4

block:
	// pass 1: V16 = lane maxima, V17 = lane minima
	VLD1   (R0), [V16.S4, V17.S4, V18.S4, V19.S4]
	FMAX4S(20, 16, 17)
	FMIN4S(21, 16, 17)
	VMOV   V20.B16, V16.B16
	VMOV   V21.B16, V17.B16
	FMAX4S(16, 16, 18)
	FMIN4S(17, 17, 18)
	FMAX4S(16, 16, 19)
	FMIN4S(17, 17, 19)
	ADD    $64, R0, R6
	MOVD   $15, R7

minmax:
	VLD1.P 64(R6), [V0.S4, V1.S4, V2.S4, V3.S4]
	FMAX4S(16, 16, 0)
	FMIN4S(17, 17, 0)
	FMAX4S(16, 16, 1)
	FMIN4S(17, 17, 1)
	FMAX4S(16, 16, 2)
	FMIN4S(17, 17, 2)
	FMAX4S(16, 16, 3)
	FMIN4S(17, 17, 3)
	SUBS   $1, R7, R7
	BNE    minmax

	FMAXV(18, 16)      // hi
	FMINV(19, 17)      // lo
	FNEGS  F19, F20    // -lo
	FMAXS  F20, F18, F21 // amax = max(hi, -lo)
	FCMPS  F25, F21
	BEQ    zero
	FMOVS  F18, F22    // mx = hi
	FCMPS  F21, F20
	BNE    scale       // -lo < amax: hi is the only extreme
	FMOVS  F19, F22    // mx = lo
	FCMPS  F21, F18
	BNE    scale       // hi < amax: lo is the only extreme
	MOVD   R0, R6      // both: the first element of magnitude amax

first:
	FMOVS.P 4(R6), F22
	FABSS   F22, F23
	FCMPS   F21, F23
	BNE     first

scale:
	FDIVS   F22, F27, F23 // iscale = -127 / mx
	FDIVS   F23, F26, F28 // d = 1 / iscale
	FMOVS.P F28, 4(R2)
	MOVD    $8, R7

quant:
	VLD1.P 64(R0), [V0.S4, V1.S4, V2.S4, V3.S4]
	VLD1.P 64(R0), [V4.S4, V5.S4, V6.S4, V7.S4]
	FMULE(0, 0, 23, 0)
	FMULE(1, 1, 23, 0)
	FMULE(2, 2, 23, 0)
	FMULE(3, 3, 23, 0)
	FMULE(4, 4, 23, 0)
	FMULE(5, 5, 23, 0)
	FMULE(6, 6, 23, 0)
	FMULE(7, 7, 23, 0)
	FCVTNS4S(0, 0)
	FCVTNS4S(1, 1)
	FCVTNS4S(2, 2)
	FCVTNS4S(3, 3)
	FCVTNS4S(4, 4)
	FCVTNS4S(5, 5)
	FCVTNS4S(6, 6)
	FCVTNS4S(7, 7)
	SMIN4S(0, 0, 24)
	SMIN4S(1, 1, 24)
	SMIN4S(2, 2, 24)
	SMIN4S(3, 3, 24)
	SMIN4S(4, 4, 24)
	SMIN4S(5, 5, 24)
	SMIN4S(6, 6, 24)
	SMIN4S(7, 7, 24)
	NARROW16(0, 1, 2, 3)
	NARROW16(4, 5, 6, 7)
	VST1.P [V0.B16], 16(R1)
	VST1.P [V4.B16], 16(R1)
	// bsums of elements 0-15 and 16-31
	SADDLP8H(0, 0)
	SADDLP8H(4, 4)
	ADDP8H(0, 0, 4)
	ADDP8H(0, 0, 0)
	ADDP8H(0, 0, 0)
	FMOVS.P F0, 4(R3)
	SUBS    $1, R7, R7
	BNE     quant
	B       next

zero:
	VEOR   V0.B16, V0.B16, V0.B16
	VEOR   V1.B16, V1.B16, V1.B16
	MOVD   $8, R7

zeroq:
	VST1.P [V0.B16, V1.B16], 32(R1)
	SUBS   $1, R7, R7
	BNE    zeroq
	VST1.P [V0.B16, V1.B16], 32(R3)
	FMOVS.P F25, 4(R2)
	ADD    $1024, R0

next:
	SUBS $1, R4, R4
	BNE  block
	RET
