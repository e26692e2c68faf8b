//go:build amd64 && !purego

#include "textflag.h"

// Grouped attention (attn8.go), AVX2 + F16C + FMA: the 8 query vectors of
// a group share every K and V row, which is loaded and converted once for
// all of them. Scores and probabilities are kept row-major, 8 per row
// (one YMM: slot s in lane s), so the softmax runs across the slots with
// each slot's float order intact.
//
// Packed queries (packQ8AVX2): for each 4-element chunk c, four YMM
// registers' worth of floats; register p holds slot p's elements 4c..4c+3
// in its low half and slot p+4's in its high half. A K chunk broadcast to
// both halves then feeds two slots per multiply, each in its own four
// lanes (element i mod 4), exactly the lanes of the single-query dot.

// ROUNDF16(x, tx, t, u, w): x (8 float32) rounded to the nearest F16 value and
// back, as the scalar table lookup does it: a NaN becomes sign|0x7fc00000.
#define ROUNDF16(x, tx, t, u, w) \
	VCVTPS2PH    $0, x, tx \
	VCVTPH2PS    tx, u \
	VCMPPS       $3, x, x, w \
	VANDPS       expc<>+480(SB), x, t \
	VORPS        expc<>+512(SB), t, t \
	VBLENDVPS    w, t, u, x

// func packQ8AVX2(q *float32, dim int, qp *float32, round bool)
TEXT ·packQ8AVX2(SB), NOSPLIT, $0-25
	MOVQ    q+0(FP), SI
	MOVQ    dim+8(FP), CX
	MOVQ    qp+16(FP), DI
	MOVBQZX round+24(FP), DX
	MOVQ    CX, R8
	SHLQ    $2, R8                 // bytes per query vector
	LEAQ    (SI)(R8*4), R9         // slot 4
	XORQ    BX, BX

pqloop:
	MOVQ        SI, R10
	MOVQ        R9, R11
	VMOVUPS     (R10)(BX*4), X0
	VINSERTF128 $1, (R11)(BX*4), Y0, Y0
	ADDQ        R8, R10
	ADDQ        R8, R11
	VMOVUPS     (R10)(BX*4), X1
	VINSERTF128 $1, (R11)(BX*4), Y1, Y1
	ADDQ        R8, R10
	ADDQ        R8, R11
	VMOVUPS     (R10)(BX*4), X2
	VINSERTF128 $1, (R11)(BX*4), Y2, Y2
	ADDQ        R8, R10
	ADDQ        R8, R11
	VMOVUPS     (R10)(BX*4), X3
	VINSERTF128 $1, (R11)(BX*4), Y3, Y3
	TESTQ       DX, DX
	JZ          pqstore
	ROUNDF16(Y0, X4, Y4, Y5, Y6)
	ROUNDF16(Y1, X4, Y4, Y5, Y6)
	ROUNDF16(Y2, X4, Y4, Y5, Y6)
	ROUNDF16(Y3, X4, Y4, Y5, Y6)

pqstore:
	VMOVUPS Y0, 0(DI)
	VMOVUPS Y1, 32(DI)
	VMOVUPS Y2, 64(DI)
	VMOVUPS Y3, 96(DI)
	ADDQ    $128, DI
	ADDQ    $4, BX
	CMPQ    BX, CX
	JLT     pqloop
	VZEROUPPER
	RET

// HSUM8(a, b, c, d, dst): with a..d holding slots (0|4), (1|5), (2|6),
// (3|7) in four lanes each, dst = the eight sums (l0+l1)+(l2+l3), slot s in
// lane s. Clobbers a and c.
#define HSUM8(a, b, c, d, dst) \
	VHADDPS b, a, a \
	VHADDPS d, c, c \
	VHADDPS c, a, a \
	VMOVUPS a, dst

// DOT8(k, a0..a3): one K chunk (4 elements in both halves of k) times the
// 4 packed query registers at (AX), added to the accumulators a0..a3.
#define DOT8(kreg, a0, a1, a2, a3) \
	VMULPS 0(AX), kreg, Y14 \
	VADDPS Y14, a0, a0 \
	VMULPS 32(AX), kreg, Y15 \
	VADDPS Y15, a1, a1 \
	VMULPS 64(AX), kreg, Y14 \
	VADDPS Y14, a2, a2 \
	VMULPS 96(AX), kreg, Y15 \
	VADDPS Y15, a3, a3

