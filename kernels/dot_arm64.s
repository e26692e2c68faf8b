//go:build arm64 && !purego

#include "textflag.h"
#include "neon_arm64.h"
#include "kquant_arm64.h"

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

// HALFSCALE(off): F16 = float32(fp16 at off(R0) * next activation scale).
#define HALFSCALE(off) \
	MOVHU   off(R0), R5  \
	FMOVS   R5, F16      \
	FCVTHS  F16, F16     \
	FMOVS.P 4(R2), F17   \
	FMULS   F17, F16, F16

#define ARGS \
	MOVD w+0(FP), R0      \
	MOVD qs+8(FP), R1     \
	MOVD d+16(FP), R2     \
	MOVD bsums+24(FP), R3 \
	MOVD nb+32(FP), R4    \
	ZERO(30)              \
	ZERO(31)

// RESULT: F0 = the horizontal sum of V30/V31.
#define RESULT \
	HSUM8(0, 30, 31, 1)

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
	RESULT

#define LANES16 LANES16_SDOT

// func dotQ8_0SDOT(w *byte, qs *int8, d *float32, bsums *int16, nb int) float32
TEXT ·dotQ8_0SDOT(SB), NOSPLIT, $0-44
	Q8_0_BODY
	FMOVS F0, ret+40(FP)
	RET

#undef LANES16
#define LANES16 LANES16_NEON

// func dotQ8_0NEON(w *byte, qs *int8, d *float32, bsums *int16, nb int) float32
TEXT ·dotQ8_0NEON(SB), NOSPLIT, $0-44
	Q8_0_BODY
	FMOVS F0, ret+40(FP)
	RET

// ---- Q4_K: 144-byte blocks (fp16 d, fp16 dmin, 12 scale bytes, 128 nibble bytes) ----

// K4MINS: V28 += float32(F18 * float32(M)) with M[k] = mn[2k]*(bs[4k]+bs[4k+1])
// + mn[2k+1]*(bs[4k+2]+bs[4k+3]), the bsums read from R3 (advanced).
// Clobbers V23-V25.
#define K4MINS \
	VLD1.P 32(R3), [V23.H8, V24.H8] \
	K4MINSUM(28)

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
	FSUBS  F2, F0, F0

#undef LANES16
#define LANES16 LANES16_SDOT

// func dotQ4_KSDOT(w *byte, qs *int8, d *float32, bsums *int16, nb int) float32
TEXT ·dotQ4_KSDOT(SB), NOSPLIT, $0-44
	Q4_K_BODY
	FMOVS F0, ret+40(FP)
	RET

#undef LANES16
#define LANES16 LANES16_NEON

// func dotQ4_KNEON(w *byte, qs *int8, d *float32, bsums *int16, nb int) float32
TEXT ·dotQ4_KNEON(SB), NOSPLIT, $0-44
	Q4_K_BODY
	FMOVS F0, ret+40(FP)
	RET

// ---- Q5_K: 176-byte blocks (fp16 d, fp16 dmin, 12 scale bytes, 32 qh bytes, 128 nibble bytes) ----

// K5HIGH(SH, n, v, t): Vv |= bit 4 of (qh SH n) for both 16-byte halves of
// qh (V4, V5), where SH n moves qh bit b to bit 4 (VSHL $4-b or VUSHR
// $b-4); Vv and Vv+1 are the two halves, Vt/Vt+1 scratch. V17 = 16 × 0x10.
#define K5HIGH(SH, n, v, v1, t, t1) \
	SH     $n, V4.B16, t.B16      \
	SH     $n, V5.B16, t1.B16     \
	VBIT   V17.B16, t.B16, v.B16  \
	VBIT   V17.B16, t1.B16, v1.B16

// K5CHUNK(ls, li, hs, hi, SHL, nl, SHH, nh): K4CHUNK with the fifth bits,
// qh bit 2j (SHL nl) for the low nibbles and 2j+1 (SHH nh) for the high.
#define K5CHUNK(ls, li, hs, hi, SHL, nl, SHH, nh) \
	VLD1.P 32(R6), [V0.B16, V1.B16] \
	VLD1.P 64(R1), [V8.B16, V9.B16, V10.B16, V11.B16] \
	VAND   V27.B16, V0.B16, V12.B16 \
	VAND   V27.B16, V1.B16, V13.B16 \
	VUSHR  $4, V0.B16, V14.B16 \
	VUSHR  $4, V1.B16, V15.B16 \
	K5HIGH(SHL, nl, V12, V13, V6, V7) \
	K5HIGH(SHH, nh, V14, V15, V2, V3) \
	LANES16(19, 12, 8, 8)   \
	LANES16(23, 13, 9, 9)   \
	LANES16(24, 14, 10, 10) \
	LANES16(29, 15, 11, 11) \
	MLAE(25, 19, ls, li)    \
	MLAE(26, 23, ls, li)    \
	MLAE(25, 24, hs, hi)    \
	MLAE(26, 29, hs, hi)

