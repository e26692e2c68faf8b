//go:build arm64 && !purego

#include "textflag.h"
#include "neon_arm64.h"

// F32 and F16 rows, shared by both kernel sets: the reference's order (see
// the package doc): four 8-lane accumulators over 32-element chunks (lanes
// 0-3 and 4-7 of accumulator k in V16+2k and V17+2k), products and sums
// rounded separately (FMUL then FADD, never fused), combined as
// (acc0+acc2)+(acc1+acc3), horizontally summed, then the len%32 tail summed
// sequentially in scalar float32 and added last.
//
// Registers: R0 weights, R1 x, R2 element count, R3 whole chunks.

// ACC8: V16..V23 += V0..V7 × V8..V15, element-wise.
#define ACC8 \
	FMUL4S(0, 0, 8)    \
	FMUL4S(1, 1, 9)    \
	FMUL4S(2, 2, 10)   \
	FMUL4S(3, 3, 11)   \
	FMUL4S(4, 4, 12)   \
	FMUL4S(5, 5, 13)   \
	FMUL4S(6, 6, 14)   \
	FMUL4S(7, 7, 15)   \
	FADD4S(16, 16, 0)  \
	FADD4S(17, 17, 1)  \
	FADD4S(18, 18, 2)  \
	FADD4S(19, 19, 3)  \
	FADD4S(20, 20, 4)  \
	FADD4S(21, 21, 5)  \
	FADD4S(22, 22, 6)  \
	FADD4S(23, 23, 7)

#define ZERO8 \
	ZERO(16) \
	ZERO(17) \
	ZERO(18) \
	ZERO(19) \
	ZERO(20) \
	ZERO(21) \
	ZERO(22) \
	ZERO(23)

// COMBINE: F0 = hsum8((acc0+acc2)+(acc1+acc3)).
#define COMBINE \
	FADD4S(16, 16, 20) \
	FADD4S(18, 18, 22) \
	FADD4S(16, 16, 18) \
	FADD4S(17, 17, 21) \
	FADD4S(19, 19, 23) \
	FADD4S(17, 17, 19) \
	HSUM8(0, 16, 17, 1)

// func dotF32NEON(w *byte, x *float32, n int) float32
TEXT ·dotF32NEON(SB), NOSPLIT, $0-28
	MOVD w+0(FP), R0
	MOVD x+8(FP), R1
	MOVD n+16(FP), R2
	ZERO8
	LSR  $5, R2, R3
	CBZ  R3, tail

chunk:
	VLD1.P 64(R0), [V0.S4, V1.S4, V2.S4, V3.S4]
	VLD1.P 64(R0), [V4.S4, V5.S4, V6.S4, V7.S4]
	VLD1.P 64(R1), [V8.S4, V9.S4, V10.S4, V11.S4]
	VLD1.P 64(R1), [V12.S4, V13.S4, V14.S4, V15.S4]
	ACC8
	SUBS   $1, R3, R3
	BNE    chunk

tail:
	COMBINE
	FMOVS ZR, F2
	ANDS  $31, R2, R3
	BEQ   done

tailloop:
	FMOVS.P 4(R0), F3
	FMOVS.P 4(R1), F4
	FMULS   F4, F3, F3
	FADDS   F3, F2, F2
	SUBS    $1, R3, R3
	BNE     tailloop

done:
	FADDS F2, F0, F0
	FMOVS F0, ret+24(FP)
	RET

// WIDEN(h, a): the 8 halves in Vh to float32 in Va (0-3) and Va+1 (4-7).
#define WIDEN(h, a, a1) \
	FCVTL4S(a, h) \
	FCVTL24S(a1, h)

// func dotF16NEON(w *byte, x *uint16, n int) float32
TEXT ·dotF16NEON(SB), NOSPLIT, $0-28
	MOVD w+0(FP), R0
	MOVD x+8(FP), R1
	MOVD n+16(FP), R2
	ZERO8
	LSR  $5, R2, R3
	CBZ  R3, tail

chunk:
	VLD1.P 64(R0), [V24.H8, V25.H8, V26.H8, V27.H8]
	VLD1.P 64(R1), [V28.H8, V29.H8, V30.H8, V31.H8]
	WIDEN(24, 0, 1)
	WIDEN(25, 2, 3)
	WIDEN(26, 4, 5)
	WIDEN(27, 6, 7)
	WIDEN(28, 8, 9)
	WIDEN(29, 10, 11)
	WIDEN(30, 12, 13)
	WIDEN(31, 14, 15)
	ACC8
	SUBS   $1, R3, R3
	BNE    chunk

tail:
	COMBINE
	FMOVS ZR, F2
	ANDS  $31, R2, R3
	BEQ   done

tailloop:
	MOVHU.P 2(R0), R4
	MOVHU.P 2(R1), R5
	FMOVS   R4, F3
	FMOVS   R5, F4
	FCVTHS  F3, F3
	FCVTHS  F4, F4
	FMULS   F4, F3, F3
	FADDS   F3, F2, F2
	SUBS    $1, R3, R3
	BNE     tailloop

done:
	FADDS F2, F0, F0
	FMOVS F0, ret+24(FP)
	RET
