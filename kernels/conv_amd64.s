//go:build amd64 && !purego

#include "textflag.h"

// The four-tap convolution (conv.go) on 8 channels at a time. Taps arrive
// channel-major (4 per channel): TAPS8 loads channels c and c+4 into the
// two 128-bit halves of one register, so the in-lane 4×4 transpose of
// unpack instructions leaves tap i of channels c..c+7 in order in Y0+i.
// Each sum runs from +0 (Y15) over the rounded products in tap order, as
// the reference's.

// TAPS8 leaves tap i of the 8 channels at (SI) in Yi, i = 0..3 (Y4-Y7
// clobbered).
#define TAPS8 \
	VMOVUPS     0(SI), X0              \
	VINSERTF128 $1, 64(SI), Y0, Y0     \
	VMOVUPS     16(SI), X1             \
	VINSERTF128 $1, 80(SI), Y1, Y1     \
	VMOVUPS     32(SI), X2             \
	VINSERTF128 $1, 96(SI), Y2, Y2     \
	VMOVUPS     48(SI), X3             \
	VINSERTF128 $1, 112(SI), Y3, Y3    \
	VUNPCKLPS   Y1, Y0, Y4             \
	VUNPCKHPS   Y1, Y0, Y5             \
	VUNPCKLPS   Y3, Y2, Y6             \
	VUNPCKHPS   Y3, Y2, Y7             \
	VUNPCKLPD   Y6, Y4, Y0             \
	VUNPCKHPD   Y6, Y4, Y1             \
	VUNPCKLPD   Y7, Y5, Y2             \
	VUNPCKHPD   Y7, Y5, Y3

// SUM4 multiplies Y0-Y3 (the taps) by Y8-Y11 (the inputs, oldest first)
// and leaves ((((+0 + p0) + p1) + p2) + p3) in Y0.
#define SUM4 \
	VMULPS Y8, Y0, Y0   \
	VMULPS Y9, Y1, Y1   \
	VMULPS Y10, Y2, Y2  \
	VMULPS Y11, Y3, Y3  \
	VADDPS Y0, Y15, Y0  \
	VADDPS Y1, Y0, Y0   \
	VADDPS Y2, Y0, Y0   \
	VADDPS Y3, Y0, Y0

// func conv4AVX2(out, in0, in1, in2, w *float32, n int)
//
// out[c] = Σ_i in_i[c]·w[4c+i], in_3 = out (n a positive multiple of 8).
TEXT ·conv4AVX2(SB), NOSPLIT, $0-48
	MOVQ   out+0(FP), DI
	MOVQ   in0+8(FP), R8
	MOVQ   in1+16(FP), R9
	MOVQ   in2+24(FP), R10
	MOVQ   w+32(FP), SI
	MOVQ   n+40(FP), CX
	SHRQ   $3, CX
	VXORPS Y15, Y15, Y15

c4loop:
	TAPS8
	VMOVUPS (R8), Y8
	VMOVUPS (R9), Y9
	VMOVUPS (R10), Y10
	VMOVUPS (DI), Y11
	SUM4
	VMOVUPS Y0, (DI)
	ADDQ    $128, SI
	ADDQ    $32, R8
	ADDQ    $32, R9
	ADDQ    $32, R10
	ADDQ    $32, DI
	DECQ    CX
	JNZ     c4loop
	VZEROUPPER
	RET

// The decode state holds 3 floats per channel: 8 channels are 24 floats,
// positions p = 3c+i in three registers (p/8, lane p%8). Tap i's positions
// fall in disjoint lanes of the three, so two blends gather them into one
// register and a permutation puts them in channel order; the new state
// (inputs 1, 2 and x) goes back through the inverse permutations and the
// same blends.
DATA convPerm0<>+0(SB)/4, $0
DATA convPerm0<>+4(SB)/4, $3
DATA convPerm0<>+8(SB)/4, $6
DATA convPerm0<>+12(SB)/4, $1
DATA convPerm0<>+16(SB)/4, $4
DATA convPerm0<>+20(SB)/4, $7
DATA convPerm0<>+24(SB)/4, $2
DATA convPerm0<>+28(SB)/4, $5
GLOBL convPerm0<>(SB), RODATA|NOPTR, $32

