//go:build amd64 && !purego

#include "textflag.h"

// Attention helpers (attn.go), AVX2 + F16C. Scores: four rows at a time,
// each row's four float32 lanes (element i mod 4) in one XMM register,
// combined as (s0+s1)+(s2+s3). Weighted value sums: up to 64 outputs held in
// eight YMM registers while the rows are added in order.

// REDUCE4(x, t, u, dst): dst = (x0+x1)+(x2+x3) stored to dst.
#define REDUCE4(x, t, u, dst) \
	VMOVSHDUP x, t \
	VADDPS    t, x, t \
	VMOVHLPS  t, t, u \
	VADDSS    u, t, t \
	VMOVSS    t, dst

// func dotsF16AVX2(q *float32, k *uint16, stride, dim, n int, out *float32)
TEXT ·dotsF16AVX2(SB), NOSPLIT, $0-48
	MOVQ q+0(FP), SI
	MOVQ k+8(FP), DI
	MOVQ stride+16(FP), R8
	SHLQ $1, R8
	MOVQ dim+24(FP), CX
	MOVQ n+32(FP), DX
	MOVQ out+40(FP), R9

d16four:
	CMPQ   DX, $4
	JLT    d16one
	LEAQ (DI)(R8*8), R14 // rows j+8..j+11 prefetched (rows a stride apart defeat the hardware prefetcher)
	LEAQ (R14)(R8*1), R15
	MOVQ CX, BX
	SHLQ $1, BX
	XORQ AX, AX

d16pf1:
	PREFETCHT0 (R14)(AX*1)
	PREFETCHT0 (R15)(AX*1)
	ADDQ       $64, AX
	CMPQ       AX, BX
	JLT        d16pf1
	LEAQ       (R14)(R8*2), R14
	LEAQ       (R15)(R8*2), R15
	XORQ       AX, AX

d16pf2:
	PREFETCHT0 (R14)(AX*1)
	PREFETCHT0 (R15)(AX*1)
	ADDQ       $64, AX
	CMPQ       AX, BX
	JLT        d16pf2
	MOVQ   DI, R10
	LEAQ   (DI)(R8*1), R11
	LEAQ   (DI)(R8*2), R12
	LEAQ   (R11)(R8*2), R13
	VXORPS X0, X0, X0
	VXORPS X1, X1, X1
	VXORPS X2, X2, X2
	VXORPS X3, X3, X3
	XORQ   BX, BX

d16fourloop:
	VMOVUPS   (SI)(BX*4), X4
	VCVTPH2PS (R10)(BX*2), X5
	VMULPS    X4, X5, X5
	VADDPS    X5, X0, X0
	VCVTPH2PS (R11)(BX*2), X6
	VMULPS    X4, X6, X6
	VADDPS    X6, X1, X1
	VCVTPH2PS (R12)(BX*2), X7
	VMULPS    X4, X7, X7
	VADDPS    X7, X2, X2
	VCVTPH2PS (R13)(BX*2), X8
	VMULPS    X4, X8, X8
	VADDPS    X8, X3, X3
	ADDQ      $4, BX
	CMPQ      BX, CX
	JLT       d16fourloop

	REDUCE4(X0, X5, X6, 0(R9))
	REDUCE4(X1, X5, X6, 4(R9))
	REDUCE4(X2, X5, X6, 8(R9))
	REDUCE4(X3, X5, X6, 12(R9))
	LEAQ (DI)(R8*4), DI
	ADDQ $16, R9
	SUBQ $4, DX
	JMP  d16four

d16one:
	TESTQ  DX, DX
	JZ     d16done
	VXORPS X0, X0, X0
	XORQ   BX, BX

d16oneloop:
	VMOVUPS   (SI)(BX*4), X4
	VCVTPH2PS (DI)(BX*2), X5
	VMULPS    X4, X5, X5
	VADDPS    X5, X0, X0
	ADDQ      $4, BX
	CMPQ      BX, CX
	JLT       d16oneloop

	REDUCE4(X0, X5, X6, 0(R9))
	ADDQ R8, DI
	ADDQ $4, R9
	DECQ DX
	JMP  d16one

