//go:build arm64 && !purego

#include "textflag.h"
#include "neon_arm64.h"

// Attention helpers (attn.go), NEON, in the reference's float order:
//
//   - dots: one vector accumulator per row whose lane i holds the sum over
//     elements i mod 4, products and sums rounded apart (FMUL then FADD),
//     combined as (s0+s1)+(s2+s3) (HSUMP4). Four rows at a time share each
//     load of q; the last 0-3 rows run one at a time.
//   - axpys: a 32-float (then 4-float) chunk of out stays in registers
//     while the rows are added to it in order, out += float32(p_j·v_j).
//   - F16 values widen exactly with FCVTL; rounding to F16 is FCVTN (to
//     nearest, ties to even, under the default FPCR). FCVTN keeps a NaN's
//     payload, unlike quant.FP32ToFP16, so the routines that narrow report
//     whether any value was a NaN and the caller redoes those.
//
// Row lengths are multiples of 4 and row counts at least 1 (attn_arm64.go
// checks both). Registers R0-R13 and V0-V31; none is callee-saved in Go's
// ABI0.

// DOT4STEP(ld): V0-V3 += q·row for four rows; ld loads the next 4 values
// of each row (at R10-R13) into V5, V6, V7, V16 as float32.
#define DOT4STEP(ld) \
	VLD1.P 16(R9), [V4.S4] \
	ld                     \
	FMUL4S(5, 5, 4)        \
	FMUL4S(6, 6, 4)        \
	FMUL4S(7, 7, 4)        \
	FMUL4S(16, 16, 4)      \
	FADD4S(0, 0, 5)        \
	FADD4S(1, 1, 6)        \
	FADD4S(2, 2, 7)        \
	FADD4S(3, 3, 16)

#define LD4F32 \
	VLD1.P 16(R10), [V5.S4]  \
	VLD1.P 16(R11), [V6.S4]  \
	VLD1.P 16(R12), [V7.S4]  \
	VLD1.P 16(R13), [V16.S4]

#define LD4F16 \
	VLD1.P 8(R10), [V5.H4]  \
	VLD1.P 8(R11), [V6.H4]  \
	VLD1.P 8(R12), [V7.H4]  \
	VLD1.P 8(R13), [V16.H4] \
	FCVTL4S(5, 5)           \
	FCVTL4S(6, 6)           \
	FCVTL4S(7, 7)           \
	FCVTL4S(16, 16)

#define LD1F32 VLD1.P 16(R10), [V5.S4]

#define LD1F16 \
	VLD1.P 8(R10), [V5.H4] \
	FCVTL4S(5, 5)

// DOTS(ld4, ld1): the body of dotsF32NEON/dotsF16NEON. R0 q, R1 k (row 0),
// R2 the row stride in bytes, R3 dim/4, R4 rows, R5 out.
#define DOTS(ld4, ld1) \
	CMP    $4, R4         \
	BLT    one            \
four:                     \
	MOVD   R0, R9         \
	MOVD   R1, R10        \
	ADD    R2, R10, R11   \
	ADD    R2, R11, R12   \
	ADD    R2, R12, R13   \
	MOVD   R3, R8         \
	ZERO(0)               \
	ZERO(1)               \
	ZERO(2)               \
	ZERO(3)               \
loop4:                    \
	DOT4STEP(ld4)         \
	SUBS   $1, R8, R8     \
	BNE    loop4          \
	HSUMP4(0, 0)          \
	HSUMP4(1, 1)          \
	HSUMP4(2, 2)          \
	HSUMP4(3, 3)          \
	FMOVS.P F0, 4(R5)     \
	FMOVS.P F1, 4(R5)     \
	FMOVS.P F2, 4(R5)     \
	FMOVS.P F3, 4(R5)     \
	ADD    R2<<2, R1, R1  \
	SUB    $4, R4, R4     \
	CMP    $4, R4         \
	BGE    four           \
one:                      \
	CBZ    R4, done       \
	MOVD   R0, R9         \
	MOVD   R1, R10        \
	MOVD   R3, R8         \
	ZERO(0)               \
loop1:                    \
	VLD1.P 16(R9), [V4.S4] \
	ld1                   \
	FMUL4S(5, 5, 4)       \
	FADD4S(0, 0, 5)       \
	SUBS   $1, R8, R8     \
	BNE    loop1          \
	HSUMP4(0, 0)          \
	FMOVS.P F0, 4(R5)     \
	ADD    R2, R1, R1     \
	SUB    $1, R4, R4     \
	B      one            \
done:                     \
	RET

