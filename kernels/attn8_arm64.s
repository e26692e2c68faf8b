//go:build arm64 && !purego

#include "textflag.h"
#include "neon_arm64.h"

// Grouped attention (attn8.go) over an F16 cache, NEON: GroupSlots (8)
// query heads that share each K and V row, which is loaded and widened
// once for all of them. Per head every sum is the single-head helpers'
// (attn_arm64.s) in the same order and with the same operands: score
// lanes i mod 4 summed with FMUL then FADD and combined as (s0+s1)+(s2+s3),
// value sums out += float32(p_j·v_j) row by row. Registers R0-R12 and
// V0-V31; none is callee-saved in Go's ABI0.

// func dots8F16NEON(qp *float32, k *uint16, stride, dim, n int, scores *float32)
//
// scores[s·n + j] = q_s · k_j for the 8 heads and n rows. qp holds the
// heads' queries (already rounded to F16) chunk-major: 4 values of head 0,
// of head 1, … of head 7, then the next 4 of each. dim is a multiple of 4,
// n at least 1. Two rows at a time: V16-V23 and V24-V31 accumulate the
// heads' lanes for rows j and j+1.
TEXT ·dots8F16NEON(SB), NOSPLIT, $0-48
	MOVD qp+0(FP), R0
	MOVD k+8(FP), R1
	MOVD stride+16(FP), R2
	MOVD dim+24(FP), R3
	MOVD n+32(FP), R4
	MOVD scores+40(FP), R5
	LSL  $1, R2, R2
	LSR  $2, R3, R3
	LSL  $2, R4, R6
	CMP  $2, R4
	BLT  one
two:
	MOVD R0, R9
	MOVD R1, R10
	ADD  R2, R10, R11
	MOVD R3, R8
	ZERO(16)
	ZERO(17)
	ZERO(18)
	ZERO(19)
	ZERO(20)
	ZERO(21)
	ZERO(22)
	ZERO(23)
	ZERO(24)
	ZERO(25)
	ZERO(26)
	ZERO(27)
	ZERO(28)
	ZERO(29)
	ZERO(30)
	ZERO(31)
loop2:
	VLD1.P 8(R10), [V0.H4]
	VLD1.P 8(R11), [V1.H4]
	FCVTL4S(0, 0)
	FCVTL4S(1, 1)
	VLD1.P 64(R9), [V8.S4, V9.S4, V10.S4, V11.S4]
	VLD1.P 64(R9), [V12.S4, V13.S4, V14.S4, V15.S4]
	FMUL4S(2, 0, 8)
	FMUL4S(3, 1, 8)
	FADD4S(16, 16, 2)
	FADD4S(24, 24, 3)
	FMUL4S(4, 0, 9)
	FMUL4S(5, 1, 9)
	FADD4S(17, 17, 4)
	FADD4S(25, 25, 5)
	FMUL4S(2, 0, 10)
	FMUL4S(3, 1, 10)
	FADD4S(18, 18, 2)
	FADD4S(26, 26, 3)
	FMUL4S(4, 0, 11)
	FMUL4S(5, 1, 11)
	FADD4S(19, 19, 4)
	FADD4S(27, 27, 5)
	FMUL4S(2, 0, 12)
	FMUL4S(3, 1, 12)
	FADD4S(20, 20, 2)
	FADD4S(28, 28, 3)
	FMUL4S(4, 0, 13)
	FMUL4S(5, 1, 13)
	FADD4S(21, 21, 4)
	FADD4S(29, 29, 5)
	FMUL4S(2, 0, 14)
	FMUL4S(3, 1, 14)
	FADD4S(22, 22, 2)
	FADD4S(30, 30, 3)
	FMUL4S(4, 0, 15)
	FMUL4S(5, 1, 15)
	FADD4S(23, 23, 4)
	FADD4S(31, 31, 5)
	SUBS $1, R8, R8
	BNE  loop2
	MOVD R5, R12
	HSUMP4(16, 16)
	HSUMP4(24, 24)
	FMOVS F16, (R12)
	FMOVS F24, 4(R12)
	ADD   R6, R12, R12
	HSUMP4(17, 17)
	HSUMP4(25, 25)
	FMOVS F17, (R12)
	FMOVS F25, 4(R12)
	ADD   R6, R12, R12
	HSUMP4(18, 18)
	HSUMP4(26, 26)
	FMOVS F18, (R12)
	FMOVS F26, 4(R12)
	ADD   R6, R12, R12
	HSUMP4(19, 19)
	HSUMP4(27, 27)
	FMOVS F19, (R12)
	FMOVS F27, 4(R12)
	ADD   R6, R12, R12
	HSUMP4(20, 20)
	HSUMP4(28, 28)
	FMOVS F20, (R12)
	FMOVS F28, 4(R12)
	ADD   R6, R12, R12
	HSUMP4(21, 21)
	HSUMP4(29, 29)
	FMOVS F21, (R12)
	FMOVS F29, 4(R12)
	ADD   R6, R12, R12
	HSUMP4(22, 22)
	HSUMP4(30, 30)
	FMOVS F22, (R12)
	FMOVS F30, 4(R12)
	ADD   R6, R12, R12
	HSUMP4(23, 23)
	HSUMP4(31, 31)
	FMOVS F23, (R12)
	FMOVS F31, 4(R12)
	ADD  $8, R5, R5
	ADD  R2<<1, R1, R1
	SUB  $2, R4, R4
	CMP  $2, R4
	BGE  two