#define ZERO8 \
	VXORPS Y0, Y0, Y0 \
	VXORPS Y1, Y1, Y1 \
	VXORPS Y2, Y2, Y2 \
	VXORPS Y3, Y3, Y3 \
	VXORPS Y4, Y4, Y4 \
	VXORPS Y5, Y5, Y5 \
	VXORPS Y6, Y6, Y6 \
	VXORPS Y7, Y7, Y7

// func dots8F16AVX2(qp *float32, k *uint16, stride, dim, n int, out *float32)
TEXT ·dots8F16AVX2(SB), NOSPLIT, $0-48
	MOVQ qp+0(FP), SI
	MOVQ k+8(FP), DI
	MOVQ stride+16(FP), R8
	SHLQ $1, R8
	MOVQ dim+24(FP), CX
	MOVQ n+32(FP), DX
	MOVQ out+40(FP), R9

k16two:
	CMPQ DX, $2
	JLT  k16one
	LEAQ (DI)(R8*1), R11
	LEAQ (DI)(R8*8), R12          // rows j+8, j+9: prefetched
	LEAQ (R12)(R8*1), R13
	ZERO8
	MOVQ SI, AX
	XORQ BX, BX

k16twoloop:
	PREFETCHT0   (R12)(BX*2)
	PREFETCHT0   (R13)(BX*2)
	VPBROADCASTQ (DI)(BX*2), X12
	VCVTPH2PS    X12, Y12
	VPBROADCASTQ (R11)(BX*2), X13
	VCVTPH2PS    X13, Y13
	DOT8(Y12, Y0, Y1, Y2, Y3)
	DOT8(Y13, Y4, Y5, Y6, Y7)
	ADDQ         $128, AX
	ADDQ         $4, BX
	CMPQ         BX, CX
	JLT          k16twoloop

	HSUM8(Y0, Y1, Y2, Y3, 0(R9))
	HSUM8(Y4, Y5, Y6, Y7, 32(R9))
	LEAQ (DI)(R8*2), DI
	ADDQ $64, R9
	SUBQ $2, DX
	JMP  k16two

k16one:
	TESTQ DX, DX
	JZ    k16done
	ZERO8
	MOVQ  SI, AX
	XORQ  BX, BX

k16oneloop:
	VPBROADCASTQ (DI)(BX*2), X12
	VCVTPH2PS    X12, Y12
	DOT8(Y12, Y0, Y1, Y2, Y3)
	ADDQ         $128, AX
	ADDQ         $4, BX
	CMPQ         BX, CX
	JLT          k16oneloop
	HSUM8(Y0, Y1, Y2, Y3, 0(R9))

k16done:
	VZEROUPPER
	RET

// func dots8F32AVX2(qp *float32, k *float32, stride, dim, n int, out *float32)
TEXT ·dots8F32AVX2(SB), NOSPLIT, $0-48
	MOVQ qp+0(FP), SI
	MOVQ k+8(FP), DI
	MOVQ stride+16(FP), R8
	SHLQ $2, R8
	MOVQ dim+24(FP), CX
	MOVQ n+32(FP), DX
	MOVQ out+40(FP), R9

k32two:
	CMPQ DX, $2
	JLT  k32one
	LEAQ (DI)(R8*1), R11
	LEAQ (DI)(R8*8), R12          // rows j+8, j+9: prefetched
	LEAQ (R12)(R8*1), R13
	ZERO8
	MOVQ SI, AX
	XORQ BX, BX

k32twoloop:
	PREFETCHT0     (R12)(BX*4)
	PREFETCHT0     (R13)(BX*4)
	VBROADCASTF128 (DI)(BX*4), Y12
	VBROADCASTF128 (R11)(BX*4), Y13
	DOT8(Y12, Y0, Y1, Y2, Y3)
	DOT8(Y13, Y4, Y5, Y6, Y7)
	ADDQ           $128, AX
	ADDQ           $4, BX
	CMPQ           BX, CX
	JLT            k32twoloop

	HSUM8(Y0, Y1, Y2, Y3, 0(R9))
	HSUM8(Y4, Y5, Y6, Y7, 32(R9))
	LEAQ (DI)(R8*2), DI
	ADDQ $64, R9
	SUBQ $2, DX
	JMP  k32two