#define DOTSARGS \
	MOVD q+0(FP), R0      \
	MOVD k+8(FP), R1      \
	MOVD stride+16(FP), R2 \
	MOVD dim+24(FP), R3   \
	MOVD n+32(FP), R4     \
	MOVD out+40(FP), R5   \
	LSR  $2, R3, R3

// The argument loads are defined above the first TEXT: go vet reads a
// #define's lines as part of the function before it.
#define AXPYSARGS \
	MOVD out+0(FP), R0     \
	MOVD p+8(FP), R1       \
	MOVD v+16(FP), R2      \
	MOVD stride+24(FP), R3 \
	MOVD dim+32(FP), R4    \
	MOVD n+40(FP), R5

// SCALEDARGS: R0 out, R1 y, R2 n/4, V8 = w in every lane.
#define SCALEDARGS \
	MOVD  out+0(FP), R0    \
	MOVD  y+8(FP), R1      \
	MOVD  n+16(FP), R2     \
	FMOVS w+24(FP), F8     \
	VDUP  V8.S[0], V8.S4   \
	LSR   $2, R2, R2

// func dotsF32NEON(q *float32, k *float32, stride, dim, n int, out *float32)
TEXT ·dotsF32NEON(SB), NOSPLIT, $0-48
	DOTSARGS
	LSL $2, R2, R2
	DOTS(LD4F32, LD1F32)

// func dotsF16NEON(q *float32, k *uint16, stride, dim, n int, out *float32)
TEXT ·dotsF16NEON(SB), NOSPLIT, $0-48
	DOTSARGS
	LSL $1, R2, R2
	DOTS(LD4F16, LD1F16)

// AXPY8: V0-V7 += V24-V31 · V8 (the row's 32 values, p_j broadcast in V8).
#define AXPY8 \
	FMUL4S(24, 24, 8) \
	FMUL4S(25, 25, 8) \
	FMUL4S(26, 26, 8) \
	FMUL4S(27, 27, 8) \
	FMUL4S(28, 28, 8) \
	FMUL4S(29, 29, 8) \
	FMUL4S(30, 30, 8) \
	FMUL4S(31, 31, 8) \
	FADD4S(0, 0, 24)  \
	FADD4S(1, 1, 25)  \
	FADD4S(2, 2, 26)  \
	FADD4S(3, 3, 27)  \
	FADD4S(4, 4, 28)  \
	FADD4S(5, 5, 29)  \
	FADD4S(6, 6, 30)  \
	FADD4S(7, 7, 31)

// 32 values of the row at R10 into V24-V31.
#define LD32F32 \
	VLD1 (R10), [V24.S4, V25.S4, V26.S4, V27.S4] \
	ADD  $64, R10, R11                          \
	VLD1 (R11), [V28.S4, V29.S4, V30.S4, V31.S4]

#define LD32F16 \
	VLD1 (R10), [V16.H8, V17.H8, V18.H8, V19.H8] \
	FCVTL4S(24, 16)                             \
	FCVTL24S(25, 16)                            \
	FCVTL4S(26, 17)                             \
	FCVTL24S(27, 17)                            \
	FCVTL4S(28, 18)                             \
	FCVTL24S(29, 18)                            \
	FCVTL4S(30, 19)                             \
	FCVTL24S(31, 19)

#define LD4VF32 VLD1 (R10), [V24.S4]

#define LD4VF16 \
	VLD1 (R10), [V16.H4] \
	FCVTL4S(24, 16)

// AXPYS(ld32, ld4, esz): the body of axpysF32NEON/axpysF16NEON. R0 out,
// R1 p, R2 v (row 0 at the chunk), R3 the row stride in bytes, R4 dim,
// R5 rows; esz is log2 of a value's size in v.
#define AXPYS(ld32, ld4, esz) \
	LSR    $5, R4, R6                    \
	CBZ    R6, tail                      \
chunk32:                                 \
	VLD1   (R0), [V0.S4, V1.S4, V2.S4, V3.S4] \
	ADD    $64, R0, R7                   \
	VLD1   (R7), [V4.S4, V5.S4, V6.S4, V7.S4] \
	MOVD   R1, R9                        \
	MOVD   R2, R10                       \
	MOVD   R5, R8                        \
rows32:                                  \
	VLD1R.P 4(R9), [V8.S4]               \
	ld32                                 \
	ADD    R3, R10, R10                  \
	AXPY8                                \
	SUBS   $1, R8, R8                    \
	BNE    rows32                        \
	VST1.P [V0.S4, V1.S4, V2.S4, V3.S4], 64(R0) \
	VST1.P [V4.S4, V5.S4, V6.S4, V7.S4], 64(R0) \
	ADD    $(32<<esz), R2, R2            \
	SUBS   $1, R6, R6                    \
	BNE    chunk32                       \