one:
	CBZ  R4, done
	MOVD R0, R9
	MOVD R1, R10
	MOVD R3, R8
	ZERO(16)
	ZERO(17)
	ZERO(18)
	ZERO(19)
	ZERO(20)
	ZERO(21)
	ZERO(22)
	ZERO(23)
loop1:
	VLD1.P 8(R10), [V0.H4]
	FCVTL4S(0, 0)
	VLD1.P 64(R9), [V8.S4, V9.S4, V10.S4, V11.S4]
	VLD1.P 64(R9), [V12.S4, V13.S4, V14.S4, V15.S4]
	FMUL4S(2, 0, 8)
	FADD4S(16, 16, 2)
	FMUL4S(3, 0, 9)
	FADD4S(17, 17, 3)
	FMUL4S(4, 0, 10)
	FADD4S(18, 18, 4)
	FMUL4S(5, 0, 11)
	FADD4S(19, 19, 5)
	FMUL4S(2, 0, 12)
	FADD4S(20, 20, 2)
	FMUL4S(3, 0, 13)
	FADD4S(21, 21, 3)
	FMUL4S(4, 0, 14)
	FADD4S(22, 22, 4)
	FMUL4S(5, 0, 15)
	FADD4S(23, 23, 5)
	SUBS $1, R8, R8
	BNE  loop1
	MOVD R5, R12
	HSUMP4(16, 16)
	FMOVS F16, (R12)
	ADD   R6, R12, R12
	HSUMP4(17, 17)
	FMOVS F17, (R12)
	ADD   R6, R12, R12
	HSUMP4(18, 18)
	FMOVS F18, (R12)
	ADD   R6, R12, R12
	HSUMP4(19, 19)
	FMOVS F19, (R12)
	ADD   R6, R12, R12
	HSUMP4(20, 20)
	FMOVS F20, (R12)
	ADD   R6, R12, R12
	HSUMP4(21, 21)
	FMOVS F21, (R12)
	ADD   R6, R12, R12
	HSUMP4(22, 22)
	FMOVS F22, (R12)
	ADD   R6, R12, R12
	HSUMP4(23, 23)
	FMOVS F23, (R12)
done:
	RET

