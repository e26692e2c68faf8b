//go:build arm64 && !purego

#include "textflag.h"
#include "neon_arm64.h"

// The exponential of SwiGLU, SiLU and the softmax (swiglu.go, attn8.go),
// NEON: float32(math.Exp(float64(x))) four lanes at a time. Go's arm64
// math.Exp is assembly (archExp, math/exp_arm64.s); EXP2D below is that
// code operation for operation on two float64 lanes, each fused
// multiply-add where archExp fuses, each plain product and sum where it
// does not, for -700 ≤ x ≤ 700. There archExp takes none of its special
// branches but the one for |x| < 2⁻²⁸, which returns 1+x; for such x the
// polynomial path's value is within a few float64 ulps of 1+x, and both
// round to the float32 1.0. Lanes outside the range are set as the
// float32 conversion of archExp's result is: below −700 zero, above 700
// +Inf, a NaN the NaN. The ldexp step is an integer add of k<<52 to the
// bits of y (y in [0.5, 2], so the exponent field stays normal there).

// Encodings the Go assembler has no mnemonic for (register numbers).
// FMLA Vd.2D, Vn.2D, Vm.2D: d += n·m, fused
#define FMLA2D(d, n, m) WORD $(0x4e60cc00 | ((m)<<16) | ((n)<<5) | (d))
// FMLS Vd.2D, Vn.2D, Vm.2D: d −= n·m, fused
#define FMLS2D(d, n, m) WORD $(0x4ee0cc00 | ((m)<<16) | ((n)<<5) | (d))
#define FMUL2D(d, n, m) WORD $(0x6e60dc00 | ((m)<<16) | ((n)<<5) | (d))
#define FSUB2D(d, n, m) WORD $(0x4ee0d400 | ((m)<<16) | ((n)<<5) | (d))
#define FDIV2D(d, n, m) WORD $(0x6e60fc00 | ((m)<<16) | ((n)<<5) | (d))
// FCVTZS Vd.2D, Vn.2D (toward zero)
#define FCVTZS2D(d, n) WORD $(0x4ee1b800 | ((n)<<5) | (d))
#define SCVTF2D(d, n) WORD $(0x4e61d800 | ((n)<<5) | (d))
// FCMLT Vd.2D, Vn.2D, #0
#define FCMLT2D(d, n) WORD $(0x4ee0e800 | ((n)<<5) | (d))
// SHL Vd.2D, Vn.2D, #52
#define SHL52(d, n) WORD $(0x4f745400 | ((n)<<5) | (d))
// ADD Vd.2D, Vn.2D, Vm.2D (integer)
#define ADD2D(d, n, m) WORD $(0x4ee08400 | ((m)<<16) | ((n)<<5) | (d))
// FCVTL Vd.2D, Vn.2S and FCVTL2 Vd.2D, Vn.4S (exact)
#define FCVTL2D(d, n) WORD $(0x0e617800 | ((n)<<5) | (d))
#define FCVTL22D(d, n) WORD $(0x4e617800 | ((n)<<5) | (d))
// FCVTN Vd.2S, Vn.2D and FCVTN2 Vd.4S, Vn.2D (to nearest even)
#define FCVTN2S(d, n) WORD $(0x0e616800 | ((n)<<5) | (d))
#define FCVTN24S(d, n) WORD $(0x4e616800 | ((n)<<5) | (d))
#define FDIV4S(d, n, m) WORD $(0x6e20fc00 | ((m)<<16) | ((n)<<5) | (d))
#define FNEG4S(d, n) WORD $(0x6ea0f800 | ((n)<<5) | (d))
// FCMGT Vd.4S, Vn.4S, Vm.4S: all ones where n > m (ordered)
#define FCMGT4S(d, n, m) WORD $(0x6ea0e400 | ((m)<<16) | ((n)<<5) | (d))
// ORR Vd.16B, Vn.16B, Vn.16B (a register copy)
#define VCOPY(d, n) WORD $(0x4ea01c00 | ((n)<<16) | ((n)<<5) | (d))
// BIC Vd.16B, Vn.16B, Vm.16B: n AND NOT m
#define BIC16(d, n, m) WORD $(0x4e601c00 | ((m)<<16) | ((n)<<5) | (d))
// BIT Vd.16B, Vn.16B, Vm.16B: d takes n's bits where m is set
#define BIT16(d, n, m) WORD $(0x6ea01c00 | ((m)<<16) | ((n)<<5) | (d))
// BIF Vd.16B, Vn.16B, Vm.16B: d takes n's bits where m is clear
#define BIF16(d, n, m) WORD $(0x6ee01c00 | ((m)<<16) | ((n)<<5) | (d))