k32one:
	TESTQ DX, DX
	JZ    k32done
	ZERO8
	MOVQ  SI, AX
	XORQ  BX, BX

k32oneloop:
	VBROADCASTF128 (DI)(BX*4), Y12
	DOT8(Y12, Y0, Y1, Y2, Y3)
	ADDQ           $128, AX
	ADDQ           $4, BX
	CMPQ           BX, CX
	JLT            k32oneloop
	HSUM8(Y0, Y1, Y2, Y3, 0(R9))

k32done:
	VZEROUPPER
	RET

// Weighted value sums: for each block of 8 output elements, slot s's
// accumulator (Ys) is loaded from out, every row adds
// float32(p[j][s]·v_j) in row order, and it is stored back.

// LOADACC/STOREACC: the 8 slots' accumulators at R12, R12+dim, … (R13 =
// dim in bytes).
#define LOADACC \
	MOVQ    R12, R14 \
	VMOVUPS (R14), Y0 \
	ADDQ    R13, R14 \
	VMOVUPS (R14), Y1 \
	ADDQ    R13, R14 \
	VMOVUPS (R14), Y2 \
	ADDQ    R13, R14 \
	VMOVUPS (R14), Y3 \
	ADDQ    R13, R14 \
	VMOVUPS (R14), Y4 \
	ADDQ    R13, R14 \
	VMOVUPS (R14), Y5 \
	ADDQ    R13, R14 \
	VMOVUPS (R14), Y6 \
	ADDQ    R13, R14 \
	VMOVUPS (R14), Y7

#define STOREACC \
	MOVQ    R12, R14 \
	VMOVUPS Y0, (R14) \
	ADDQ    R13, R14 \
	VMOVUPS Y1, (R14) \
	ADDQ    R13, R14 \
	VMOVUPS Y2, (R14) \
	ADDQ    R13, R14 \
	VMOVUPS Y3, (R14) \
	ADDQ    R13, R14 \
	VMOVUPS Y4, (R14) \
	ADDQ    R13, R14 \
	VMOVUPS Y5, (R14) \
	ADDQ    R13, R14 \
	VMOVUPS Y6, (R14) \
	ADDQ    R13, R14 \
	VMOVUPS Y7, (R14)

// AXROW: the row in Y8 times the 8 probabilities at (R11).
#define AXROW \
	VBROADCASTSS 0(R11), Y9 \
	VMULPS       Y8, Y9, Y9 \
	VADDPS       Y9, Y0, Y0 \
	VBROADCASTSS 4(R11), Y10 \
	VMULPS       Y8, Y10, Y10 \
	VADDPS       Y10, Y1, Y1 \
	VBROADCASTSS 8(R11), Y11 \
	VMULPS       Y8, Y11, Y11 \
	VADDPS       Y11, Y2, Y2 \
	VBROADCASTSS 12(R11), Y12 \
	VMULPS       Y8, Y12, Y12 \
	VADDPS       Y12, Y3, Y3 \
	VBROADCASTSS 16(R11), Y9 \
	VMULPS       Y8, Y9, Y9 \
	VADDPS       Y9, Y4, Y4 \
	VBROADCASTSS 20(R11), Y10 \
	VMULPS       Y8, Y10, Y10 \
	VADDPS       Y10, Y5, Y5 \
	VBROADCASTSS 24(R11), Y11 \
	VMULPS       Y8, Y11, Y11 \
	VADDPS       Y11, Y6, Y6 \
	VBROADCASTSS 28(R11), Y12 \
	VMULPS       Y8, Y12, Y12 \
	VADDPS       Y12, Y7, Y7

// func axpys8F16AVX2(out *float32, p *float32, v *uint16, stride, dim, n int)
TEXT ·axpys8F16AVX2(SB), NOSPLIT, $0-48
	MOVQ out+0(FP), R12
	MOVQ p+8(FP), DX
	MOVQ v+16(FP), DI
	MOVQ stride+24(FP), R8
	SHLQ $1, R8
	MOVQ R8, R15
	SHLQ $3, R15                  // 8 rows ahead: prefetched
	MOVQ dim+32(FP), BX
	MOVQ BX, R13
	SHLQ $2, R13

