//go:build amd64 && !purego

#include "textflag.h"

// The gated delta rule (delta.go), AVX2: four state rows at a time, each
// row's four float32 dot lanes (element i mod 4) in one XMM register as in
// dotsF32AVX2, combined as (s0+s1)+(s2+s3). Pass 1 scales the rows by eg
// (stored back) and dots them with k; pass 2 adds k·δ (VMULPS then VADDPS:
// the product rounds first) and dots the updated rows with q.

// HSUM4(x, t, u): t[0] = (x0+x1)+(x2+x3).
#define HSUM4(x, t, u) \
	VMOVSHDUP x, t \
	VADDPS    t, x, t \
	VMOVHLPS  t, t, u \
	VADDSS    u, t, t

// DELTA(acc, vo, d): d = broadcast((v[vo] − hsum(acc))·beta).
#define DELTA(acc, vo, d) \
	HSUM4(acc, X10, X11) \
	VMOVSS       vo(R14), d \
	VSUBSS       X10, d, d \
	VMULSS       X13, d, d \
	VBROADCASTSS d, d

// OUT(acc, oo): out[oo] = hsum(acc)·scale.
#define OUT(acc, oo) \
	HSUM4(acc, X10, X11) \
	VMULSS X14, X10, X10 \
	VMOVSS X10, oo(R9)

// func deltaRuleAVX2(m, k, q, v, out *float32, w, rows int, eg, beta, scale float32)
//
// w a positive multiple of 4, rows a positive multiple of 4.
TEXT ·deltaRuleAVX2(SB), NOSPLIT, $0-68
	MOVQ         m+0(FP), DI
	MOVQ         k+8(FP), SI
	MOVQ         q+16(FP), DX
	MOVQ         v+24(FP), R14
	MOVQ         out+32(FP), R9
	MOVQ         w+40(FP), CX
	MOVQ         rows+48(FP), AX
	VBROADCASTSS eg+56(FP), X12
	VMOVSS       beta+60(FP), X13
	VMOVSS       scale+64(FP), X14
	MOVQ         CX, R8
	SHLQ         $2, R8

drgroup:
	MOVQ   DI, R10
	LEAQ   (DI)(R8*1), R11
	LEAQ   (DI)(R8*2), R12
	LEAQ   (R11)(R8*2), R13
	VXORPS X0, X0, X0
	VXORPS X1, X1, X1
	VXORPS X2, X2, X2
	VXORPS X3, X3, X3
	XORQ   BX, BX

drpass1:
	VMOVUPS (SI)(BX*4), X4
	VMULPS  (R10)(BX*4), X12, X5
	VMOVUPS X5, (R10)(BX*4)
	VMULPS  X4, X5, X5
	VADDPS  X5, X0, X0
	VMULPS  (R11)(BX*4), X12, X6
	VMOVUPS X6, (R11)(BX*4)
	VMULPS  X4, X6, X6
	VADDPS  X6, X1, X1
	VMULPS  (R12)(BX*4), X12, X7
	VMOVUPS X7, (R12)(BX*4)
	VMULPS  X4, X7, X7
	VADDPS  X7, X2, X2
	VMULPS  (R13)(BX*4), X12, X8
	VMOVUPS X8, (R13)(BX*4)
	VMULPS  X4, X8, X8
	VADDPS  X8, X3, X3
	ADDQ    $4, BX
	CMPQ    BX, CX
	JLT     drpass1

	DELTA(X0, 0, X0)
	DELTA(X1, 4, X1)
	DELTA(X2, 8, X2)
	DELTA(X3, 12, X3)
	VXORPS X6, X6, X6
	VXORPS X7, X7, X7
	VXORPS X8, X8, X8
	VXORPS X9, X9, X9
	XORQ   BX, BX

drpass2:
	VMOVUPS (SI)(BX*4), X4
	VMOVUPS (DX)(BX*4), X5
	VMULPS  X0, X4, X10
	VADDPS  (R10)(BX*4), X10, X10
	VMOVUPS X10, (R10)(BX*4)
	VMULPS  X5, X10, X10
	VADDPS  X10, X6, X6
	VMULPS  X1, X4, X11
	VADDPS  (R11)(BX*4), X11, X11
	VMOVUPS X11, (R11)(BX*4)
	VMULPS  X5, X11, X11
	VADDPS  X11, X7, X7
	VMULPS  X2, X4, X10
	VADDPS  (R12)(BX*4), X10, X10
	VMOVUPS X10, (R12)(BX*4)
	VMULPS  X5, X10, X10
	VADDPS  X10, X8, X8
	VMULPS  X3, X4, X11
	VADDPS  (R13)(BX*4), X11, X11
	VMOVUPS X11, (R13)(BX*4)
	VMULPS  X5, X11, X11
	VADDPS  X11, X9, X9
	ADDQ    $4, BX
	CMPQ    BX, CX
	JLT     drpass2

	OUT(X6, 0)
	OUT(X7, 4)
	OUT(X8, 8)
	OUT(X9, 12)
	LEAQ (DI)(R8*4), DI
	ADDQ $16, R14
	ADDQ $16, R9
	SUBQ $4, AX
	JNZ  drgroup
	RET