// func axpys8F16NEON(out *float32, pt *float32, v *uint16, stride, dim, n int)
//
// out_s += Σ_j float32(p_sj·v_j) in row order for the 8 heads, out_s at
// out + s·dim, p_sj at pt[8j + s] (the probabilities transposed to row
// order), v_j at v + j·stride. dim is a multiple of 8, n at least 1. Per
// 8 values of the heads' outputs (V16-V31, two registers a head) the rows
// are added in order: each row's 8 values widened once (V1, V2), each
// head's probability taken by lane (FMUL by element).
TEXT ·axpys8F16NEON(SB), NOSPLIT, $0-48
	MOVD out+0(FP), R0
	MOVD pt+8(FP), R1
	MOVD v+16(FP), R2
	MOVD stride+24(FP), R3
	MOVD dim+32(FP), R4
	MOVD n+40(FP), R5
	LSL  $1, R3, R3
	LSL  $2, R4, R7
	LSR  $3, R4, R6
chunk:
	MOVD R0, R12
	VLD1 (R12), [V16.S4, V17.S4]
	ADD  R7, R12, R12
	VLD1 (R12), [V18.S4, V19.S4]
	ADD  R7, R12, R12
	VLD1 (R12), [V20.S4, V21.S4]
	ADD  R7, R12, R12
	VLD1 (R12), [V22.S4, V23.S4]
	ADD  R7, R12, R12
	VLD1 (R12), [V24.S4, V25.S4]
	ADD  R7, R12, R12
	VLD1 (R12), [V26.S4, V27.S4]
	ADD  R7, R12, R12
	VLD1 (R12), [V28.S4, V29.S4]
	ADD  R7, R12, R12
	VLD1 (R12), [V30.S4, V31.S4]
	MOVD R1, R9
	MOVD R2, R10
	MOVD R5, R8
rows:
	VLD1   (R10), [V0.H8]
	ADD    R3, R10, R10
	FCVTL4S(1, 0)
	FCVTL24S(2, 0)
	VLD1.P 32(R9), [V4.S4, V5.S4]
	FMULE(6, 1, 4, 0)
	FMULE(7, 2, 4, 0)
	FADD4S(16, 16, 6)
	FADD4S(17, 17, 7)
	FMULE(8, 1, 4, 1)
	FMULE(9, 2, 4, 1)
	FADD4S(18, 18, 8)
	FADD4S(19, 19, 9)
	FMULE(6, 1, 4, 2)
	FMULE(7, 2, 4, 2)
	FADD4S(20, 20, 6)
	FADD4S(21, 21, 7)
	FMULE(8, 1, 4, 3)
	FMULE(9, 2, 4, 3)
	FADD4S(22, 22, 8)
	FADD4S(23, 23, 9)
	FMULE(6, 1, 5, 0)
	FMULE(7, 2, 5, 0)
	FADD4S(24, 24, 6)
	FADD4S(25, 25, 7)
	FMULE(8, 1, 5, 1)
	FMULE(9, 2, 5, 1)
	FADD4S(26, 26, 8)
	FADD4S(27, 27, 9)
	FMULE(6, 1, 5, 2)
	FMULE(7, 2, 5, 2)
	FADD4S(28, 28, 6)
	FADD4S(29, 29, 7)
	FMULE(8, 1, 5, 3)
	FMULE(9, 2, 5, 3)
	FADD4S(30, 30, 8)
	FADD4S(31, 31, 9)
	SUBS $1, R8, R8
	BNE  rows
	MOVD R0, R12
	VST1 [V16.S4, V17.S4], (R12)
	ADD  R7, R12, R12
	VST1 [V18.S4, V19.S4], (R12)
	ADD  R7, R12, R12
	VST1 [V20.S4, V21.S4], (R12)
	ADD  R7, R12, R12
	VST1 [V22.S4, V23.S4], (R12)
	ADD  R7, R12, R12
	VST1 [V24.S4, V25.S4], (R12)
	ADD  R7, R12, R12
	VST1 [V26.S4, V27.S4], (R12)
	ADD  R7, R12, R12
	VST1 [V28.S4, V29.S4], (R12)
	ADD  R7, R12, R12
	VST1 [V30.S4, V31.S4], (R12)
	ADD  $32, R0, R0
	ADD  $16, R2, R2
	SUBS $1, R6, R6
	BNE  chunk
	RET
