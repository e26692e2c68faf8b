//go:build arm64 && !purego

#include "textflag.h"
#include "neon_arm64.h"
#include "kquant_arm64.h"

// Multi-token Q4_K and Q6_K (gemm_arm64.go). Q4_K: each weight block's scales and nibbles
// are unpacked once into registers (V0-V15, V20-V22), then every token of
// the call runs the vector kernel's per-token instructions against them
// (dot_arm64.s's Q4_K body: the same LANES16, MLAE, ACCLANES and mins
// sequence), so each (row, token) is dotQ4_K's result bit for bit. A
// token's float accumulators (mins V29, lanes V30/V31) live in acc between
// blocks: 12 floats per token, loaded and stored once per block.
//
// Registers: R0 the block, R1 the tokens' {qs, d, bsums} pointers, R2 the
// token count, R3 acc, R4 blocks left, R5-R12 scratch (the scale unpack;
// the token loop's pointers), R13 the block's offset into a token's quants
// (256 per block; its scales and sums are at R13>>6 and R13>>3), R14/R15
// the block's d and dmin as float32 bits, R16 rows left, R17 the row's
// output for token 0, R19 the token stride of y in bytes, R20 the block
// count, R21 output scratch, R22 the row, R23 the row stride.

// UNPACK(a, b, c, d): a chunk's 32 nibble bytes at R11 (advanced) into
// vector registers a-d: a/b the low nibbles of bytes 0-15/16-31, c/d their
// high nibbles. V27 = 16 × 0x0F.
#define UNPACK(a, b, c, d) \
	VLD1.P 32(R11), [a.B16, b.B16] \
	VUSHR  $4, a.B16, c.B16        \
	VUSHR  $4, b.B16, d.B16        \
	VAND   V27.B16, a.B16, a.B16   \
	VAND   V27.B16, b.B16, b.B16

// TCHUNK(a, b, c, d, ls, li, hs, hi): the token's next 64 quants at R6
// (advanced) against chunk registers a-d (register numbers); the low
// nibbles' sums times scale Vls.S[li], the high ones' times Vhs.S[hi],
// added to the integer lanes V25 (elements 0-15 of each 32) and V26
// (16-31), as dot_arm64.s's K4CHUNK.
#define TCHUNK(a, b, c, d, ls, li, hs, hi) \
	VLD1.P 64(R6), [V16.B16, V17.B16, V18.B16, V19.B16] \
	LANES16(23, a, 16, 16) \
	LANES16(24, b, 17, 17) \
	LANES16(28, c, 18, 18) \
	LANES16(27, d, 19, 19) \
	MLAE(25, 23, ls, li)   \
	MLAE(26, 24, ls, li)   \
	MLAE(25, 28, hs, hi)   \
	MLAE(26, 27, hs, hi)

// TMINS: V29 += float32(F18 · float32(M)), M the block's mins against the
// token's Q8_K sums at R8, as dot_arm64.s's K4MINS. Clobbers V23-V25.
#define TMINS \
	VLD1   (R8), [V23.H8, V24.H8] \
	K4MINSUM(29)

// GEMMOUT(fin): y for the next token (F0 to R21, then one token on), and
// back to fin for the next token.
#define GEMMOUT(fin) \
	FMOVS  F0, (R21)         \
	ADD    R19, R21, R21     \
	SUBS   $1, R10, R10      \
	BNE    fin

// GEMMNEXTROW(row): the next row (its outputs one float on, its weights
// a row stride on), and back to row while rows are left.
#define GEMMNEXTROW(row) \
	ADD    $4, R17, R17      \
	ADD    R23, R22, R22     \
	SUBS   $1, R16, R16      \
	BNE    row               \
	RET

// GEMMARGS loads the arguments every multi-token routine takes.
#define GEMMARGS \
	MOVD w+0(FP), R22        \
	MOVD rb+8(FP), R23       \
	MOVD rows+16(FP), R16    \
	MOVD nb+24(FP), R20      \
	MOVD toks+32(FP), R1     \
	MOVD ntok+40(FP), R2     \
	MOVD y+48(FP), R17       \
	MOVD ys+56(FP), R19      \
	LSL  $2, R19, R19        \
	MOVD acc+64(FP), R3

#define Q4_K_GEMM_BODY \
	GEMMARGS                 \
row:                         \
	MOVD R3, R9              \
	MOVD R2, R10             \
	ZERO(29)                 \
	ZERO(30)                 \
	ZERO(31)                 \
clear:                       \
	VST1.P [V29.S4, V30.S4, V31.S4], 48(R9) \
	SUBS $1, R10, R10        \
	BNE  clear               \
	MOVD R22, R0             \
	MOVD R20, R4             \
	MOVD ZR, R13             \