v16blk:
	LOADACC
	MOVQ DI, R10
	MOVQ DX, R11
	MOVQ n+40(FP), CX

v16row:
	PREFETCHT0 (R10)(R15*1)
	VCVTPH2PS  (R10), Y8
	AXROW
	ADDQ      R8, R10
	ADDQ      $32, R11
	DECQ      CX
	JNZ       v16row

	STOREACC
	ADDQ $32, R12
	ADDQ $16, DI
	SUBQ $8, BX
	JNZ  v16blk
	VZEROUPPER
	RET

// func axpys8F32AVX2(out *float32, p *float32, v *float32, stride, dim, n int)
TEXT ·axpys8F32AVX2(SB), NOSPLIT, $0-48
	MOVQ out+0(FP), R12
	MOVQ p+8(FP), DX
	MOVQ v+16(FP), DI
	MOVQ stride+24(FP), R8
	SHLQ $2, R8
	MOVQ R8, R15
	SHLQ $3, R15                  // 8 rows ahead: prefetched
	MOVQ dim+32(FP), BX
	MOVQ BX, R13
	SHLQ $2, R13

v32blk:
	LOADACC
	MOVQ DI, R10
	MOVQ DX, R11
	MOVQ n+40(FP), CX

v32row:
	PREFETCHT0 (R10)(R15*1)
	VMOVUPS    (R10), Y8
	AXROW
	ADDQ    R8, R10
	ADDQ    $32, R11
	DECQ    CX
	JNZ     v32row

	STOREACC
	ADDQ $32, R12
	ADDQ $32, DI
	SUBQ $8, BX
	JNZ  v32blk
	VZEROUPPER
	RET

// Softmax across the 8 slots of row-major scores.

// func scaleMax8AVX2(sc *float32, n int, scale float32, mx *[8]float32)
TEXT ·scaleMax8AVX2(SB), NOSPLIT, $0-32
	MOVQ         sc+0(FP), SI
	MOVQ         n+8(FP), CX
	VBROADCASTSS scale+16(FP), Y1
	MOVQ         mx+24(FP), DI
	VBROADCASTSS expc<>+448(SB), Y0 // -Inf

smloop:
	VMULPS  (SI), Y1, Y2
	VMOVUPS Y2, (SI)
	VMAXPS  Y0, Y2, Y0  // x > mx ? x : mx, as the scalar comparison
	ADDQ    $32, SI
	DECQ    CX
	JNZ     smloop
	VMOVUPS Y0, (DI)
	VZEROUPPER
	RET

// EXP4(x, k, t, u): x (4 float64) = math.Exp(x) as Go's amd64 archExp
// computes it on a machine with FMA, operation for operation, for
// -700 ≤ x ≤ 700. Clobbers k (X), t, u.
#define EXP4(x, kx, t, u) \
	VMULPD       expc<>+0(SB), x, t \
	VCVTPD2DQY   t, kx \
	VCVTDQ2PD    kx, t \
	VFNMADD231PD expc<>+32(SB), t, x \
	VFNMADD231PD expc<>+64(SB), t, x \
	VMULPD       expc<>+96(SB), x, x \
	VMOVUPD      expc<>+128(SB), t \
	VFMADD213PD  expc<>+160(SB), x, t \
	VFMADD213PD  expc<>+192(SB), x, t \
	VFMADD213PD  expc<>+224(SB), x, t \
	VFMADD213PD  expc<>+256(SB), x, t \
	VFMADD213PD  expc<>+288(SB), x, t \
	VFMADD213PD  expc<>+320(SB), x, t \
	VFMADD213PD  expc<>+352(SB), x, t \
	VMULPD       t, x, x \
	VADDPD       expc<>+384(SB), x, t \
	VMULPD       t, x, x \
	VADDPD       expc<>+384(SB), x, t \
	VMULPD       t, x, x \
	VADDPD       expc<>+384(SB), x, t \
	VMULPD       t, x, x \
	VADDPD       expc<>+384(SB), x, t \
	VFMADD213PD  expc<>+352(SB), t, x \
	VPMOVSXDQ    kx, u \
	VPADDQ       expc<>+416(SB), u, u \
	VPSLLQ       $52, u, u \
	VMULPD       u, x, x