#define Q5_K_BODY \
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
	VMOVI  $16, V17.B16 \
	ZERO(25) \
	ZERO(26) \
	ADD    $16, R0, R6 \
	VLD1.P 32(R6), [V4.B16, V5.B16] \
	K5CHUNK(20, 0, 20, 1, VSHL, 4, VSHL, 3) \
	K5CHUNK(20, 2, 20, 3, VSHL, 2, VSHL, 1) \
	K5CHUNK(21, 0, 21, 1, VSHL, 0, VUSHR, 1) \
	K5CHUNK(21, 2, 21, 3, VUSHR, 2, VUSHR, 3) \
	ACCLANES(25, 26) \
	ADD    $176, R0 \
	SUBS   $1, R4, R4 \
	BNE    loop \
	HSUM8(0, 30, 31, 1) \
	HSUM4(2, 28, 1) \
	FSUBS  F2, F0, F0

#undef LANES16
#define LANES16 LANES16_SDOT

// func dotQ5_KSDOT(w *byte, qs *int8, d *float32, bsums *int16, nb int) float32
TEXT ·dotQ5_KSDOT(SB), NOSPLIT, $0-44
	Q5_K_BODY
	FMOVS F0, ret+40(FP)
	RET

#undef LANES16
#define LANES16 LANES16_NEON

// func dotQ5_KNEON(w *byte, qs *int8, d *float32, bsums *int16, nb int) float32
TEXT ·dotQ5_KNEON(SB), NOSPLIT, $0-44
	Q5_K_BODY
	FMOVS F0, ret+40(FP)
	RET

// ---- Q6_K: 210-byte blocks (128 ql bytes, 64 qh bytes, 16 int8 scales, fp16 d) ----

// Q6DOT(s, i): the 6-bit values V6 (elements 0-15 of a 32) and V7
// (16-31), minus 32, against 32 quants at R1 (advanced), times the scales
// Vs.S[i] and Vs.S[i+1], added to the integer lanes V25/V26. V29 = 16 × 32.
#define Q6DOT(s, i, i1) \
	VSUB   V29.B16, V6.B16, V6.B16 \
	VSUB   V29.B16, V7.B16, V7.B16 \
	VLD1.P 32(R1), [V8.B16, V9.B16] \
	LANES16(10, 6, 8, 8) \
	LANES16(11, 7, 9, 9) \
	MLAE(25, 10, s, i)   \
	MLAE(26, 11, s, i1)

// Q6LOW(a, a1, SH, n): V6/V7 = low nibbles of Va/Va1 with qh bits moved by
// SH n (VSHL $4: bits 0-1, VSHL $2: bits 2-3) into bits 4-5. V27 = 16 ×
// 0x0F, V24 = 16 × 0x30; qh in V4/V5.
#define Q6LOW(a, a1, SH, n) \
	VAND   V27.B16, a.B16, V6.B16  \
	VAND   V27.B16, a1.B16, V7.B16 \
	SH     $n, V4.B16, V12.B16     \
	SH     $n, V5.B16, V13.B16     \
	VBIT   V24.B16, V12.B16, V6.B16 \
	VBIT   V24.B16, V13.B16, V7.B16

// Q6HIGH(a, a1, SH, n): the same with the high nibbles (qh bits 4-5: VSHL
// $0, bits 6-7: VUSHR $2).
#define Q6HIGH(a, a1, SH, n) \
	VUSHR  $4, a.B16, V6.B16  \
	VUSHR  $4, a1.B16, V7.B16 \
	SH     $n, V4.B16, V12.B16     \
	SH     $n, V5.B16, V13.B16     \
	VBIT   V24.B16, V12.B16, V6.B16 \
	VBIT   V24.B16, V13.B16, V7.B16