// The constants, loaded by EXPCONST into V16-V31 (archExp's names).
DATA expk<>+0(SB)/8, $1.44269504088896338700e+00    // V16 Log2e
DATA expk<>+8(SB)/8, $0.5                           // V17
DATA expk<>+16(SB)/8, $-0.5                         // V18
DATA expk<>+24(SB)/8, $6.93147180369123816490e-01   // V19 Ln2Hi
DATA expk<>+32(SB)/8, $1.90821492927058770002e-10   // V20 Ln2Lo
DATA expk<>+40(SB)/8, $4.13813679705723846039e-08   // V21 P5
DATA expk<>+48(SB)/8, $-1.65339022054652515390e-06  // V22 P4
DATA expk<>+56(SB)/8, $6.61375632143793436117e-05   // V23 P3
DATA expk<>+64(SB)/8, $-2.77777777770155933842e-03  // V24 P2
DATA expk<>+72(SB)/8, $1.66666666666666657415e-01   // V25 P1
DATA expk<>+80(SB)/8, $2.0                          // V26
DATA expk<>+88(SB)/8, $1.0                          // V27
DATA expk<>+96(SB)/4, $-700.0                       // V28 (float32)
DATA expk<>+100(SB)/4, $700.0                       // V29
DATA expk<>+104(SB)/4, $0x7f800000                  // V30 +Inf
DATA expk<>+108(SB)/4, $1.0                         // V31
GLOBL expk<>(SB), RODATA|NOPTR, $112

// EXPCONST: V16-V27 = the float64 constants in both lanes, V28-V31 the
// float32 ones in all four. Clobbers R9.
#define EXPCONST \
	MOVD   $expk<>(SB), R9 \
	VLD1R.P 8(R9), [V16.D2] \
	VLD1R.P 8(R9), [V17.D2] \
	VLD1R.P 8(R9), [V18.D2] \
	VLD1R.P 8(R9), [V19.D2] \
	VLD1R.P 8(R9), [V20.D2] \
	VLD1R.P 8(R9), [V21.D2] \
	VLD1R.P 8(R9), [V22.D2] \
	VLD1R.P 8(R9), [V23.D2] \
	VLD1R.P 8(R9), [V24.D2] \
	VLD1R.P 8(R9), [V25.D2] \
	VLD1R.P 8(R9), [V26.D2] \
	VLD1R.P 8(R9), [V27.D2] \
	VLD1R.P 4(R9), [V28.S4] \
	VLD1R.P 4(R9), [V29.S4] \
	VLD1R.P 4(R9), [V30.S4] \
	VLD1R.P 4(R9), [V31.S4]

// EXP2D(x, k, a, b, c, p, q): Vx (2 float64) = archExp(Vx) for
// −700 ≤ x ≤ 700 (register numbers; all seven distinct, none of V16-V31).
// In archExp's names: a = Log2e·x ± 0.5 (the sign of x's), k = int(a),
// hi = x − k·Ln2Hi, lo = k·Ln2Lo, r = hi − lo, t = r·r,
// c = r − t·(P1 + t·(P2 + t·(P3 + t·(P4 + t·P5)))),
// y = 1 − ((lo − (r·c)/(2−c)) − hi), then ldexp(y, k).
#define EXP2D(x, k, a, b, c, p, q) \
	VCOPY(a, 17)          \
	FMLA2D(a, x, 16)      \
	VCOPY(b, 18)          \
	FMLA2D(b, x, 16)      \
	FCMLT2D(c, x)         \
	BIT16(a, b, c)        \
	FCVTZS2D(k, a)        \
	SCVTF2D(a, k)         \
	FMLS2D(x, a, 19)      \
	FMUL2D(a, a, 20)      \
	FSUB2D(b, x, a)       \
	FMUL2D(c, b, b)       \
	VCOPY(p, 22)          \
	FMLA2D(p, c, 21)      \
	VCOPY(q, 23)          \
	FMLA2D(q, p, c)       \
	VCOPY(p, 24)          \
	FMLA2D(p, q, c)       \
	VCOPY(q, 25)          \
	FMLA2D(q, p, c)       \
	VCOPY(p, b)           \
	FMLS2D(p, q, c)       \
	FSUB2D(q, 26, p)      \
	FMUL2D(p, p, b)       \
	FDIV2D(p, p, q)       \
	FSUB2D(p, a, p)       \
	FSUB2D(p, p, x)       \
	FSUB2D(x, 27, p)      \
	SHL52(k, k)           \
	ADD2D(x, x, k)