// func expSum8AVX2(sc *float32, n int, mx *[8]float32, sum *[8]float64)
//
// Each score becomes float32(math.Exp(float64(x - mx))) and is added, as
// float64, to its slot's sum in row order. Lanes below -700 give 0, above
// 700 +Inf, NaN itself: what the conversion of math.Exp's result gives.
TEXT ·expSum8AVX2(SB), NOSPLIT, $0-32
	MOVQ    sc+0(FP), SI
	MOVQ    n+8(FP), CX
	MOVQ    mx+16(FP), AX
	VMOVUPS (AX), Y15
	VXORPD  Y13, Y13, Y13
	VXORPD  Y14, Y14, Y14

esloop:
	VMOVUPS      (SI), Y0
	VSUBPS       Y15, Y0, Y0         // x - mx in float32
	VCVTPS2PD    X0, Y1
	VEXTRACTF128 $1, Y0, X2
	VCVTPS2PD    X2, Y2
	EXP4(Y1, X3, Y4, Y5)
	EXP4(Y2, X3, Y4, Y5)
	VCVTPD2PSY   Y1, X1
	VCVTPD2PSY   Y2, X2
	VINSERTF128  $1, X2, Y1, Y1
	VBROADCASTSS expc<>+452(SB), Y6  // -700
	VCMPPS       $1, Y6, Y0, Y7      // x < -700 (ordered)
	VANDNPS      Y1, Y7, Y1
	VBROADCASTSS expc<>+456(SB), Y6  // 700
	VCMPPS       $0x1e, Y6, Y0, Y7   // x > 700 (ordered)
	VBROADCASTSS expc<>+460(SB), Y6  // +Inf
	VBLENDVPS    Y7, Y6, Y1, Y1
	VCMPPS       $3, Y0, Y0, Y7      // NaN
	VBLENDVPS    Y7, Y0, Y1, Y1
	VMOVUPS      Y1, (SI)
	VCVTPS2PD    X1, Y2
	VADDPD       Y2, Y13, Y13
	VEXTRACTF128 $1, Y1, X2
	VCVTPS2PD    X2, Y2
	VADDPD       Y2, Y14, Y14
	ADDQ         $32, SI
	DECQ         CX
	JNZ          esloop

	MOVQ    sum+24(FP), AX
	VMOVUPD Y13, (AX)
	VMOVUPD Y14, 32(AX)
	VZEROUPPER
	RET

// func mulRound8AVX2(sc *float32, n int, inv *[8]float32, round bool)
TEXT ·mulRound8AVX2(SB), NOSPLIT, $0-25
	MOVQ    sc+0(FP), SI
	MOVQ    n+8(FP), CX
	MOVQ    inv+16(FP), AX
	VMOVUPS (AX), Y15
	MOVBQZX round+24(FP), DX
	TESTQ   DX, DX
	JNZ     mrround

mrloop:
	VMULPS  (SI), Y15, Y0
	VMOVUPS Y0, (SI)
	ADDQ    $32, SI
	DECQ    CX
	JNZ     mrloop
	VZEROUPPER
	RET

mrround:
	VMULPS  (SI), Y15, Y0
	ROUNDF16(Y0, X1, Y1, Y2, Y3)
	VMOVUPS Y0, (SI)
	ADDQ    $32, SI
	DECQ    CX
	JNZ     mrround
	VZEROUPPER
	RET

// func expShiftAVX2(x *float32, n int, m float32) float64
//
// One row's softmax exponentials (n a multiple of 8): x[i] =
// float32(math.Exp(float64(x[i] - m))) as in expSum8AVX2, and their float64
// sum in index order.
TEXT ·expShiftAVX2(SB), NOSPLIT, $0-32
	MOVQ         x+0(FP), SI
	MOVQ         n+8(FP), CX
	SHRQ         $3, CX
	VBROADCASTSS m+16(FP), Y15
	VXORPD       X13, X13, X13