// Q6HALF(sa, sb): 128 elements: 64 ql bytes at R6, 32 qh bytes at R7 (both
// advanced); scales 0-3 in Vsa, 4-7 in Vsb.
#define Q6HALF(sa, sb) \
	VLD1.P 64(R6), [V0.B16, V1.B16, V2.B16, V3.B16] \
	VLD1.P 32(R7), [V4.B16, V5.B16] \
	Q6LOW(V0, V1, VSHL, 4)   \
	Q6DOT(sa, 0, 1)          \
	Q6LOW(V2, V3, VSHL, 2)   \
	Q6DOT(sa, 2, 3)          \
	Q6HIGH(V0, V1, VSHL, 0)  \
	Q6DOT(sb, 0, 1)          \
	Q6HIGH(V2, V3, VUSHR, 2) \
	Q6DOT(sb, 2, 3)

#define Q6_K_BODY \
	ARGS \
	VMOVI  $15, V27.B16 \
	VMOVI  $48, V24.B16 \
	VMOVI  $32, V29.B16 \
loop: \
	HALFSCALE(208) \
	ADD    $192, R0, R6 \
	VLD1   (R6), [V14.B16] \
	SXTL8H(15, 14)  \
	SXTL28H(14, 14) \
	SXTL4S(20, 15)  \
	SXTL24S(21, 15) \
	SXTL4S(22, 14)  \
	SXTL24S(23, 14) \
	ZERO(25) \
	ZERO(26) \
	MOVD   R0, R6 \
	ADD    $128, R0, R7 \
	Q6HALF(20, 21) \
	Q6HALF(22, 23) \
	ACCLANES(25, 26) \
	ADD    $210, R0 \
	SUBS   $1, R4, R4 \
	BNE    loop \
	RESULT

#undef LANES16
#define LANES16 LANES16_SDOT

// func dotQ6_KSDOT(w *byte, qs *int8, d *float32, bsums *int16, nb int) float32
TEXT ·dotQ6_KSDOT(SB), NOSPLIT, $0-44
	Q6_K_BODY
	FMOVS F0, ret+40(FP)
	RET

#undef LANES16
#define LANES16 LANES16_NEON

// func dotQ6_KNEON(w *byte, qs *int8, d *float32, bsums *int16, nb int) float32
TEXT ·dotQ6_KNEON(SB), NOSPLIT, $0-44
	Q6_K_BODY
	FMOVS F0, ret+40(FP)
	RET

// ---- 32-element nibble blocks: MXFP4 (e8m0 scale, 16 bytes) and Q4_0 (fp16 d, 16 bytes) ----

// NIB32(off): the 16 nibble bytes at off(R0): V1 = low nibbles (elements
// 0-15), V2 = high nibbles (16-31); against 32 quants at R1 (advanced),
// the codes mapped to values by CODES, added to V30/V31 with scale F16.
// V27 = 16 × 0x0F.
#define NIB32(off) \
	ADD    $off, R0, R6 \
	VLD1   (R6), [V0.B16] \
	VLD1.P 32(R1), [V8.B16, V9.B16] \
	VAND   V27.B16, V0.B16, V1.B16 \
	VUSHR  $4, V0.B16, V2.B16 \
	CODES \
	LANES16(4, 1, 8, 8) \
	LANES16(5, 2, 9, 9) \
	ACCLANES(4, 5)

// MXFP4 codes: kvalues by table lookup (V28 = kvaluesMXFP4).
#define MXFP4_CODES \
	VTBL   V1.B16, [V28.B16], V1.B16 \
	VTBL   V2.B16, [V28.B16], V2.B16

// Q4_0 codes: nibble - 8 (V29 = 16 × 8).
#define Q4_0_CODES \
	VSUB   V29.B16, V1.B16, V1.B16 \
	VSUB   V29.B16, V2.B16, V2.B16

#define MXFP4_BODY \
	ARGS \
	VMOVI  $15, V27.B16 \
	MOVD   $·kvaluesMXFP4(SB), R6 \
	VLD1   (R6), [V28.B16] \
	MOVD   $·e8m0HalfTable(SB), R7 \
loop: \
	MOVBU   (R0), R5 \
	FMOVS   (R7)(R5<<2), F16 \
	FMOVS.P 4(R2), F17 \
	FMULS   F17, F16, F16 \
	NIB32(1) \
	ADD     $17, R0 \
	SUBS    $1, R4, R4 \
	BNE     loop \
	RESULT