blk:                         \
	MOVHU  (R0), R5          \
	FMOVS  R5, F16           \
	FCVTHS F16, F16          \
	FMOVS  F16, R14          \
	MOVHU  2(R0), R5         \
	FMOVS  R5, F18           \
	FCVTHS F18, F18          \
	FMOVS  F18, R15          \
	K4SCALES                 \
	VMOVI  $15, V27.B16      \
	ADD    $16, R0, R11      \
	UNPACK(V0, V1, V2, V3)   \
	UNPACK(V4, V5, V6, V7)   \
	UNPACK(V8, V9, V10, V11) \
	UNPACK(V12, V13, V14, V15) \
	MOVD R1, R5              \
	MOVD R3, R9              \
	MOVD R2, R10             \
tok:                         \
	MOVD (R5), R6            \
	ADD  R13, R6, R6         \
	MOVD 8(R5), R7           \
	ADD  R13>>6, R7, R7      \
	MOVD 16(R5), R8          \
	ADD  R13>>3, R8, R8      \
	ADD  $24, R5, R5         \
	ZERO(25)                 \
	ZERO(26)                 \
	TCHUNK(0, 1, 2, 3, 20, 0, 20, 1)     \
	TCHUNK(4, 5, 6, 7, 20, 2, 20, 3)     \
	TCHUNK(8, 9, 10, 11, 21, 0, 21, 1)   \
	TCHUNK(12, 13, 14, 15, 21, 2, 21, 3) \
	VLD1   (R9), [V29.S4, V30.S4, V31.S4] \
	FMOVS  (R7), F17         \
	FMOVS  R14, F16          \
	FMULS  F17, F16, F16     \
	FMOVS  R15, F18          \
	FMULS  F17, F18, F18     \
	ACCLANES(25, 26)         \
	TMINS                    \
	VST1.P [V29.S4, V30.S4, V31.S4], 48(R9) \
	SUBS   $1, R10, R10      \
	BNE    tok               \
	ADD    $144, R0, R0      \
	ADD    $256, R13, R13    \
	SUBS   $1, R4, R4        \
	BNE    blk               \
	MOVD R3, R9              \
	MOVD R17, R21            \
	MOVD R2, R10             \
fin:                         \
	VLD1.P 48(R9), [V29.S4, V30.S4, V31.S4] \
	HSUM8(0, 30, 31, 1)      \
	HSUM4(2, 29, 1)          \
	FSUBS  F2, F0, F0        \
	GEMMOUT(fin)             \
	GEMMNEXTROW(row)

#define LANES16 LANES16_SDOT

// func gemmQ4_KSDOT(w *byte, rb, rows, nb int, toks *neonTok, ntok int, y *float32, ys int, acc *float32)
TEXT ·gemmQ4_KSDOT(SB), NOSPLIT, $0-72
	Q4_K_GEMM_BODY

#undef LANES16
#define LANES16 LANES16_NEON

// func gemmQ4_KNEON(w *byte, rb, rows, nb int, toks *neonTok, ntok int, y *float32, ys int, acc *float32)
TEXT ·gemmQ4_KNEON(SB), NOSPLIT, $0-72
	Q4_K_GEMM_BODY

// Q6_K: each block's 256 six-bit values (minus 32, as int8) are unpacked
// once into V0-V15 (elements 32k..32k+31 in V2k/V2k+1) and its 16 scales
// into V20-V23, then every token runs dot_arm64.s's Q6DOT sequence against
// them; a token's float lanes (V30/V31) live in acc, 12 floats apart,
// between blocks. Masks: V27 = 16 × 0x0F, V24 = 16 × 0x30, V29 = 16 × 32.

// Q6PAIR(a, a1, NIB, SH, n, o, o1): o/o1 = the 6-bit values of 32
// elements, minus 32: the low (NIB = Q6LOWNIB) or high (Q6HIGHNIB) nibbles
// of ql in a/a1 with the qh bits (V30/V31) moved by SH n into bits 4-5.
// Clobbers V25, V26.
#define Q6LOWNIB(a, o) VAND V27.B16, a.B16, o.B16
#define Q6HIGHNIB(a, o) VUSHR $4, a.B16, o.B16
#define Q6PAIR(a, a1, NIB, SH, n, o, o1) \
	NIB(a, o)                      \
	NIB(a1, o1)                    \
	SH     $n, V30.B16, V25.B16    \
	SH     $n, V31.B16, V26.B16    \
	VBIT   V24.B16, V25.B16, o.B16 \
	VBIT   V24.B16, V26.B16, o1.B16 \
	VSUB   V29.B16, o.B16, o.B16   \
	VSUB   V29.B16, o1.B16, o1.B16

// Q6UNPACK(o0, …, o7): 128 elements from 64 ql bytes at R6 and 32 qh bytes
// at R7 (both advanced), as dot_arm64.s's Q6HALF orders them.
#define Q6UNPACK(o0, o1, o2, o3, o4, o5, o6, o7) \
	VLD1.P 64(R6), [V16.B16, V17.B16, V18.B16, V19.B16] \
	VLD1.P 32(R7), [V30.B16, V31.B16]                 \
	Q6PAIR(V16, V17, Q6LOWNIB, VSHL, 4, o0, o1)       \
	Q6PAIR(V18, V19, Q6LOWNIB, VSHL, 2, o2, o3)       \
	Q6PAIR(V16, V17, Q6HIGHNIB, VSHL, 0, o4, o5)      \
	Q6PAIR(V18, V19, Q6HIGHNIB, VUSHR, 2, o6, o7)