xsloop:
	VMOVUPS      (SI), Y0
	VSUBPS       Y15, Y0, Y0
	VCVTPS2PD    X0, Y1
	VEXTRACTF128 $1, Y0, X2
	VCVTPS2PD    X2, Y2
	EXP4(Y1, X3, Y4, Y5)
	EXP4(Y2, X3, Y4, Y5)
	VCVTPD2PSY   Y1, X1
	VCVTPD2PSY   Y2, X2
	VINSERTF128  $1, X2, Y1, Y1
	VBROADCASTSS expc<>+452(SB), Y6
	VCMPPS       $1, Y6, Y0, Y7
	VANDNPS      Y1, Y7, Y1
	VBROADCASTSS expc<>+456(SB), Y6
	VCMPPS       $0x1e, Y6, Y0, Y7
	VBROADCASTSS expc<>+460(SB), Y6
	VBLENDVPS    Y7, Y6, Y1, Y1
	VCMPPS       $3, Y0, Y0, Y7
	VBLENDVPS    Y7, Y0, Y1, Y1
	VMOVUPS      Y1, (SI)
	VCVTPS2PD    X1, Y2              // e0..e3
	VEXTRACTF128 $1, Y1, X3
	VCVTPS2PD    X3, Y3              // e4..e7
	VADDSD       X2, X13, X13        // in order: e0
	VPERMILPD    $1, X2, X4
	VADDSD       X4, X13, X13        // e1
	VEXTRACTF128 $1, Y2, X2
	VADDSD       X2, X13, X13        // e2
	VPERMILPD    $1, X2, X4
	VADDSD       X4, X13, X13        // e3
	VADDSD       X3, X13, X13        // e4
	VPERMILPD    $1, X3, X4
	VADDSD       X4, X13, X13        // e5
	VEXTRACTF128 $1, Y3, X3
	VADDSD       X3, X13, X13        // e6
	VPERMILPD    $1, X3, X4
	VADDSD       X4, X13, X13        // e7
	ADDQ         $32, SI
	DECQ         CX
	JNZ          xsloop
	VMOVSD       X13, ret+24(FP)
	VZEROUPPER
	RET

// func swiGLUAVX2(out, gate, up *float32, n int)
//
// out[i] = gate[i] / (1 + float32(math.Exp(float64(-gate[i])))) * up[i]
// (n a multiple of 8), each step rounded to float32 as refSwiGLU; the
// exponential as in expShiftAVX2, special lanes included.
TEXT ·swiGLUAVX2(SB), NOSPLIT, $0-32
	MOVQ         out+0(FP), DI
	MOVQ         gate+8(FP), SI
	MOVQ         up+16(FP), DX
	MOVQ         n+24(FP), CX
	SHRQ         $3, CX
	VBROADCASTSS expc<>+480(SB), Y14 // sign
	MOVL         $0x3f800000, AX
	VMOVD        AX, X15
	VBROADCASTSS X15, Y15            // 1.0
	VBROADCASTSS expc<>+452(SB), Y11 // -700
	VBROADCASTSS expc<>+456(SB), Y12 // 700
	VBROADCASTSS expc<>+460(SB), Y13 // +Inf

sgloop:
	VMOVUPS      (SI), Y8            // g
	VXORPS       Y14, Y8, Y0         // -g
	VCVTPS2PD    X0, Y1
	VEXTRACTF128 $1, Y0, X2
	VCVTPS2PD    X2, Y2
	EXP4(Y1, X3, Y4, Y5)
	EXP4(Y2, X3, Y4, Y5)
	VCVTPD2PSY   Y1, X1
	VCVTPD2PSY   Y2, X2
	VINSERTF128  $1, X2, Y1, Y1      // e = float32(exp(-g))
	VCMPPS       $1, Y11, Y0, Y7
	VANDNPS      Y1, Y7, Y1          // -g < -700: 0
	VCMPPS       $0x1e, Y12, Y0, Y7
	VBLENDVPS    Y7, Y13, Y1, Y1     // -g > 700: +Inf
	VCMPPS       $3, Y0, Y0, Y7
	VBLENDVPS    Y7, Y0, Y1, Y1      // NaN: itself
	VADDPS       Y15, Y1, Y1         // 1 + e
	VDIVPS       Y1, Y8, Y1          // g / (1 + e)
	VMULPS       (DX), Y1, Y1        // · up
	VMOVUPS      Y1, (DI)
	ADDQ         $32, SI
	ADDQ         $32, DX
	ADDQ         $32, DI
	DECQ         CX
	JNZ          sgloop
	VZEROUPPER
	RET

