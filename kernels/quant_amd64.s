//go:build amd64 && !purego

#include "textflag.h"

// AVX2 activation quantizers, bit-identical to refQuantQ8_0 / refQuantQ8_K
// (llama.cpp's quantize_row_q8_0_ref / quantize_row_q8_K_ref).

#define BCASTD(val, xr, yr) \
	MOVL         val, AX  \
	VMOVD        AX, xr   \
	VPBROADCASTD xr, yr

// PACK32: Y4..Y7 (32 int32) -> Y4 (32 int8 in element order); Y10 = perm.
#define PACK32 \
	VPACKSSDW Y5, Y4, Y4 \
	VPACKSSDW Y7, Y6, Y6 \
	VPACKSSWB Y6, Y4, Y4 \
	VPERMD    Y4, Y10, Y4

// ROUNDF(v): v = C roundf(v) (ties away from zero). Uses Y8, Y9.
// Y15 = abs mask, Y14 = sign mask, Y13 = 1.0, Y12 = 0.5.
#define ROUNDF(v) \
	VROUNDPS $3, v, Y8      \
	VSUBPS   Y8, v, Y9      \
	VANDPS   Y15, Y9, Y9    \
	VCMPPS   $13, Y12, Y9, Y9 \
	VANDPS   Y14, v, v      \
	VORPS    Y13, v, v      \
	VANDPS   Y9, v, v       \
	VADDPS   Y8, v, v

// func quantQ8_0AVX2(x *float32, qs *int8, d *float32, nb int)
TEXT ·quantQ8_0AVX2(SB), NOSPLIT, $0-32
	MOVQ x+0(FP), SI
	MOVQ qs+8(FP), DI
	MOVQ d+16(FP), DX
	MOVQ nb+24(FP), CX
	BCASTD($0x7fffffff, X15, Y15)
	BCASTD($0x80000000, X14, Y14)
	BCASTD($0x3f800000, X13, Y13)
	BCASTD($0x3f000000, X12, Y12)
	MOVL    $0x42fe0000, AX // 127.0
	VMOVD   AX, X11
	VMOVDQU ·packPerm(SB), Y10
	VXORPS  X3, X3, X3

q80loop:
	VMOVUPS (SI), Y4
	VMOVUPS 32(SI), Y5
	VMOVUPS 64(SI), Y6
	VMOVUPS 96(SI), Y7
	VANDPS  Y15, Y4, Y0
	VANDPS  Y15, Y5, Y1
	VMAXPS  Y1, Y0, Y0
	VANDPS  Y15, Y6, Y1
	VMAXPS  Y1, Y0, Y0
	VANDPS  Y15, Y7, Y1
	VMAXPS  Y1, Y0, Y0
	VEXTRACTF128 $1, Y0, X1
	VMAXPS  X1, X0, X0
	VMOVHLPS X0, X0, X1
	VMAXPS  X1, X0, X0
	VMOVSHDUP X0, X1
	VMAXSS  X1, X0, X0
	VDIVSS  X11, X0, X0           // d = amax / 127
	VDIVSS  X0, X13, X1           // 1/d
	VCMPSS  $4, X3, X0, X2        // d != 0
	VANDPS  X2, X1, X1            // id
	VCVTPS2PH $0, X0, X2
	VCVTPH2PS X2, X2
	VMOVSS  X2, (DX)
	VBROADCASTSS X1, Y1
	VMULPS  Y1, Y4, Y4
	VMULPS  Y1, Y5, Y5
	VMULPS  Y1, Y6, Y6
	VMULPS  Y1, Y7, Y7
	ROUNDF(Y4)
	ROUNDF(Y5)
	ROUNDF(Y6)
	ROUNDF(Y7)
	VCVTTPS2DQ Y4, Y4
	VCVTTPS2DQ Y5, Y5
	VCVTTPS2DQ Y6, Y6
	VCVTTPS2DQ Y7, Y7
	PACK32
	VMOVDQU Y4, (DI)
	ADDQ    $128, SI
	ADDQ    $32, DI
	ADDQ    $4, DX
	DECQ    CX
	JNZ     q80loop
	VZEROUPPER
	RET