DATA convPerm1<>+0(SB)/4, $1
DATA convPerm1<>+4(SB)/4, $4
DATA convPerm1<>+8(SB)/4, $7
DATA convPerm1<>+12(SB)/4, $2
DATA convPerm1<>+16(SB)/4, $5
DATA convPerm1<>+20(SB)/4, $0
DATA convPerm1<>+24(SB)/4, $3
DATA convPerm1<>+28(SB)/4, $6
GLOBL convPerm1<>(SB), RODATA|NOPTR, $32

// convPerm1Inv is convPerm1's inverse; convPerm0 and convPerm2 are their
// own.
DATA convPerm1Inv<>+0(SB)/4, $5
DATA convPerm1Inv<>+4(SB)/4, $0
DATA convPerm1Inv<>+8(SB)/4, $3
DATA convPerm1Inv<>+12(SB)/4, $6
DATA convPerm1Inv<>+16(SB)/4, $1
DATA convPerm1Inv<>+20(SB)/4, $4
DATA convPerm1Inv<>+24(SB)/4, $7
DATA convPerm1Inv<>+28(SB)/4, $2
GLOBL convPerm1Inv<>(SB), RODATA|NOPTR, $32

DATA convPerm2<>+0(SB)/4, $2
DATA convPerm2<>+4(SB)/4, $5
DATA convPerm2<>+8(SB)/4, $0
DATA convPerm2<>+12(SB)/4, $3
DATA convPerm2<>+16(SB)/4, $6
DATA convPerm2<>+20(SB)/4, $1
DATA convPerm2<>+24(SB)/4, $4
DATA convPerm2<>+28(SB)/4, $7
GLOBL convPerm2<>(SB), RODATA|NOPTR, $32

// func convStep4AVX2(state, x, w *float32, n int)
//
// x[c] = Σ_{i<3} state[3c+i]·w[4c+i] + x[c]·w[4c+3]; state[3c:3c+3] =
// (state[3c+1], state[3c+2], x[c]) (n a positive multiple of 8).
TEXT ·convStep4AVX2(SB), NOSPLIT, $0-32
	MOVQ    state+0(FP), DI
	MOVQ    x+8(FP), R8
	MOVQ    w+16(FP), SI
	MOVQ    n+24(FP), CX
	SHRQ    $3, CX
	VXORPS  Y15, Y15, Y15
	VMOVDQU convPerm0<>(SB), Y12
	VMOVDQU convPerm1<>(SB), Y13
	VMOVDQU convPerm2<>(SB), Y14

s4loop:
	// the state's positions 0-7, 8-15, 16-23
	VMOVUPS  0(DI), Y3
	VMOVUPS  32(DI), Y4
	VMOVUPS  64(DI), Y5
	// input 0: lanes {0,3,6} of Y3, {1,4,7} of Y4, {2,5} of Y5
	VBLENDPS $0x92, Y4, Y3, Y8
	VBLENDPS $0x24, Y5, Y8, Y8
	VPERMPS  Y8, Y12, Y8
	// input 1: {1,4,7} of Y3, {2,5} of Y4, {0,3,6} of Y5
	VBLENDPS $0x24, Y4, Y3, Y9
	VBLENDPS $0x49, Y5, Y9, Y9
	VPERMPS  Y9, Y13, Y9
	// input 2: {2,5} of Y3, {0,3,6} of Y4, {1,4,7} of Y5
	VBLENDPS $0x49, Y4, Y3, Y10
	VBLENDPS $0x92, Y5, Y10, Y10
	VPERMPS  Y10, Y14, Y10
	VMOVUPS  (R8), Y11
	TAPS8
	SUM4
	VMOVUPS  Y0, (R8)
	// the new state: (input 1, input 2, x) back to positions
	VPERMPS  Y9, Y12, Y3
	VMOVDQU  convPerm1Inv<>(SB), Y0
	VPERMPS  Y10, Y0, Y4
	VPERMPS  Y11, Y14, Y5
	VBLENDPS $0x92, Y4, Y3, Y0
	VBLENDPS $0x24, Y5, Y0, Y0
	VMOVUPS  Y0, 0(DI)
	VBLENDPS $0x24, Y4, Y3, Y1
	VBLENDPS $0x49, Y5, Y1, Y1
	VMOVUPS  Y1, 32(DI)
	VBLENDPS $0x49, Y4, Y3, Y2
	VBLENDPS $0x92, Y5, Y2, Y2
	VMOVUPS  Y2, 64(DI)
	ADDQ     $96, DI
	ADDQ     $32, R8
	ADDQ     $128, SI
	DECQ     CX
	JNZ      s4loop
	VZEROUPPER
	RET