tail:                                    \
	AND    $31, R4, R6                   \
	LSR    $2, R6, R6                    \
	CBZ    R6, done                      \
chunk4:                                  \
	VLD1   (R0), [V0.S4]                 \
	MOVD   R1, R9                        \
	MOVD   R2, R10                       \
	MOVD   R5, R8                        \
rows4:                                   \
	VLD1R.P 4(R9), [V8.S4]               \
	ld4                                  \
	ADD    R3, R10, R10                  \
	FMUL4S(24, 24, 8)                    \
	FADD4S(0, 0, 24)                     \
	SUBS   $1, R8, R8                    \
	BNE    rows4                         \
	VST1.P [V0.S4], 16(R0)               \
	ADD    $(4<<esz), R2, R2             \
	SUBS   $1, R6, R6                    \
	BNE    chunk4                        \
done:                                    \
	RET

// func axpysF32NEON(out *float32, p *float32, v *float32, stride, dim, n int)
TEXT ·axpysF32NEON(SB), NOSPLIT, $0-48
	AXPYSARGS
	LSL $2, R3, R3
	AXPYS(LD32F32, LD4VF32, 2)

// func axpysF16NEON(out *float32, p *float32, v *uint16, stride, dim, n int)
TEXT ·axpysF16NEON(SB), NOSPLIT, $0-48
	AXPYSARGS
	LSL $1, R3, R3
	AXPYS(LD32F16, LD4VF16, 1)

// NANS(ret): ret = whether V31 (the AND of the FCMEQ masks) has a zero
// lane, i.e. some value was a NaN.
#define NANS(ret) \
	VMOV V31.D[0], R2 \
	VMOV V31.D[1], R3 \
	AND  R2, R3, R2   \
	CMN  $1, R2       \
	CSET NE, R2       \
	MOVB R2, ret

// func roundF16sNEON(x *float32, n int) bool
//
// x[i] = float32(f16(x[i])) for n values, n a positive multiple of 4.
TEXT ·roundF16sNEON(SB), NOSPLIT, $0-17
	MOVD x+0(FP), R0
	MOVD n+8(FP), R1
	LSR  $2, R1, R1
	ZERO(31)
	FCMEQ4S(31, 31, 31)

round:
	VLD1   (R0), [V0.S4]
	FCMEQ4S(1, 0, 0)
	VAND   V1.B16, V31.B16, V31.B16
	FCVTN4H(2, 0)
	FCVTL4S(0, 2)
	VST1.P [V0.S4], 16(R0)
	SUBS   $1, R1, R1
	BNE    round
	NANS(ret+16(FP))
	RET

// func fp32ToFP16sNEON(dst *uint16, src *float32, n int) bool
//
// dst[i] = f16(src[i]) for n values, n a positive multiple of 4.
TEXT ·fp32ToFP16sNEON(SB), NOSPLIT, $0-25
	MOVD dst+0(FP), R0
	MOVD src+8(FP), R1
	MOVD n+16(FP), R4
	LSR  $2, R4, R4
	ZERO(31)
	FCMEQ4S(31, 31, 31)

conv:
	VLD1.P 16(R1), [V0.S4]
	FCMEQ4S(1, 0, 0)
	VAND   V1.B16, V31.B16, V31.B16
	FCVTN4H(2, 0)
	VST1.P [V2.H4], 8(R0)
	SUBS   $1, R4, R4
	BNE    conv
	NANS(ret+24(FP))
	RET

// func mulScalarNEON(out, y *float32, n int, w float32)
//
// out[i] = y[i]·w for n values, n a positive multiple of 4.
TEXT ·mulScalarNEON(SB), NOSPLIT, $0-28
	SCALEDARGS

mul:
	VLD1.P 16(R1), [V0.S4]
	FMUL4S(0, 0, 8)
	VST1.P [V0.S4], 16(R0)
	SUBS   $1, R2, R2
	BNE    mul
	RET

// func addMulScalarNEON(out, y *float32, n int, w float32)
//
// out[i] += float32(y[i]·w) for n values, n a positive multiple of 4.
TEXT ·addMulScalarNEON(SB), NOSPLIT, $0-28
	SCALEDARGS

addmul:
	VLD1.P 16(R1), [V0.S4]
	VLD1   (R0), [V1.S4]
	FMUL4S(0, 0, 8)
	FADD4S(1, 1, 0)
	VST1.P [V1.S4], 16(R0)
	SUBS   $1, R2, R2
	BNE    addmul
	RET
