//go:build amd64 && !purego

#include "textflag.h"

// AVX2 multi-token kernels for float rows (F32, F16) against 3 tokens
// (gemmf_amd64.go). The tokens' activations are packed as float32, token t
// at pk + 4·n·t (F16 activations converted exactly). Per row and token the
// order is the vector kernel's (dotF32AVX2/dotF16AVX2): four 8-lane
// accumulators over 32-element chunks, acc = acc + float32(w·x) with
// separate VMULPS/VADDPS, combined as (a0+a2)+(a1+a3), horizontally summed,
// and the last n mod 32 products summed in order into a scalar added last.
// Token t's accumulators are Y(4t)..Y(4t+3); each weight vector is loaded
// (and converted) once into Y12 for the three tokens.

#define PFDIST 1024

// FTOK3(k): weight vector Y12 (elements 8k..8k+7 of the chunk) times the
// three tokens' elements at 32k(R9), 32k(R10), 32k(R11).
#define FTOK3(k, a0, a1, a2) \
	VMULPS (32*k)(R9), Y12, Y13 \
	VADDPS Y13, a0, a0 \
	VMULPS (32*k)(R10), Y12, Y14 \
	VADDPS Y14, a1, a1 \
	VMULPS (32*k)(R11), Y12, Y15 \
	VADDPS Y15, a2, a2

// COMB(a0, a1, a2, a3): a0 = (a0+a2) + (a1+a3).
#define COMB(a0, a1, a2, a3) \
	VADDPS a2, a0, a0 \
	VADDPS a3, a1, a1 \
	VADDPS a1, a0, a0

// HSUMX(y, x, t): x[0] = (r0+r2)+(r1+r3), r[i] = y[i]+y[i+4] (x is y's low
// half).
#define HSUMX(y, x, t) \
	VEXTRACTF128 $1, y, t \
	VADDPS       t, x, x \
	VMOVHLPS     x, x, t \
	VADDPS       t, x, x \
	VMOVSHDUP    x, t \
	VADDSS       t, x, x

// FROWSETUP: SI = row, R9..R11 = the three tokens, accumulators zeroed.
#define FROWSETUP \
	MOVQ   R13, SI \
	MOVQ   pk+32(FP), R9 \
	LEAQ   (R9)(DX*1), R10 \
	LEAQ   (R10)(DX*1), R11 \
	VXORPS Y0, Y0, Y0 \
	VXORPS Y1, Y1, Y1 \
	VXORPS Y2, Y2, Y2 \
	VXORPS Y3, Y3, Y3 \
	VXORPS Y4, Y4, Y4 \
	VXORPS Y5, Y5, Y5 \
	VXORPS Y6, Y6, Y6 \
	VXORPS Y7, Y7, Y7 \
	VXORPS Y8, Y8, Y8 \
	VXORPS Y9, Y9, Y9 \
	VXORPS Y10, Y10, Y10 \
	VXORPS Y11, Y11, Y11

// FROWEND: combine, run the tail (scalar weight at X12 loaded by the
// caller's TAILW), horizontal sums plus tails, stores; next row.
#define FSTORE \
	HSUMX(Y0, X0, X12) \
	VADDSS X13, X0, X0 \
	VMOVSS X0, (R14) \
	HSUMX(Y4, X4, X12) \
	VADDSS X14, X4, X4 \
	VMOVSS X4, (R14)(R15*1) \
	HSUMX(Y8, X8, X12) \
	VADDSS X15, X8, X8 \
	VMOVSS X8, (R14)(R15*2)

// func gemmF32x3AVX2(w *byte, rb, rows, n int, pk *float32, y *float32, ys int)
TEXT ·gemmF32x3AVX2(SB), NOSPLIT, $0-56
	MOVQ w+0(FP), R13
	MOVQ rows+16(FP), R8
	MOVQ n+24(FP), DX
	SHLQ $2, DX                  // bytes per token
	MOVQ y+40(FP), R14
	MOVQ ys+48(FP), R15

f32row:
	FROWSETUP
	MOVQ n+24(FP), BX
	SHRQ $5, BX
	JZ   f32rest

