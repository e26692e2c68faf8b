//go:build arm64 && !purego

#include "textflag.h"
#include "neon_arm64.h"

// NEON dot products of quantized rows against Q8_0/Q8_K activations,
// hand-written. Every routine follows the reference's operation order (see
// the package doc): exact integer lanes per block (lane l = the elements
// 4l..4l+3 of each 32, times their sub-block scale), then
// acc = acc + float32(d*float32(lane)) with separate FMUL/FADD (no fused
// multiply-add), then the fixed horizontal sum. The 8 lanes live in two
// 4×int32 / 4×float32 registers: lanes 0-3 (elements 0-15 of each 32) and
// lanes 4-7 (elements 16-31).
//
// Each routine is built twice from one body: once with LANES16 as SDOT
// (ARMv8.2 dot product) and once with plain NEON. Both give the same
// integers: SDOT adds 4 byte products per 32-bit lane; the plain form
// multiplies to 16 bits (SMULL/SMULL2), adds adjacent pairs (ADDP, which
// cannot overflow: weights are in [-128,127] and activations, the
// quantizers' output, in [-127,127]) and widens adjacent pairs (SADDLP).
//
// Registers: R0 weights, R1 activation quants, R2 activation scales, R3 Q8_K
// bsums, R4 block count; V30/V31 the float lanes 0-3/4-7.

// The SDOT form of LANES16(t, w, y, s): Vt.4S = 4-byte dot products of Vw
// and Vy (Vs unused).
#define LANES16_SDOT(t, w, y, s) \
	ZERO(t)    \
	SDOT(t, w, y)

// The plain NEON form (clobbers Vs).
#define LANES16_NEON(t, w, y, s) \
	SMULL8H(t, w, y)  \
	SMULL28H(s, w, y) \
	ADDP8H(t, t, s)   \
	SADDLP4S(t, t)

// HALFSCALE(off): F16 = float32(fp16 at off(R0) * next activation scale).
#define HALFSCALE(off) \
	MOVHU   off(R0), R5  \
	FMOVS   R5, F16      \
	FCVTHS  F16, F16     \
	FMOVS.P 4(R2), F17   \
	FMULS   F17, F16, F16

// ACCLANES(a, b): V30/V31 += float32(F16 * float32(Va/Vb)).
#define ACCLANES(a, b) \
	SCVTF4S(a, a)       \
	SCVTF4S(b, b)       \
	FMULE(a, a, 16, 0)  \
	FMULE(b, b, 16, 0)  \
	FADD4S(30, 30, a)   \
	FADD4S(31, 31, b)

#define ARGS \
	MOVD w+0(FP), R0      \
	MOVD qs+8(FP), R1     \
	MOVD d+16(FP), R2     \
	MOVD bsums+24(FP), R3 \
	MOVD nb+32(FP), R4    \
	ZERO(30)              \
	ZERO(31)

#define RESULT \
	HSUM8(0, 30, 31, 1) \
	FMOVS F0, ret+40(FP)

// ---- Q8_0: 34-byte blocks (fp16 d, 32 int8) ----

#define Q8_0_BODY \
	ARGS \
loop: \
	HALFSCALE(0) \
	ADD     $2, R0, R6 \
	VLD1    (R6), [V0.B16, V1.B16] \
	VLD1.P  32(R1), [V2.B16, V3.B16] \
	LANES16(4, 0, 2, 6) \
	LANES16(5, 1, 3, 7) \
	ACCLANES(4, 5) \
	ADD     $34, R0 \
	SUBS    $1, R4, R4 \
	BNE     loop \
	RESULT \
	RET

#define LANES16 LANES16_SDOT

// func dotQ8_0SDOT(w *byte, qs *int8, d *float32, bsums *int16, nb int) float32
TEXT ·dotQ8_0SDOT(SB), NOSPLIT, $0-44
	Q8_0_BODY

#undef LANES16
#define LANES16 LANES16_NEON

// func dotQ8_0NEON(w *byte, qs *int8, d *float32, bsums *int16, nb int) float32
TEXT ·dotQ8_0NEON(SB), NOSPLIT, $0-44
	Q8_0_BODY

// ---- Q4_K: 144-byte blocks (fp16 d, fp16 dmin, 12 scale bytes, 128 nibble bytes) ----

