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

// The AVX-512 version: four rows at a time, 16 elements of each per ZMM
// register. The element-wise products run 16 wide; the four rows' 16-wide
// products are transposed by 128-bit lanes so that one ZMM holds chunk c
// (4 elements) of all four rows, and a single accumulator holds every
// row's four dot lanes (row r in 128-bit lane r), added chunk by chunk in
// the reference's order.

// T4X4: Z5..Z8 (rows a..d, chunks 0-3 each) become Z5..Z8 = chunk 0..3 of
// rows a..d. Clobbers Z9..Z12.
#define T4X4 \
	VSHUFF32X4 $0x44, Z6, Z5, Z9  \
	VSHUFF32X4 $0xEE, Z6, Z5, Z10 \
	VSHUFF32X4 $0x44, Z8, Z7, Z11 \
	VSHUFF32X4 $0xEE, Z8, Z7, Z12 \
	VSHUFF32X4 $0x88, Z11, Z9, Z5 \
	VSHUFF32X4 $0xDD, Z11, Z9, Z6 \
	VSHUFF32X4 $0x88, Z12, Z10, Z7 \
	VSHUFF32X4 $0xDD, Z12, Z10, Z8

// ACC4(acc): acc += Z5, Z6, Z7, Z8 in order.
#define ACC4(acc) \
	VADDPS Z5, acc, acc \
	VADDPS Z6, acc, acc \
	VADDPS Z7, acc, acc \
	VADDPS Z8, acc, acc

// HSUM4X4(acc): Z9 = every 128-bit lane's (x0+x1)+(x2+x3) in all of its
// elements. Clobbers Z10.
#define HSUM4X4(acc) \
	VMOVSHDUP acc, Z9         \
	VADDPS    Z9, acc, Z9     \
	VPERMILPS $0x02, Z9, Z10  \
	VADDPS    Z10, Z9, Z9     \
	VPERMILPS $0x00, Z9, Z9

// func deltaRuleAVX512(m, k, q, v, out *float32, w, rows int, eg, beta, scale float32, idx *int32)
//
// w a positive multiple of 16, rows a positive multiple of 4; idx is
// deltaIdx.
TEXT ·deltaRuleAVX512(SB), NOSPLIT, $0-80
	MOVQ         m+0(FP), DI
	MOVQ         k+8(FP), SI
	MOVQ         q+16(FP), DX
	MOVQ         v+24(FP), R14
	MOVQ         out+32(FP), R9
	MOVQ         w+40(FP), CX
	MOVQ         rows+48(FP), AX
	VBROADCASTSS eg+56(FP), Z28
	VBROADCASTSS beta+60(FP), Z29
	VBROADCASTSS scale+64(FP), Z30
	MOVQ         idx+72(FP), BX
	VMOVDQU32    (BX), Z31
	VMOVDQU32    64(BX), Z27
	MOVQ         CX, R8
	SHLQ         $2, R8

z5group:
	MOVQ   DI, R10
	LEAQ   (DI)(R8*1), R11
	LEAQ   (DI)(R8*2), R12
	LEAQ   (R11)(R8*2), R13
	VXORPS Z0, Z0, Z0
	XORQ   BX, BX

z5pass1:
	VMOVUPS (SI)(BX*4), Z4
	VMULPS  (R10)(BX*4), Z28, Z5
	VMOVUPS Z5, (R10)(BX*4)
	VMULPS  Z4, Z5, Z5
	VMULPS  (R11)(BX*4), Z28, Z6
	VMOVUPS Z6, (R11)(BX*4)
	VMULPS  Z4, Z6, Z6
	VMULPS  (R12)(BX*4), Z28, Z7
	VMOVUPS Z7, (R12)(BX*4)
	VMULPS  Z4, Z7, Z7
	VMULPS  (R13)(BX*4), Z28, Z8
	VMOVUPS Z8, (R13)(BX*4)
	VMULPS  Z4, Z8, Z8
	T4X4
	ACC4(Z0)
	ADDQ    $16, BX
	CMPQ    BX, CX
	JLT     z5pass1

	HSUM4X4(Z0)
	VMOVUPS    (R14), X10
	VPERMPS    Z10, Z31, Z10
	VSUBPS     Z9, Z10, Z10
	VMULPS     Z29, Z10, Z10
	VSHUFF32X4 $0x00, Z10, Z10, Z20
	VSHUFF32X4 $0x55, Z10, Z10, Z21
	VSHUFF32X4 $0xAA, Z10, Z10, Z22
	VSHUFF32X4 $0xFF, Z10, Z10, Z23
	VXORPS     Z1, Z1, Z1
	XORQ       BX, BX

z5pass2:
	VMOVUPS (SI)(BX*4), Z4
	VMOVUPS (DX)(BX*4), Z24
	VMULPS  Z20, Z4, Z5
	VADDPS  (R10)(BX*4), Z5, Z5
	VMOVUPS Z5, (R10)(BX*4)
	VMULPS  Z24, Z5, Z5
	VMULPS  Z21, Z4, Z6
	VADDPS  (R11)(BX*4), Z6, Z6
	VMOVUPS Z6, (R11)(BX*4)
	VMULPS  Z24, Z6, Z6
	VMULPS  Z22, Z4, Z7
	VADDPS  (R12)(BX*4), Z7, Z7
	VMOVUPS Z7, (R12)(BX*4)
	VMULPS  Z24, Z7, Z7
	VMULPS  Z23, Z4, Z8
	VADDPS  (R13)(BX*4), Z8, Z8
	VMOVUPS Z8, (R13)(BX*4)
	VMULPS  Z24, Z8, Z8
	T4X4
	ACC4(Z1)
	ADDQ    $16, BX
	CMPQ    BX, CX
	JLT     z5pass2

	HSUM4X4(Z1)
	VMULPS  Z30, Z9, Z9
	VPERMPS Z9, Z27, Z9
	VMOVUPS X9, (R9)
	LEAQ    (DI)(R8*4), DI
	ADDQ    $16, R14
	ADDQ    $16, R9
	SUBQ    $4, AX
	JNZ     z5group
	VZEROUPPER
	RET
