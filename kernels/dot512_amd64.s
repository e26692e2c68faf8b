//go:build amd64 && !purego

#include "textflag.h"

// AVX-512 (F, BW, DQ) MXFP4 dot: two blocks per 512-bit integer pass; the
// float part stays 256-bit and adds block A then block B to the single
// accumulator, exactly the reference order.

// MX512PAIR(off, yoff, doff, coff): blocks at off(SI) and off+17(SI).
#define MX512PAIR(off, yoff, doff, coff) \
	MOVBLZX         off(SI), AX              \
	MOVBLZX         (off+17)(SI), BX         \
	VMOVSS          (R8)(AX*4), X1           \
	VMULSS          doff(DX), X1, X1         \
	VMOVSS          (R8)(BX*4), X6           \
	VMULSS          (doff+4)(DX), X6, X6     \
	VBROADCASTSS    X1, Y1                   \
	VBROADCASTSS    X6, Y6                   \
	VBROADCASTI32X4 (off+1)(SI), Z2          \
	VBROADCASTI32X4 (off+18)(SI), K1, Z2     \
	VPSRLVD         Z12, Z2, Z2              \
	VPANDD          Z14, Z2, Z2              \
	VPSHUFB         Z2, Z13, Z2              \
	VPMADDUBSW      yoff(DI), Z2, Z2         \
	VPMADDWD        Z15, Z2, Z2              \
	VPSUBD          coff(R9), Z2, Z2         \
	VCVTDQ2PS       Z2, Z2                   \
	VMULPS          Y1, Y2, Y7               \
	VEXTRACTF32X8   $1, Z2, Y8               \
	VMULPS          Y6, Y8, Y8               \
	VADDPS          Y7, Y0, Y0               \
	VADDPS          Y8, Y0, Y0

// MX256BLOCK: one block with 256-bit ops (tail), same as the AVX2 kernel.
#define MX256BLOCK \
	MOVBLZX        (SI), AX           \
	VMOVSS         (R8)(AX*4), X1     \
	VMULSS         (DX), X1, X1       \
	VBROADCASTSS   X1, Y1             \
	VBROADCASTI128 1(SI), Y2          \
	VPSRLVD        Y12, Y2, Y2        \
	VPAND          Y14, Y2, Y2        \
	VPSHUFB        Y2, Y13, Y2        \
	VPMADDUBSW     (DI), Y2, Y2       \
	VPMADDWD       Y15, Y2, Y2        \
	VPSUBD         (R9), Y2, Y2       \
	VCVTDQ2PS      Y2, Y2             \
	VMULPS         Y1, Y2, Y2         \
	VADDPS         Y2, Y0, Y0

// func dotMXFP4AVX512(w *byte, qs *int8, d *float32, corr *int32, nb int) float32
TEXT ·dotMXFP4AVX512(SB), NOSPLIT, $0-44
	MOVQ w+0(FP), SI
	MOVQ qs+8(FP), DI
	MOVQ d+16(FP), DX
	MOVQ corr+24(FP), R9
	MOVQ nb+32(FP), CX
	MOVL            $0x00010001, AX
	VPBROADCASTD    AX, Z15
	MOVL            $0x0F0F0F0F, AX
	VPBROADCASTD    AX, Z14
	VBROADCASTI32X4 ·kvaluesMXFP4u(SB), Z13
	VBROADCASTI64X4 ·mxShift(SB), Z12
	MOVL            $0xFF00, AX
	KMOVW           AX, K1
	LEAQ            ·e8m0HalfTable(SB), R8
	VXORPS          Y0, Y0, Y0
	SHRQ            $2, CX
	JZ              mx5tail

mx5loop:
	MX512PAIR(0, 0, 0, 0)
	MX512PAIR(34, 64, 8, 64)
	ADDQ            $68, SI
	ADDQ            $128, DI
	ADDQ            $16, DX
	ADDQ            $128, R9
	DECQ            CX
	JNZ             mx5loop

mx5tail:
	MOVQ            nb+32(FP), CX
	ANDQ            $3, CX
	JZ              mx5done

mx5tailloop:
	MX256BLOCK
	ADDQ            $17, SI
	ADDQ            $32, DI
	ADDQ            $4, DX
	ADDQ            $32, R9
	DECQ            CX
	JNZ             mx5tailloop

mx5done:
	VEXTRACTF128 $1, Y0, X1
	VADDPS       X1, X0, X0
	VMOVHLPS     X0, X0, X1
	VADDPS       X1, X0, X0
	VMOVSHDUP    X0, X1
	VADDSS       X1, X0, X0
	VMOVSS       X0, ret+40(FP)
	VZEROUPPER
	RET
