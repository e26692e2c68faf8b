//go:build arm64 && !purego

#include "textflag.h"
#include "neon_arm64.h"

// The gated delta rule (delta.go), NEON: four state rows at a time, each
// row's four float32 dot lanes (element i mod 4) in one vector register,
// combined as (s0+s1)+(s2+s3) with pairwise adds, as the reference's
// DotsF32 order. Pass 1 scales the rows by eg (stored back) and dots them
// with k; pass 2 adds k·δ (FMUL then FADD: the product rounds first) and
// dots the updated rows with q.

// P1ROW(p, vm, m, t, acc): the row at p (into register vm, number m)
// scaled by V12 and stored, acc += row·V4.
#define P1ROW(p, vm, m, t, acc) \
	VLD1   (p), [vm.S4]   \
	FMUL4S(m, m, 12)      \
	VST1.P [vm.S4], 16(p) \
	FMUL4S(t, m, 4)         \
	FADD4S(acc, acc, t)

// P2ROW(p, vm, m, t, dl, acc): the row at p (into vm, number m) += V4·dl
// and stored, acc += row·V5.
#define P2ROW(p, vm, m, t, dl, acc) \
	VLD1   (p), [vm.S4]   \
	FMUL4S(t, 4, dl)      \
	FADD4S(m, m, t)       \
	VST1.P [vm.S4], 16(p) \
	FMUL4S(t, m, 5)         \
	FADD4S(acc, acc, t)

// DELTA(acc, vo, fd, vd): vd (fd its scalar) = broadcast((v[vo] −
// hsum(acc))·beta).
#define DELTA(acc, vo, fd, vd) \
	HSUMP4(29, acc)  \
	FMOVS vo(R3), fd \
	FSUBS F29, fd, fd \
	FMULS F13, fd, fd \
	VDUP  vd.S[0], vd.S4

// OUT(acc, oo): out[oo] = hsum(acc)·scale.
#define OUT(acc, oo) \
	HSUMP4(29, acc)    \
	FMULS F14, F29, F29 \
	FMOVS F29, oo(R4)

// ROWS: R10..R13 = the group's four rows from R0; R9, R19 = k, q; R8 = w/4.
#define ROWS \
	MOVD R0, R10        \
	ADD  R7, R10, R11   \
	ADD  R7, R11, R12   \
	ADD  R7, R12, R13   \
	MOVD R1, R9         \
	MOVD R2, R19        \
	LSR  $2, R5, R8

// func deltaRuleNEON(m, k, q, v, out *float32, w, rows int, eg, beta, scale float32)
//
// w a positive multiple of 4, rows a positive multiple of 4.
TEXT ·deltaRuleNEON(SB), NOSPLIT, $0-68
	MOVD  m+0(FP), R0
	MOVD  k+8(FP), R1
	MOVD  q+16(FP), R2
	MOVD  v+24(FP), R3
	MOVD  out+32(FP), R4
	MOVD  w+40(FP), R5
	MOVD  rows+48(FP), R6
	FMOVS eg+56(FP), F12
	VDUP  V12.S[0], V12.S4
	FMOVS beta+60(FP), F13
	FMOVS scale+64(FP), F14
	LSL   $2, R5, R7

group:
	ROWS
	ZERO(0)
	ZERO(1)
	ZERO(2)
	ZERO(3)

pass1:
	VLD1.P 16(R9), [V4.S4]
	P1ROW(R10, V16, 16, 17, 0)
	P1ROW(R11, V18, 18, 19, 1)
	P1ROW(R12, V16, 16, 17, 2)
	P1ROW(R13, V18, 18, 19, 3)
	SUBS   $1, R8, R8
	BNE    pass1

	DELTA(0, 0, F20, V20)
	DELTA(1, 4, F21, V21)
	DELTA(2, 8, F22, V22)
	DELTA(3, 12, F23, V23)
	ROWS
	ZERO(24)
	ZERO(25)
	ZERO(26)
	ZERO(27)

pass2:
	VLD1.P 16(R9), [V4.S4]
	VLD1.P 16(R19), [V5.S4]
	P2ROW(R10, V16, 16, 17, 20, 24)
	P2ROW(R11, V18, 18, 19, 21, 25)
	P2ROW(R12, V16, 16, 17, 22, 26)
	P2ROW(R13, V18, 18, 19, 23, 27)
	SUBS   $1, R8, R8
	BNE    pass2

	OUT(24, 0)
	OUT(25, 4)
	OUT(26, 8)
	OUT(27, 12)
	ADD  R7<<2, R0, R0
	ADD  $16, R3, R3
	ADD  $16, R4, R4
	SUBS $4, R6, R6
	BNE  group
	RET