d16done:
	RET

// func dotsF32AVX2(q *float32, k *float32, stride, dim, n int, out *float32)
TEXT ·dotsF32AVX2(SB), NOSPLIT, $0-48
	MOVQ q+0(FP), SI
	MOVQ k+8(FP), DI
	MOVQ stride+16(FP), R8
	SHLQ $2, R8
	MOVQ dim+24(FP), CX
	MOVQ n+32(FP), DX
	MOVQ out+40(FP), R9

d32four:
	CMPQ   DX, $4
	JLT    d32one
	MOVQ   DI, R10
	LEAQ   (DI)(R8*1), R11
	LEAQ   (DI)(R8*2), R12
	LEAQ   (R11)(R8*2), R13
	VXORPS X0, X0, X0
	VXORPS X1, X1, X1
	VXORPS X2, X2, X2
	VXORPS X3, X3, X3
	XORQ   BX, BX

d32fourloop:
	VMOVUPS (SI)(BX*4), X4
	VMULPS  (R10)(BX*4), X4, X5
	VADDPS  X5, X0, X0
	VMULPS  (R11)(BX*4), X4, X6
	VADDPS  X6, X1, X1
	VMULPS  (R12)(BX*4), X4, X7
	VADDPS  X7, X2, X2
	VMULPS  (R13)(BX*4), X4, X8
	VADDPS  X8, X3, X3
	ADDQ    $4, BX
	CMPQ    BX, CX
	JLT     d32fourloop

	REDUCE4(X0, X5, X6, 0(R9))
	REDUCE4(X1, X5, X6, 4(R9))
	REDUCE4(X2, X5, X6, 8(R9))
	REDUCE4(X3, X5, X6, 12(R9))
	LEAQ (DI)(R8*4), DI
	ADDQ $16, R9
	SUBQ $4, DX
	JMP  d32four

d32one:
	TESTQ  DX, DX
	JZ     d32done
	VXORPS X0, X0, X0
	XORQ   BX, BX

d32oneloop:
	VMOVUPS (SI)(BX*4), X4
	VMULPS  (DI)(BX*4), X4, X5
	VADDPS  X5, X0, X0
	ADDQ    $4, BX
	CMPQ    BX, CX
	JLT     d32oneloop

	REDUCE4(X0, X5, X6, 0(R9))
	ADDQ R8, DI
	ADDQ $4, R9
	DECQ DX
	JMP  d32one

d32done:
	RET

// AX16(off, acc): acc += p (Y8) · f16 at off(R10).
#define AX16(off, acc) \
	VCVTPH2PS off(R10), Y9 \
	VMULPS    Y8, Y9, Y9 \
	VADDPS    Y9, acc, acc

// func axpysF16AVX2(out *float32, p *float32, v *uint16, stride, dim, n int)
TEXT ·axpysF16AVX2(SB), NOSPLIT, $0-48
	MOVQ out+0(FP), SI
	MOVQ p+8(FP), DX
	MOVQ v+16(FP), DI
	MOVQ stride+24(FP), R8
	SHLQ $1, R8
	MOVQ R8, R14
	SHLQ $3, R14 // 8 rows ahead: prefetched
	MOVQ dim+32(FP), BX

a16blk64:
	CMPQ    BX, $64
	JLT     a16blk8
	VMOVUPS 0(SI), Y0
	VMOVUPS 32(SI), Y1
	VMOVUPS 64(SI), Y2
	VMOVUPS 96(SI), Y3
	VMOVUPS 128(SI), Y4
	VMOVUPS 160(SI), Y5
	VMOVUPS 192(SI), Y6
	VMOVUPS 224(SI), Y7
	MOVQ    DI, R10
	MOVQ    DX, R11
	MOVQ    n+40(FP), CX