// K4SCALES unpacks the 12 scale bytes at 4(R0) (llama.cpp's utmp shuffle):
// V20.4S = scales 0-3, V21.4S = scales 4-7, V22.8H = the 8 mins. Clobbers
// R5-R12, V19.
#define K4SCALES \
	MOVWU  4(R0), R5               \
	MOVWU  8(R0), R6               \
	MOVWU  12(R0), R7              \
	ANDW   $0x3f3f3f3f, R5, R8     \
	ANDW   $0x3f3f3f3f, R6, R9     \
	LSRW   $6, R5, R10             \
	ANDW   $0x03030303, R10, R10   \
	ANDW   $0x0f0f0f0f, R7, R11    \
	ORRW   R10<<4, R11, R11        \
	LSRW   $6, R6, R10             \
	ANDW   $0x03030303, R10, R10   \
	LSRW   $4, R7, R12             \
	ANDW   $0x0f0f0f0f, R12, R12   \
	ORRW   R10<<4, R12, R12        \
	ORR    R11<<32, R8, R8         \
	ORR    R12<<32, R9, R9         \
	FMOVD  R8, F19                 \
	VUXTL  V19.B8, V19.H8          \
	VUXTL  V19.H4, V20.S4          \
	VUXTL2 V19.H8, V21.S4          \
	FMOVD  R9, F22                 \
	VUXTL  V22.B8, V22.H8

// K4MINS: V28 += float32(F18 * float32(M)) with M[k] = mn[2k]*(bs[4k]+bs[4k+1])
// + mn[2k+1]*(bs[4k+2]+bs[4k+3]), the bsums read from R3 (advanced).
// Clobbers V23-V25.
#define K4MINS \
	VLD1.P 32(R3), [V23.H8, V24.H8] \
	ADDP8H(23, 23, 24)  \
	SMULL4S(24, 22, 23) \
	SMULL24S(25, 22, 23) \
	ADDP4S(24, 24, 25)  \
	SCVTF4S(24, 24)     \
	FMULE(24, 24, 18, 0) \
	FADD4S(28, 28, 24)

// K4CHUNK(ls, li, hs, hi): 32 nibble bytes at R6 (advanced) against 64
// quants at R1 (advanced); low nibbles times scale Vls.S[li], high nibbles
// times Vhs.S[hi], added to the integer lanes V25/V26. V27 = 16 × 0x0F.
#define K4CHUNK(ls, li, hs, hi) \
	VLD1.P 32(R6), [V0.B16, V1.B16] \
	VLD1.P 64(R1), [V8.B16, V9.B16, V10.B16, V11.B16] \
	VAND   V27.B16, V0.B16, V12.B16 \
	VAND   V27.B16, V1.B16, V13.B16 \
	VUSHR  $4, V0.B16, V14.B16 \
	VUSHR  $4, V1.B16, V15.B16 \
	LANES16(19, 12, 8, 8)   \
	LANES16(23, 13, 9, 9)   \
	LANES16(24, 14, 10, 10) \
	LANES16(29, 15, 11, 11) \
	MLAE(25, 19, ls, li)    \
	MLAE(26, 23, ls, li)    \
	MLAE(25, 24, hs, hi)    \
	MLAE(26, 29, hs, hi)

#define Q4_K_BODY \
	ARGS \
	ZERO(28) \
	VMOVI  $15, V27.B16 \
loop: \
	HALFSCALE(0) \
	MOVHU  2(R0), R5 \
	FMOVS  R5, F18 \
	FCVTHS F18, F18 \
	FMULS  F17, F18, F18 \
	K4SCALES \
	K4MINS \
	ZERO(25) \
	ZERO(26) \
	ADD    $16, R0, R6 \
	K4CHUNK(20, 0, 20, 1) \
	K4CHUNK(20, 2, 20, 3) \
	K4CHUNK(21, 0, 21, 1) \
	K4CHUNK(21, 2, 21, 3) \
	ACCLANES(25, 26) \
	ADD    $144, R0 \
	SUBS   $1, R4, R4 \
	BNE    loop \
	HSUM8(0, 30, 31, 1) \
	HSUM4(2, 28, 1) \
	FSUBS  F2, F0, F0 \
	FMOVS  F0, ret+40(FP) \
	RET

#undef LANES16
#define LANES16 LANES16_SDOT

// func dotQ4_KSDOT(w *byte, qs *int8, d *float32, bsums *int16, nb int) float32
TEXT ·dotQ4_KSDOT(SB), NOSPLIT, $0-44
	Q4_K_BODY

#undef LANES16
#define LANES16 LANES16_NEON

// func dotQ4_KNEON(w *byte, qs *int8, d *float32, bsums *int16, nb int) float32
TEXT ·dotQ4_KNEON(SB), NOSPLIT, $0-44
	Q4_K_BODY
