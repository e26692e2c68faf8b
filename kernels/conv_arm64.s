//go:build arm64 && !purego

#include "textflag.h"
#include "neon_arm64.h"

// The four-tap convolution (conv.go) on 4 channels at a time: LD4 splits
// the channel-major taps into one register per tap (V4-V7) and LD3 the
// decode state into one per input, ST3 interleaves the new state back.
// Each sum runs from +0 (V31) over the rounded products in tap order
// (FMUL then FADD, never fused), as the reference's.

// SUM4 multiplies V0-V3 (the inputs, oldest first) by V4-V7 (the taps) and
// leaves ((((+0 + p0) + p1) + p2) + p3) in V16 (V17-V19 clobbered).
#define SUM4 \
	FMUL4S(16, 0, 4)   \
	FMUL4S(17, 1, 5)   \
	FMUL4S(18, 2, 6)   \
	FMUL4S(19, 3, 7)   \
	FADD4S(16, 31, 16) \
	FADD4S(16, 16, 17) \
	FADD4S(16, 16, 18) \
	FADD4S(16, 16, 19)

// func conv4NEON(out, in0, in1, in2, w *float32, n int)
//
// out[c] = Σ_i in_i[c]·w[4c+i], in_3 = out (n a positive multiple of 4).
TEXT ·conv4NEON(SB), NOSPLIT, $0-48
	MOVD out+0(FP), R0
	MOVD in0+8(FP), R1
	MOVD in1+16(FP), R2
	MOVD in2+24(FP), R3
	MOVD w+32(FP), R4
	MOVD n+40(FP), R5
	LSR  $2, R5, R5
	VEOR V31.B16, V31.B16, V31.B16

c4loop:
	VLD4.P 64(R4), [V4.S4, V5.S4, V6.S4, V7.S4]
	VLD1.P 16(R1), [V0.S4]
	VLD1.P 16(R2), [V1.S4]
	VLD1.P 16(R3), [V2.S4]
	VLD1   (R0), [V3.S4]
	SUM4
	VST1.P [V16.S4], 16(R0)
	SUBS   $1, R5, R5
	BNE    c4loop
	RET

// func convStep4NEON(state, x, w *float32, n int)
//
// x[c] = Σ_{i<3} state[3c+i]·w[4c+i] + x[c]·w[4c+3]; state[3c:3c+3] =
// (state[3c+1], state[3c+2], x[c]) (n a positive multiple of 4).
TEXT ·convStep4NEON(SB), NOSPLIT, $0-32
	MOVD state+0(FP), R0
	MOVD x+8(FP), R1
	MOVD w+16(FP), R2
	MOVD n+24(FP), R3
	LSR  $2, R3, R3
	VEOR V31.B16, V31.B16, V31.B16

s4loop:
	VLD3   (R0), [V0.S4, V1.S4, V2.S4]
	VLD4.P 64(R2), [V4.S4, V5.S4, V6.S4, V7.S4]
	VLD1   (R1), [V3.S4]
	SUM4
	VST1.P [V16.S4], 16(R1)
	VST3.P [V1.S4, V2.S4, V3.S4], 48(R0)
	SUBS   $1, R3, R3
	BNE    s4loop
	RET