// Q6TDOT(a, a1, s, i, i1): the token's next 32 quants at R6 (advanced)
// against the values in registers a/a1 (numbers), times scales Vs.S[i]
// and Vs.S[i1], added to the integer lanes V25/V26 (dot_arm64.s's Q6DOT).
#define Q6TDOT(a, a1, s, i, i1) \
	VLD1.P 32(R6), [V16.B16, V17.B16] \
	LANES16(18, a, 16, 16)  \
	LANES16(19, a1, 17, 17) \
	MLAE(25, 18, s, i)      \
	MLAE(26, 19, s, i1)

#define Q6_K_GEMM_BODY \
	GEMMARGS                 \
	VMOVI  $15, V27.B16      \
	VMOVI  $48, V24.B16      \
	VMOVI  $32, V29.B16      \
q6row:                       \
	MOVD R3, R9              \
	MOVD R2, R10             \
	ZERO(30)                 \
	ZERO(31)                 \
q6clear:                     \
	VST1   [V30.S4, V31.S4], (R9) \
	ADD  $48, R9, R9         \
	SUBS $1, R10, R10        \
	BNE  q6clear             \
	MOVD R22, R0             \
	MOVD R20, R4             \
	MOVD ZR, R13             \
q6blk:                       \
	MOVHU  208(R0), R5       \
	FMOVS  R5, F16           \
	FCVTHS F16, F16          \
	FMOVS  F16, R14          \
	ADD    $192, R0, R6      \
	VLD1   (R6), [V19.B16]   \
	SXTL8H(18, 19)           \
	SXTL28H(19, 19)          \
	SXTL4S(20, 18)           \
	SXTL24S(21, 18)          \
	SXTL4S(22, 19)           \
	SXTL24S(23, 19)          \
	MOVD   R0, R6            \
	ADD    $128, R0, R7      \
	Q6UNPACK(V0, V1, V2, V3, V4, V5, V6, V7)         \
	Q6UNPACK(V8, V9, V10, V11, V12, V13, V14, V15)   \
	MOVD R1, R5              \
	MOVD R3, R9              \
	MOVD R2, R10             \
q6tok:                       \
	MOVD (R5), R6            \
	ADD  R13, R6, R6         \
	MOVD 8(R5), R7           \
	ADD  R13>>6, R7, R7      \
	ADD  $24, R5, R5         \
	ZERO(25)                 \
	ZERO(26)                 \
	Q6TDOT(0, 1, 20, 0, 1)   \
	Q6TDOT(2, 3, 20, 2, 3)   \
	Q6TDOT(4, 5, 21, 0, 1)   \
	Q6TDOT(6, 7, 21, 2, 3)   \
	Q6TDOT(8, 9, 22, 0, 1)   \
	Q6TDOT(10, 11, 22, 2, 3) \
	Q6TDOT(12, 13, 23, 0, 1) \
	Q6TDOT(14, 15, 23, 2, 3) \
	VLD1   (R9), [V30.S4, V31.S4] \
	FMOVS  (R7), F17         \
	FMOVS  R14, F16          \
	FMULS  F17, F16, F16     \
	ACCLANES(25, 26)         \
	VST1   [V30.S4, V31.S4], (R9) \
	ADD    $48, R9, R9       \
	SUBS   $1, R10, R10      \
	BNE    q6tok             \
	ADD    $210, R0, R0      \
	ADD    $256, R13, R13    \
	SUBS   $1, R4, R4        \
	BNE    q6blk             \
	MOVD R3, R9              \
	MOVD R17, R21            \
	MOVD R2, R10             \
q6fin:                       \
	VLD1   (R9), [V30.S4, V31.S4] \
	ADD    $48, R9, R9       \
	HSUM8(0, 30, 31, 1)      \
	GEMMOUT(q6fin)           \
	GEMMNEXTROW(q6row)

#undef LANES16
#define LANES16 LANES16_SDOT

// func gemmQ6_KSDOT(w *byte, rb, rows, nb int, toks *neonTok, ntok int, y *float32, ys int, acc *float32)
TEXT ·gemmQ6_KSDOT(SB), NOSPLIT, $0-72
	Q6_K_GEMM_BODY

#undef LANES16
#define LANES16 LANES16_NEON

// func gemmQ6_KNEON(w *byte, rb, rows, nb int, toks *neonTok, ntok int, y *float32, ys int, acc *float32)
TEXT ·gemmQ6_KNEON(SB), NOSPLIT, $0-72
	Q6_K_GEMM_BODY