// func siluAVX2(out, x *float32, n int)
//
// out[i] = x[i] / (1 + float32(math.Exp(float64(-x[i])))) (n a multiple of
// 8): swiGLUAVX2 without the up factor.
TEXT ·siluAVX2(SB), NOSPLIT, $0-24
	MOVQ         out+0(FP), DI
	MOVQ         x+8(FP), SI
	MOVQ         n+16(FP), CX
	SHRQ         $3, CX
	VBROADCASTSS expc<>+480(SB), Y14 // sign
	MOVL         $0x3f800000, AX
	VMOVD        AX, X15
	VBROADCASTSS X15, Y15            // 1.0
	VBROADCASTSS expc<>+452(SB), Y11 // -700
	VBROADCASTSS expc<>+456(SB), Y12 // 700
	VBROADCASTSS expc<>+460(SB), Y13 // +Inf

siloop:
	VMOVUPS      (SI), Y8            // x
	VXORPS       Y14, Y8, Y0         // -x
	VCVTPS2PD    X0, Y1
	VEXTRACTF128 $1, Y0, X2
	VCVTPS2PD    X2, Y2
	EXP4(Y1, X3, Y4, Y5)
	EXP4(Y2, X3, Y4, Y5)
	VCVTPD2PSY   Y1, X1
	VCVTPD2PSY   Y2, X2
	VINSERTF128  $1, X2, Y1, Y1      // e = float32(exp(-x))
	VCMPPS       $1, Y11, Y0, Y7
	VANDNPS      Y1, Y7, Y1          // -x < -700: 0
	VCMPPS       $0x1e, Y12, Y0, Y7
	VBLENDVPS    Y7, Y13, Y1, Y1     // -x > 700: +Inf
	VCMPPS       $3, Y0, Y0, Y7
	VBLENDVPS    Y7, Y0, Y1, Y1      // NaN: itself
	VADDPS       Y15, Y1, Y1         // 1 + e
	VDIVPS       Y1, Y8, Y1          // x / (1 + e)
	VMOVUPS      Y1, (DI)
	ADDQ         $32, SI
	ADDQ         $32, DI
	DECQ         CX
	JNZ          siloop
	VZEROUPPER
	RET

// func roundF16AVX2(x *float32, n int)
//
// x[i] rounded to the nearest F16 value and back (n a multiple of 8).
TEXT ·roundF16AVX2(SB), NOSPLIT, $0-16
	MOVQ x+0(FP), SI
	MOVQ n+8(FP), CX
	SHRQ $3, CX

rfloop:
	VMOVUPS (SI), Y0
	ROUNDF16(Y0, X1, Y1, Y2, Y3)
	VMOVUPS Y0, (SI)
	ADDQ    $32, SI
	DECQ    CX
	JNZ     rfloop
	VZEROUPPER
	RET