f32chunk:
	PREFETCHT0 PFDIST(SI)
	PREFETCHT0 (PFDIST+64)(SI)
	VMOVUPS    (SI), Y12
	FTOK3(0, Y0, Y4, Y8)
	VMOVUPS    32(SI), Y12
	FTOK3(1, Y1, Y5, Y9)
	VMOVUPS    64(SI), Y12
	FTOK3(2, Y2, Y6, Y10)
	VMOVUPS    96(SI), Y12
	FTOK3(3, Y3, Y7, Y11)
	ADDQ       $128, SI
	ADDQ       $128, R9
	ADDQ       $128, R10
	ADDQ       $128, R11
	DECQ       BX
	JNZ        f32chunk

f32rest:
	COMB(Y0, Y1, Y2, Y3)
	COMB(Y4, Y5, Y6, Y7)
	COMB(Y8, Y9, Y10, Y11)
	VXORPS X13, X13, X13
	VXORPS X14, X14, X14
	VXORPS X15, X15, X15
	MOVQ   n+24(FP), BX
	ANDQ   $31, BX
	JZ     f32store

f32tail:
	VMOVSS (SI), X12
	VMULSS (R9), X12, X1
	VADDSS X1, X13, X13
	VMULSS (R10), X12, X2
	VADDSS X2, X14, X14
	VMULSS (R11), X12, X3
	VADDSS X3, X15, X15
	ADDQ   $4, SI
	ADDQ   $4, R9
	ADDQ   $4, R10
	ADDQ   $4, R11
	DECQ   BX
	JNZ    f32tail

f32store:
	FSTORE
	ADDQ rb+8(FP), R13
	ADDQ $4, R14
	DECQ R8
	JNZ  f32row
	VZEROUPPER
	RET

// func gemmF16x3AVX2(w *byte, rb, rows, n int, pk *float32, y *float32, ys int)
TEXT ·gemmF16x3AVX2(SB), NOSPLIT, $0-56
	MOVQ w+0(FP), R13
	MOVQ rows+16(FP), R8
	MOVQ n+24(FP), DX
	SHLQ $2, DX
	MOVQ y+40(FP), R14
	MOVQ ys+48(FP), R15

f16row:
	FROWSETUP
	MOVQ n+24(FP), BX
	SHRQ $5, BX
	JZ   f16rest

f16chunk:
	PREFETCHT0 PFDIST(SI)
	VCVTPH2PS  (SI), Y12
	FTOK3(0, Y0, Y4, Y8)
	VCVTPH2PS  16(SI), Y12
	FTOK3(1, Y1, Y5, Y9)
	VCVTPH2PS  32(SI), Y12
	FTOK3(2, Y2, Y6, Y10)
	VCVTPH2PS  48(SI), Y12
	FTOK3(3, Y3, Y7, Y11)
	ADDQ       $64, SI
	ADDQ       $128, R9
	ADDQ       $128, R10
	ADDQ       $128, R11
	DECQ       BX
	JNZ        f16chunk

f16rest:
	COMB(Y0, Y1, Y2, Y3)
	COMB(Y4, Y5, Y6, Y7)
	COMB(Y8, Y9, Y10, Y11)
	VXORPS X13, X13, X13
	VXORPS X14, X14, X14
	VXORPS X15, X15, X15
	MOVQ   n+24(FP), BX
	ANDQ   $31, BX
	JZ     f16store

f16tail:
	MOVWLZX   (SI), AX
	VMOVD     AX, X12
	VCVTPH2PS X12, X12
	VMULSS    (R9), X12, X1
	VADDSS    X1, X13, X13
	VMULSS    (R10), X12, X2
	VADDSS    X2, X14, X14
	VMULSS    (R11), X12, X3
	VADDSS    X3, X15, X15
	ADDQ      $2, SI
	ADDQ      $4, R9
	ADDQ      $4, R10
	ADDQ      $4, R11
	DECQ      BX
	JNZ       f16tail

f16store:
	FSTORE
	ADDQ rb+8(FP), R13
	ADDQ $4, R14
	DECQ R8
	JNZ  f16row
	VZEROUPPER
	RET