// func quantQ8_KAVX2(x *float32, qs *int8, d *float32, bsums *int16, nb int)
TEXT ·quantQ8_KAVX2(SB), NOSPLIT, $0-40
	MOVQ x+0(FP), SI
	MOVQ qs+8(FP), DI
	MOVQ d+16(FP), DX
	MOVQ bsums+24(FP), R8
	MOVQ nb+32(FP), CX
	BCASTD($0x7fffffff, X15, Y15)
	BCASTD($127, X13, Y13)
	MOVL    $0xc2fe0000, AX // -127.0
	VMOVD   AX, X11
	MOVL    $0x3f800000, AX // 1.0
	VMOVD   AX, X12
	VMOVDQU ·packPerm(SB), Y10

qkblock:
	// pass 1: amax
	VXORPS Y0, Y0, Y0
	XORQ   BX, BX

qkmax:
	VANDPS (SI)(BX*1), Y15, Y1
	VMAXPS Y1, Y0, Y0
	VANDPS 32(SI)(BX*1), Y15, Y1
	VMAXPS Y1, Y0, Y0
	VANDPS 64(SI)(BX*1), Y15, Y1
	VMAXPS Y1, Y0, Y0
	VANDPS 96(SI)(BX*1), Y15, Y1
	VMAXPS Y1, Y0, Y0
	ADDQ   $128, BX
	CMPQ   BX, $1024
	JNE    qkmax
	VEXTRACTF128 $1, Y0, X1
	VMAXPS  X1, X0, X0
	VMOVHLPS X0, X0, X1
	VMAXPS  X1, X0, X0
	VMOVSHDUP X0, X1
	VMAXSS  X1, X0, X0
	VXORPS  X1, X1, X1
	VUCOMISS X1, X0
	JNE     qknonzero
	JP      qknonzero

	// all zero: qs, bsums, d = 0
	VPXOR   Y1, Y1, Y1
	XORQ    BX, BX

qkzero:
	VMOVDQU Y1, (DI)(BX*1)
	ADDQ    $32, BX
	CMPQ    BX, $256
	JNE     qkzero
	VMOVDQU Y1, (R8)
	MOVL    $0, (DX)
	JMP     qknext

qknonzero:
	// pass 2: the first element with |x| == amax gives max (with sign)
	VBROADCASTSS X0, Y0
	XORQ    BX, BX

qkfind:
	VANDPS  (SI)(BX*4), Y15, Y1
	VCMPPS  $0, Y0, Y1, Y1
	VMOVMSKPS Y1, AX
	TESTL   AX, AX
	JNZ     qkfound
	ADDQ    $8, BX
	CMPQ    BX, $256
	JNE     qkfind
	// unreachable for finite input (amax is one of the |x|); keep max = amax
	VMOVSS  X0, X1, X1
	JMP     qkscale

qkfound:
	TZCNTL  AX, AX
	ADDQ    AX, BX
	VMOVSS  (SI)(BX*4), X1

qkscale:
	VDIVSS  X1, X11, X2           // iscale = -127 / max
	VDIVSS  X2, X12, X3           // d = 1 / iscale
	VMOVSS  X3, (DX)
	VBROADCASTSS X2, Y2
	XORQ    BX, BX

qkquant:
	VMULPS  (SI), Y2, Y4
	VMULPS  32(SI), Y2, Y5
	VMULPS  64(SI), Y2, Y6
	VMULPS  96(SI), Y2, Y7
	VCVTPS2DQ Y4, Y4
	VCVTPS2DQ Y5, Y5
	VCVTPS2DQ Y6, Y6
	VCVTPS2DQ Y7, Y7
	VPMINSD Y13, Y4, Y4
	VPMINSD Y13, Y5, Y5
	VPMINSD Y13, Y6, Y6
	VPMINSD Y13, Y7, Y7
	// bsums of elements 0..15 and 16..31
	VPADDD  Y5, Y4, Y8
	VPADDD  Y7, Y6, Y9
	VPHADDD Y9, Y8, Y8
	VPHADDD Y8, Y8, Y8
	VEXTRACTI128 $1, Y8, X9
	VPADDD  X9, X8, X8
	VPACKSSDW X8, X8, X8
	VMOVD   X8, (R8)(BX*1)
	PACK32
	VMOVDQU Y4, (DI)
	ADDQ    $128, SI
	ADDQ    $32, DI
	ADDQ    $4, BX
	CMPQ    BX, $32
	JNE     qkquant
	SUBQ    $1024, SI              // back to the block start
	SUBQ    $256, DI

qknext:
	ADDQ    $1024, SI
	ADDQ    $256, DI
	ADDQ    $4, DX
	ADDQ    $32, R8
	DECQ    CX
	JNZ     qkblock
	VZEROUPPER
	RET