a16j64:
	PREFETCHT0   0(R10)(R14*1)
	PREFETCHT0   64(R10)(R14*1)
	VBROADCASTSS (R11), Y8
	AX16(0, Y0)
	AX16(16, Y1)
	AX16(32, Y2)
	AX16(48, Y3)
	AX16(64, Y4)
	AX16(80, Y5)
	AX16(96, Y6)
	AX16(112, Y7)
	ADDQ R8, R10
	ADDQ $4, R11
	DECQ CX
	JNZ  a16j64

	VMOVUPS Y0, 0(SI)
	VMOVUPS Y1, 32(SI)
	VMOVUPS Y2, 64(SI)
	VMOVUPS Y3, 96(SI)
	VMOVUPS Y4, 128(SI)
	VMOVUPS Y5, 160(SI)
	VMOVUPS Y6, 192(SI)
	VMOVUPS Y7, 224(SI)
	ADDQ    $256, SI
	ADDQ    $128, DI
	SUBQ    $64, BX
	JMP     a16blk64

a16blk8:
	TESTQ   BX, BX
	JZ      a16done
	VMOVUPS (SI), Y0
	MOVQ    DI, R10
	MOVQ    DX, R11
	MOVQ    n+40(FP), CX

a16j8:
	VBROADCASTSS (R11), Y8
	AX16(0, Y0)
	ADDQ R8, R10
	ADDQ $4, R11
	DECQ CX
	JNZ  a16j8

	VMOVUPS Y0, (SI)
	ADDQ    $32, SI
	ADDQ    $16, DI
	SUBQ    $8, BX
	JMP     a16blk8

a16done:
	VZEROUPPER
	RET

// AX32(off, acc): acc += p (Y8) · float32 at off(R10).
#define AX32(off, acc) \
	VMULPS off(R10), Y8, Y9 \
	VADDPS Y9, acc, acc

// func axpysF32AVX2(out *float32, p *float32, v *float32, stride, dim, n int)
TEXT ·axpysF32AVX2(SB), NOSPLIT, $0-48
	MOVQ out+0(FP), SI
	MOVQ p+8(FP), DX
	MOVQ v+16(FP), DI
	MOVQ stride+24(FP), R8
	SHLQ $2, R8
	MOVQ dim+32(FP), BX

a32blk64:
	CMPQ    BX, $64
	JLT     a32blk8
	VMOVUPS 0(SI), Y0
	VMOVUPS 32(SI), Y1
	VMOVUPS 64(SI), Y2
	VMOVUPS 96(SI), Y3
	VMOVUPS 128(SI), Y4
	VMOVUPS 160(SI), Y5
	VMOVUPS 192(SI), Y6
	VMOVUPS 224(SI), Y7
	MOVQ    DI, R10
	MOVQ    DX, R11
	MOVQ    n+40(FP), CX

a32j64:
	VBROADCASTSS (R11), Y8
	AX32(0, Y0)
	AX32(32, Y1)
	AX32(64, Y2)
	AX32(96, Y3)
	AX32(128, Y4)
	AX32(160, Y5)
	AX32(192, Y6)
	AX32(224, Y7)
	ADDQ R8, R10
	ADDQ $4, R11
	DECQ CX
	JNZ  a32j64

	VMOVUPS Y0, 0(SI)
	VMOVUPS Y1, 32(SI)
	VMOVUPS Y2, 64(SI)
	VMOVUPS Y3, 96(SI)
	VMOVUPS Y4, 128(SI)
	VMOVUPS Y5, 160(SI)
	VMOVUPS Y6, 192(SI)
	VMOVUPS Y7, 224(SI)
	ADDQ    $256, SI
	ADDQ    $256, DI
	SUBQ    $64, BX
	JMP     a32blk64

a32blk8:
	TESTQ   BX, BX
	JZ      a32done
	VMOVUPS (SI), Y0
	MOVQ    DI, R10
	MOVQ    DX, R11
	MOVQ    n+40(FP), CX

a32j8:
	VBROADCASTSS (R11), Y8
	AX32(0, Y0)
	ADDQ R8, R10
	ADDQ $4, R11
	DECQ CX
	JNZ  a32j8

	VMOVUPS Y0, (SI)
	ADDQ    $32, SI
	ADDQ    $32, DI
	SUBQ    $8, BX
	JMP     a32blk8

a32done:
	VZEROUPPER
	RET