// EXP4S(e, x): Ve (4 float32) = float32(archExp(float64(Vx))) with the
// out-of-range and NaN lanes set from Vx: below −700 zero, above 700 +Inf,
// a NaN itself. Clobbers V1-V14; x is V0 or V15.
#define EXP4S(e, x) \
	FCVTL2D(1, x)                 \
	FCVTL22D(8, x)                \
	EXP2D(1, 2, 3, 4, 5, 6, 7)    \
	EXP2D(8, 9, 10, 11, 12, 13, 14) \
	FCVTN2S(e, 1)                 \
	FCVTN24S(e, 8)                \
	FCMGT4S(2, 28, x)             \
	BIC16(e, e, 2)                \
	FCMGT4S(2, x, 29)             \
	BIT16(e, 30, 2)               \
	FCMEQ4S(2, x, x)              \
	BIF16(e, x, 2)

// func swiGLUNEON(out, gate, up *float32, n int)
//
// out[i] = gate[i] / (1 + float32(math.Exp(float64(-gate[i])))) · up[i]
// for n values (a positive multiple of 4), each step rounded to float32
// as refSwiGLU.
TEXT ·swiGLUNEON(SB), NOSPLIT, $0-32
	MOVD out+0(FP), R0
	MOVD gate+8(FP), R1
	MOVD up+16(FP), R2
	MOVD n+24(FP), R3
	LSR  $2, R3, R3
	EXPCONST

swiglu:
	VLD1.P 16(R1), [V0.S4]
	FNEG4S(15, 0)
	EXP4S(1, 15)
	FADD4S(1, 1, 31)  // 1 + e
	FDIV4S(1, 0, 1)   // g / (1 + e)
	VLD1.P 16(R2), [V2.S4]
	FMUL4S(1, 1, 2)   // · up
	VST1.P [V1.S4], 16(R0)
	SUBS   $1, R3, R3
	BNE    swiglu
	RET

// func siluNEON(out, x *float32, n int)
//
// out[i] = x[i] / (1 + float32(math.Exp(float64(-x[i])))) for n values (a
// positive multiple of 4): swiGLUNEON without the up factor.
TEXT ·siluNEON(SB), NOSPLIT, $0-24
	MOVD out+0(FP), R0
	MOVD x+8(FP), R1
	MOVD n+16(FP), R3
	LSR  $2, R3, R3
	EXPCONST

silu:
	VLD1.P 16(R1), [V0.S4]
	FNEG4S(15, 0)
	EXP4S(1, 15)
	FADD4S(1, 1, 31)
	FDIV4S(1, 0, 1)
	VST1.P [V1.S4], 16(R0)
	SUBS   $1, R3, R3
	BNE    silu
	RET

// func expShiftNEON(x *float32, n int, m float32, sum float64) float64
//
// x[i] = float32(math.Exp(float64(x[i] − m))) for n values (a positive
// multiple of 4), and sum plus their float64 values added one at a time
// in index order (the sum in V0, m's bits in R5: EXP4S leaves both).
TEXT ·expShiftNEON(SB), NOSPLIT, $0-40
	MOVD  x+0(FP), R0
	MOVD  n+8(FP), R3
	LSR   $2, R3, R3
	MOVWU m+16(FP), R5
	FMOVD sum+24(FP), F0
	EXPCONST

expshift:
	VLD1   (R0), [V13.S4]
	VDUP   R5, V14.S4
	FSUB4S(15, 13, 14)
	EXP4S(1, 15)
	VST1.P [V1.S4], 16(R0)
	FCVTL2D(2, 1)
	FCVTL22D(3, 1)
	EXT16(4, 2, 2, 8)
	EXT16(5, 3, 3, 8)
	FADDD  F2, F0
	FADDD  F4, F0
	FADDD  F3, F0
	FADDD  F5, F0
	SUBS   $1, R3, R3
	BNE    expshift
	FMOVD  F0, ret+32(FP)
	RET

// func expF64NEON(x *float64, n int)
//
// x[i] = EXP2D's float64 value for n values (a positive multiple of 2),
// each in −700 ≤ x ≤ 700 with |x| ≥ 2⁻²⁸: the tests compare it with
// math.Exp bit for bit, which the float32 results alone cannot show.
TEXT ·expF64NEON(SB), NOSPLIT, $0-16
	MOVD x+0(FP), R0
	MOVD n+8(FP), R3
	LSR  $1, R3, R3
	EXPCONST

expf64:
	VLD1   (R0), [V1.D2]
	EXP2D(1, 2, 3, 4, 5, 6, 7)
	VST1.P [V1.D2], 16(R0)
	SUBS   $1, R3, R3
	BNE    expf64
	RET