// Constants: archExp's (math/exp_amd64.s), four copies of each float64 so
// that it can be a YMM operand; then float32 bounds and masks.
DATA expc<>+0(SB)/8, $1.4426950408889634073599246810018920 // LOG2E
DATA expc<>+8(SB)/8, $1.4426950408889634073599246810018920
DATA expc<>+16(SB)/8, $1.4426950408889634073599246810018920
DATA expc<>+24(SB)/8, $1.4426950408889634073599246810018920
DATA expc<>+32(SB)/8, $0.69314718055966295651160180568695068359375 // LN2U (upper half of ln 2)
DATA expc<>+40(SB)/8, $0.69314718055966295651160180568695068359375
DATA expc<>+48(SB)/8, $0.69314718055966295651160180568695068359375
DATA expc<>+56(SB)/8, $0.69314718055966295651160180568695068359375
DATA expc<>+64(SB)/8, $0.28235290563031577122588448175013436025525412068e-12 // LN2L (lower half)
DATA expc<>+72(SB)/8, $0.28235290563031577122588448175013436025525412068e-12
DATA expc<>+80(SB)/8, $0.28235290563031577122588448175013436025525412068e-12
DATA expc<>+88(SB)/8, $0.28235290563031577122588448175013436025525412068e-12
DATA expc<>+96(SB)/8, $0.0625 // argument reduction
DATA expc<>+104(SB)/8, $0.0625
DATA expc<>+112(SB)/8, $0.0625
DATA expc<>+120(SB)/8, $0.0625
DATA expc<>+128(SB)/8, $2.4801587301587301587e-5 // Taylor coefficients
DATA expc<>+136(SB)/8, $2.4801587301587301587e-5
DATA expc<>+144(SB)/8, $2.4801587301587301587e-5
DATA expc<>+152(SB)/8, $2.4801587301587301587e-5
DATA expc<>+160(SB)/8, $1.9841269841269841270e-4
DATA expc<>+168(SB)/8, $1.9841269841269841270e-4
DATA expc<>+176(SB)/8, $1.9841269841269841270e-4
DATA expc<>+184(SB)/8, $1.9841269841269841270e-4
DATA expc<>+192(SB)/8, $1.3888888888888888889e-3
DATA expc<>+200(SB)/8, $1.3888888888888888889e-3
DATA expc<>+208(SB)/8, $1.3888888888888888889e-3
DATA expc<>+216(SB)/8, $1.3888888888888888889e-3
DATA expc<>+224(SB)/8, $8.3333333333333333333e-3
DATA expc<>+232(SB)/8, $8.3333333333333333333e-3
DATA expc<>+240(SB)/8, $8.3333333333333333333e-3
DATA expc<>+248(SB)/8, $8.3333333333333333333e-3
DATA expc<>+256(SB)/8, $4.1666666666666666667e-2
DATA expc<>+264(SB)/8, $4.1666666666666666667e-2
DATA expc<>+272(SB)/8, $4.1666666666666666667e-2
DATA expc<>+280(SB)/8, $4.1666666666666666667e-2
DATA expc<>+288(SB)/8, $1.6666666666666666667e-1
DATA expc<>+296(SB)/8, $1.6666666666666666667e-1
DATA expc<>+304(SB)/8, $1.6666666666666666667e-1
DATA expc<>+312(SB)/8, $1.6666666666666666667e-1
DATA expc<>+320(SB)/8, $0.5
DATA expc<>+328(SB)/8, $0.5
DATA expc<>+336(SB)/8, $0.5
DATA expc<>+344(SB)/8, $0.5
DATA expc<>+352(SB)/8, $1.0
DATA expc<>+360(SB)/8, $1.0
DATA expc<>+368(SB)/8, $1.0
DATA expc<>+376(SB)/8, $1.0
DATA expc<>+384(SB)/8, $2.0 // 2
DATA expc<>+392(SB)/8, $2.0
DATA expc<>+400(SB)/8, $2.0
DATA expc<>+408(SB)/8, $2.0
DATA expc<>+416(SB)/8, $1023 // exponent bias (int64)
DATA expc<>+424(SB)/8, $1023
DATA expc<>+432(SB)/8, $1023
DATA expc<>+440(SB)/8, $1023
DATA expc<>+448(SB)/4, $0xff800000 // -Inf
DATA expc<>+452(SB)/4, $-700.0
DATA expc<>+456(SB)/4, $700.0
DATA expc<>+460(SB)/4, $0x7f800000 // +Inf
DATA expc<>+480(SB)/4, $0x80000000 // sign
DATA expc<>+484(SB)/4, $0x80000000
DATA expc<>+488(SB)/4, $0x80000000
DATA expc<>+492(SB)/4, $0x80000000
DATA expc<>+496(SB)/4, $0x80000000
DATA expc<>+500(SB)/4, $0x80000000
DATA expc<>+504(SB)/4, $0x80000000
DATA expc<>+508(SB)/4, $0x80000000
DATA expc<>+512(SB)/4, $0x7fc00000 // quiet NaN
DATA expc<>+516(SB)/4, $0x7fc00000
DATA expc<>+520(SB)/4, $0x7fc00000
DATA expc<>+524(SB)/4, $0x7fc00000
DATA expc<>+528(SB)/4, $0x7fc00000
DATA expc<>+532(SB)/4, $0x7fc00000
DATA expc<>+536(SB)/4, $0x7fc00000
DATA expc<>+540(SB)/4, $0x7fc00000
GLOBL expc<>(SB), RODATA, $544