#define Q4_0_BODY \
	ARGS \
	VMOVI  $15, V27.B16 \
	VMOVI  $8, V29.B16 \
loop: \
	HALFSCALE(0) \
	NIB32(2) \
	ADD     $18, R0 \
	SUBS    $1, R4, R4 \
	BNE     loop \
	RESULT

#define CODES MXFP4_CODES
#undef LANES16
#define LANES16 LANES16_SDOT

// func dotMXFP4SDOT(w *byte, qs *int8, d *float32, bsums *int16, nb int) float32
TEXT ·dotMXFP4SDOT(SB), NOSPLIT, $0-44
	MXFP4_BODY
	FMOVS F0, ret+40(FP)
	RET

#undef LANES16
#define LANES16 LANES16_NEON

// func dotMXFP4NEON(w *byte, qs *int8, d *float32, bsums *int16, nb int) float32
TEXT ·dotMXFP4NEON(SB), NOSPLIT, $0-44
	MXFP4_BODY
	FMOVS F0, ret+40(FP)
	RET

#undef CODES
#define CODES Q4_0_CODES
#undef LANES16
#define LANES16 LANES16_SDOT

// func dotQ4_0SDOT(w *byte, qs *int8, d *float32, bsums *int16, nb int) float32
TEXT ·dotQ4_0SDOT(SB), NOSPLIT, $0-44
	Q4_0_BODY
	FMOVS F0, ret+40(FP)
	RET

#undef LANES16
#define LANES16 LANES16_NEON

// func dotQ4_0NEON(w *byte, qs *int8, d *float32, bsums *int16, nb int) float32
TEXT ·dotQ4_0NEON(SB), NOSPLIT, $0-44
	Q4_0_BODY
	FMOVS F0, ret+40(FP)
	RET

// ---- Q5_0: 22-byte blocks (fp16 d, 32 high bits qh, 16 nibble bytes) ----

// Q5_0 codes: (nibble | 16·bit) - 16 with the code's bit of qh at 2(R0):
// qh is duplicated into V3, its bytes spread over 8 lanes each (V22: bytes
// 0-1 for codes 0-15, V23: bytes 2-3 for codes 16-31), each lane keeps its
// own bit (V25 = 1, 2, 4, … 128, twice), compared equal to it (0xFF where
// set) and masked to 16 (V24 = 16 × 16, also the offset). Clobbers R5, V3,
// V6, V7.
#define Q5_0_CODES \
	MOVWU  2(R0), R5 \
	VDUP   R5, V3.S4 \
	VTBL   V22.B16, [V3.B16], V6.B16 \
	VTBL   V23.B16, [V3.B16], V7.B16 \
	VAND   V25.B16, V6.B16, V6.B16 \
	VAND   V25.B16, V7.B16, V7.B16 \
	VCMEQ  V25.B16, V6.B16, V6.B16 \
	VCMEQ  V25.B16, V7.B16, V7.B16 \
	VAND   V24.B16, V6.B16, V6.B16 \
	VAND   V24.B16, V7.B16, V7.B16 \
	VORR   V6.B16, V1.B16, V1.B16 \
	VORR   V7.B16, V2.B16, V2.B16 \
	VSUB   V24.B16, V1.B16, V1.B16 \
	VSUB   V24.B16, V2.B16, V2.B16

#define Q5_0_BODY \
	ARGS \
	VMOVI  $15, V27.B16 \
	MOVD   $·q5Lanes(SB), R6 \
	VLD1   (R6), [V22.B16, V23.B16, V24.B16, V25.B16] \
loop: \
	HALFSCALE(0) \
	NIB32(6) \
	ADD     $22, R0 \
	SUBS    $1, R4, R4 \
	BNE     loop \
	RESULT

#undef CODES
#define CODES Q5_0_CODES
#undef LANES16
#define LANES16 LANES16_SDOT

// func dotQ5_0SDOT(w *byte, qs *int8, d *float32, bsums *int16, nb int) float32
TEXT ·dotQ5_0SDOT(SB), NOSPLIT, $0-44
	Q5_0_BODY
	FMOVS F0, ret+40(FP)
	RET

#undef LANES16
#define LANES16 LANES16_NEON

// func dotQ5_0NEON(w *byte, qs *int8, d *float32, bsums *int16, nb int) float32
TEXT ·dotQ5_0NEON(SB), NOSPLIT, $0-44
	Q5_0_BODY
	FMOVS F0, ret+40(FP)
	RET
