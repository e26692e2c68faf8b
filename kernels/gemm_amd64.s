//go:build amd64 && !purego

#include "textflag.h"

// AVX2 multi-token kernels (see gemm.go). Per row and block the weights are
// loaded and unpacked once and applied to every token of the tile, held in
// registers. Per (row, token) the operations are exactly the vector
// kernel's (dot_amd64.s, the package doc's order): exact integer lanes per
// block, acc = acc + float32(d*float32(lane)) with separate VMULPS/VADDPS,
// the fixed horizontal sum, and for Q4_K the four minimum lanes
// accumulated apart and subtracted last.

// Packed Q8_K tile of 4 tokens, per block (gemm_amd64.go packQ8_K).
#define KD 0
#define KBS 16
#define KQS 144
#define KSTRIDE 1168

// HSUMTO(acc, xacc, dst, tmp): dst[0] = (r0+r2)+(r1+r3), r[i]=acc[i]+acc[i+4].
#define HSUMTO(acc, xacc, dst, tmp) \
	VEXTRACTF128 $1, acc, tmp \
	VADDPS       tmp, xacc, dst \
	VMOVHLPS     dst, dst, tmp \
	VADDPS       tmp, dst, dst \
	VMOVSHDUP    dst, tmp \
	VADDSS       tmp, dst, dst

// HSUM4TO(src, dst, tmp): dst[0] = (m0+m2)+(m1+m3) of the xmm src.
#define HSUM4TO(src, dst, tmp) \
	VMOVHLPS  src, src, tmp \
	VADDPS    tmp, src, dst \
	VMOVSHDUP dst, tmp \
	VADDSS    tmp, dst, dst

// G4SCALES unpacks the 12 scale bytes at 4(SI) of a Q4_K block: Y15 = the
// 8 scales as int16 in both 128-bit halves, X13 = the 8 mins as int16.
// Clobbers AX, BX, R9, R10, R11.
#define G4SCALES \
	MOVL         4(SI), AX \
	MOVL         8(SI), BX \
	MOVL         12(SI), R9 \
	MOVL         R9, R10 \
	SHRL         $4, R10 \
	ANDL         $0x0f0f0f0f, R10 \
	MOVL         BX, R11 \
	SHRL         $6, R11 \
	ANDL         $0x03030303, R11 \
	SHLL         $4, R11 \
	ORL          R11, R10 \
	ANDL         $0x3f3f3f3f, BX \
	ANDL         $0x0f0f0f0f, R9 \
	MOVL         AX, R11 \
	SHRL         $6, R11 \
	ANDL         $0x03030303, R11 \
	SHLL         $4, R11 \
	ORL          R11, R9 \
	ANDL         $0x3f3f3f3f, AX \
	SHLQ         $32, R9 \
	ORQ          R9, AX \
	VMOVQ        AX, X15 \
	VPMOVZXBW    X15, X15 \
	VINSERTI128  $1, X15, Y15, Y15 \
	SHLQ         $32, R10 \
	ORQ          R10, BX \
	VMOVQ        BX, X13 \
	VPMOVZXBW    X13, X13

// G4MIN(t): token t's minimum lanes: macc_t (16t(DX)) += dmin_t *
// float(madd(mins X13, pair sums of its bsums)); X12 = f16 dmin of the row.
#define G4MIN(t) \
	VMOVDQU      (KBS+32*t)(DI), X8 \
	VMOVDQU      (KBS+32*t+16)(DI), X9 \
	VPHADDW      X9, X8, X8 \
	VPMADDWD     X8, X13, X8 \
	VCVTDQ2PS    X8, X8 \
	VMULSS       (KD+4*t)(DI), X12, X9 \
	VBROADCASTSS X9, X9 \
	VMULPS       X9, X8, X8 \
	VADDPS       (16*t)(DX), X8, X8 \
	VMOVUPS      X8, (16*t)(DX)

// G4TOK(j, t, acc): token t's quants of chunk j against the unpacked low
// (Y9) and high (Y8) nibbles with the sub-block scales Y10, Y11.
#define G4TOK(j, t, acc) \
	VPMADDUBSW (KQS+256*t+64*j)(DI), Y9, Y12 \
	VPMADDWD   Y10, Y12, Y12 \
	VPADDD     Y12, acc, acc \
	VPMADDUBSW (KQS+256*t+64*j+32)(DI), Y8, Y13 \
	VPMADDWD   Y11, Y13, Y13 \
	VPADDD     Y13, acc, acc

// G4CHUNK(j): the 32 nibble bytes of chunk j (sub-blocks 2j, 2j+1) for all
// four tokens.
#define G4CHUNK(j) \
	VMOVDQU (16+32*j)(SI), Y8 \
	VPAND   Y14, Y8, Y9 \
	VPSRLW  $4, Y8, Y8 \
	VPAND   Y14, Y8, Y8 \
	VPSHUFB ·gemmK4Shuf+(64*j)(SB), Y15, Y10 \
	VPSHUFB ·gemmK4Shuf+(64*j+32)(SB), Y15, Y11 \
	G4TOK(j, 0, Y4) \
	G4TOK(j, 1, Y5) \
	G4TOK(j, 2, Y6) \
	G4TOK(j, 3, Y7)

// BLKFIN(t, acc, lanes, dw): acc += float(lanes) * (dw * d_t), d_t at
// KD+4t(DI); clobbers X13/Y13.
#define BLKFIN(t, acc, lanes, dw) \
	VCVTDQ2PS    lanes, lanes \
	VMULSS       (KD+4*t)(DI), dw, X13 \
	VBROADCASTSS X13, Y13 \
	VMULPS       Y13, lanes, lanes \
	VADDPS       lanes, acc, acc

// func gemmQ4_KAVX2(w *byte, rb, rows, nb int, pk *byte, y *float32, ys int, macc *[16]float32)
TEXT ·gemmQ4_KAVX2(SB), NOSPLIT, $0-64
	MOVQ w+0(FP), R13
	MOVQ rows+16(FP), R8
	MOVQ y+40(FP), R14
	MOVQ ys+48(FP), R15
	MOVQ macc+56(FP), DX
	MOVL         $0x0F0F0F0F, AX
	VMOVD        AX, X14
	VPBROADCASTD X14, Y14

g4row:
	MOVQ   R13, SI
	MOVQ   pk+32(FP), DI
	MOVQ   nb+24(FP), CX
	VXORPS Y0, Y0, Y0
	VXORPS Y1, Y1, Y1
	VXORPS Y2, Y2, Y2
	VXORPS Y3, Y3, Y3
	VMOVUPS X0, 0(DX)
	VMOVUPS X0, 16(DX)
	VMOVUPS X0, 32(DX)
	VMOVUPS X0, 48(DX)

g4blk:
	G4SCALES
	MOVWLZX   2(SI), AX
	VMOVD     AX, X12
	VCVTPH2PS X12, X12
	G4MIN(0)
	G4MIN(1)
	G4MIN(2)
	G4MIN(3)
	VPXOR     Y4, Y4, Y4
	VPXOR     Y5, Y5, Y5
	VPXOR     Y6, Y6, Y6
	VPXOR     Y7, Y7, Y7
	G4CHUNK(0)
	G4CHUNK(1)
	G4CHUNK(2)
	G4CHUNK(3)
	MOVWLZX   (SI), AX
	VMOVD     AX, X12
	VCVTPH2PS X12, X12
	BLKFIN(0, Y0, Y4, X12)
	BLKFIN(1, Y1, Y5, X12)
	BLKFIN(2, Y2, Y6, X12)
	BLKFIN(3, Y3, Y7, X12)
	ADDQ      $144, SI
	ADDQ      $KSTRIDE, DI
	DECQ      CX
	JNZ       g4blk

	HSUMTO(Y0, X0, X8, X9)
	VMOVUPS  0(DX), X10
	HSUM4TO(X10, X11, X12)
	VSUBSS   X11, X8, X8
	VMOVSS   X8, (R14)
	HSUMTO(Y1, X1, X8, X9)
	VMOVUPS  16(DX), X10
	HSUM4TO(X10, X11, X12)
	VSUBSS   X11, X8, X8
	VMOVSS   X8, (R14)(R15*1)
	HSUMTO(Y2, X2, X8, X9)
	VMOVUPS  32(DX), X10
	HSUM4TO(X10, X11, X12)
	VSUBSS   X11, X8, X8
	VMOVSS   X8, (R14)(R15*2)
	HSUMTO(Y3, X3, X8, X9)
	VMOVUPS  48(DX), X10
	HSUM4TO(X10, X11, X12)
	VSUBSS   X11, X8, X8
	LEAQ     (R14)(R15*2), R12
	VMOVSS   X8, (R12)(R15*1)

	ADDQ rb+8(FP), R13
	ADDQ $4, R14
	DECQ R8
	JNZ  g4row
	VZEROUPPER
	RET

// Q4_K against 8 tokens with AVX2, on the pair kernels' tile layout
// (q4KPairsLayout, T = 8: DV 0, DM 256, PS 384, Q 512, 2560 bytes per
// block) with the quants ordered by packQ4_KLanes: per token t and chunk j
// (sub-blocks X = 2j, Y = 2j+1) 64 bytes at 512+256t+64j. Each chunk's
// nibbles are rearranged once for the eight tokens into W1 (dword l = X's
// elements 4l, 4l+1, Y's 4l, 4l+1) and W2 (X's 4l+2, 4l+3, Y's 4l+2,
// 4l+3), so per token VPMADDUBSW twice and one VPADDW give in dword l the
// exact 4-element sums of lane l of X and of Y (|sum| ≤ 4·15·128), and one
// VPMADDWD with (scale X, scale Y) adds their scaled sums: lane l's chunk
// contribution, the vector kernel's integer, with one VPMADDWD per 64
// elements instead of two. The integer lanes stay in Y0–Y7; the float
// accumulators (8 tokens × 8 lanes, at 32t(DX)) and the minimum lanes (a
// pair of tokens per register, 4 lanes each, at 256+32p(DX)) live in the
// frame. Per (row, token) the float operations and their order are the
// vector kernel's.

// X8MIN(p): tokens 2p and 2p+1's minimum lanes (one 128-bit half each):
// macc_p += dmin·d_t × float(madd(mins Y13, pair sums)); Y12 = broadcast
// f16 dmin.
#define X8MIN(p) \
	VPMADDWD  (384+32*p)(DI), Y13, Y8 \
	VCVTDQ2PS Y8, Y8 \
	VMULPS    (256+32*p)(DI), Y12, Y9 \
	VMULPS    Y9, Y8, Y8 \
	VADDPS    (256+32*p)(DX), Y8, Y8 \
	VMOVUPS   Y8, (256+32*p)(DX)

// X8TOK(q, acc): one token's 64 quants of a chunk at q against W1 (Y10)
// and W2 (Y11) with the scale pairs Y8.
#define X8TOK(q, acc) \
	VPMADDUBSW (q)(DI), Y10, Y12 \
	VPMADDUBSW (q+32)(DI), Y11, Y13 \
	VPADDW     Y13, Y12, Y12 \
	VPMADDWD   Y8, Y12, Y12 \
	VPADDD     Y12, acc, acc

// X8CHUNK(j, sel): the 32 nibble bytes of chunk j (sub-blocks 2j, 2j+1)
// for all eight tokens; sel = VPSHUFD control repeating dword j (the two
// scales) of Y15.
#define X8CHUNK(j, sel) \
	VMOVDQU  (16+32*j)(SI), Y8 \
	VPAND    Y14, Y8, Y9 \
	VPSRLW   $4, Y8, Y8 \
	VPAND    Y14, Y8, Y8 \
	VPSLLD   $16, Y8, Y12 \
	VPBLENDW $0xAA, Y12, Y9, Y10 \
	VPSRLD   $16, Y9, Y9 \
	VPBLENDW $0xAA, Y8, Y9, Y11 \
	VPSHUFD  $sel, Y15, Y8 \
	X8TOK(512+64*j, Y0) \
	X8TOK(768+64*j, Y1) \
	X8TOK(1024+64*j, Y2) \
	X8TOK(1280+64*j, Y3) \
	X8TOK(1536+64*j, Y4) \
	X8TOK(1792+64*j, Y5) \
	X8TOK(2048+64*j, Y6) \
	X8TOK(2304+64*j, Y7)

// X8FIN(t, lanes): facc_t += float(lanes) × (d_w Y12 · d_t, 8 copies at
// DV+32t).
#define X8FIN(t, lanes) \
	VCVTDQ2PS lanes, lanes \
	VMULPS    (32*t)(DI), Y12, Y13 \
	VMULPS    Y13, lanes, lanes \
	VADDPS    (32*t)(DX), lanes, lanes \
	VMOVUPS   lanes, (32*t)(DX)

// X8FINALL(doff): Y12 = the block's f16 d at doff(SI), broadcast; X8FIN
// for the eight tokens.
#define X8FINALL(doff) \
	MOVWLZX      doff(SI), AX \
	VMOVD        AX, X12 \
	VCVTPH2PS    X12, X12 \
	VBROADCASTSS X12, Y12 \
	X8FIN(0, Y0) \
	X8FIN(1, Y1) \
	X8FIN(2, Y2) \
	X8FIN(3, Y3) \
	X8FIN(4, Y4) \
	X8FIN(5, Y5) \
	X8FIN(6, Y6) \
	X8FIN(7, Y7)

// X8ENTER(frame): the arguments in R13 (w), R8 (rows), R14 (y), R15 (ys),
// DX = the frame's scratch, Y14 = 32 × 0x0F.
#define X8ENTER(frame) \
	MOVQ         w+0(FP), R13 \
	MOVQ         rows+16(FP), R8 \
	MOVQ         y+40(FP), R14 \
	MOVQ         ys+48(FP), R15 \
	LEAQ         scratch-frame(SP), DX \
	MOVL         $0x0F0F0F0F, AX \
	VMOVD        AX, X14 \
	VPBROADCASTD X14, Y14

// X8ROW: a row's weight (SI) and tile (DI) pointers, block count (CX), the
// eight float accumulators zeroed (Y8 = 0).
#define X8ROW \
	MOVQ    R13, SI \
	MOVQ    pk+32(FP), DI \
	MOVQ    nb+24(FP), CX \
	VXORPS  Y8, Y8, Y8 \
	VMOVUPS Y8, 0(DX) \
	VMOVUPS Y8, 32(DX) \
	VMOVUPS Y8, 64(DX) \
	VMOVUPS Y8, 96(DX) \
	VMOVUPS Y8, 128(DX) \
	VMOVUPS Y8, 160(DX) \
	VMOVUPS Y8, 192(DX) \
	VMOVUPS Y8, 224(DX)

// X8LANES0: the eight tokens' integer lanes zeroed.
#define X8LANES0 \
	VPXOR Y0, Y0, Y0 \
	VPXOR Y1, Y1, Y1 \
	VPXOR Y2, Y2, Y2 \
	VPXOR Y3, Y3, Y3 \
	VPXOR Y4, Y4, Y4 \
	VPXOR Y5, Y5, Y5 \
	VPXOR Y6, Y6, Y6 \
	VPXOR Y7, Y7, Y7

// X8ROWEND: next row (flags from DECQ R8).
#define X8ROWEND \
	ADDQ rb+8(FP), R13 \
	ADDQ $4, R14 \
	DECQ R8

// X8OUT(t): y = hsum(facc_t) - hsum(macc_t) to (R12), next token.
#define X8OUT(t) \
	VMOVUPS (32*t)(DX), Y8 \
	HSUMTO(Y8, X8, X9, X10) \
	VMOVUPS (256+16*t)(DX), X10 \
	HSUM4TO(X10, X11, X12) \
	VSUBSS  X11, X9, X9 \
	VMOVSS  X9, (R12) \
	ADDQ    R15, R12

// func gemmQ4_KAVX2x8(w *byte, rb, rows, nb int, pk *byte, y *float32, ys int)
TEXT ·gemmQ4_KAVX2x8(SB), NOSPLIT, $384-56
	X8ENTER(384)

x8row:
	X8ROW
	VMOVUPS Y8, 256(DX)
	VMOVUPS Y8, 288(DX)
	VMOVUPS Y8, 320(DX)
	VMOVUPS Y8, 352(DX)

x8blk:
	G4SCALES
	VINSERTI128  $1, X13, Y13, Y13
	MOVWLZX      2(SI), AX
	VMOVD        AX, X12
	VCVTPH2PS    X12, X12
	VBROADCASTSS X12, Y12
	X8MIN(0)
	X8MIN(1)
	X8MIN(2)
	X8MIN(3)
	X8LANES0
	X8CHUNK(0, 0x00)
	X8CHUNK(1, 0x55)
	X8CHUNK(2, 0xAA)
	X8CHUNK(3, 0xFF)
	X8FINALL(0)
	ADDQ         $144, SI
	ADDQ         $2560, DI
	DECQ         CX
	JNZ          x8blk

	MOVQ R14, R12
	X8OUT(0)
	X8OUT(1)
	X8OUT(2)
	X8OUT(3)
	X8OUT(4)
	X8OUT(5)
	X8OUT(6)
	X8OUT(7)

	X8ROWEND
	JNZ        x8row
	VZEROUPPER
	RET

// Q6_K: per part of 32 elements the codes are built once (Y9 = q-32 as
// int8, Y8 = |q-32|) and each token's quants are sign-adjusted (VPSIGNB)
// so VPMADDUBSW forms the exact products; Y10 = the part's two scales as
// int16; Y13 = 32 × 0x30, Y14 = 32 × 0x0F, Y15 = 32 × 32.

// G6TOK(yoff, acc): one token's part at yoff(DI).
#define G6TOK(yoff, acc) \
	VMOVDQU    (yoff)(DI), Y12 \
	VPSIGNB    Y9, Y12, Y12 \
	VPMADDUBSW Y12, Y8, Y12 \
	VPMADDWD   Y10, Y12, Y12 \
	VPADDD     Y12, acc, acc

// G6CODES: Y9 holds the low 4 bits, Y8 the high 2 bits (shifted into place
// but not masked); form the signed and absolute codes.
#define G6CODES \
	VPAND   Y13, Y8, Y8 \
	VPOR    Y8, Y9, Y9 \
	VPSUBB  Y15, Y9, Y9 \
	VPABSB  Y9, Y8

// G6PART(e, c): part with elements e..e+31 of the block, scale pair c;
// codes already in Y8/Y9.
#define G6PART(e, c) \
	VPSHUFB   ·gemmQ6Shuf+(16*(c))(SB), X11, X10 \
	VPMOVSXBW X10, Y10 \
	G6TOK(KQS+(e), Y4) \
	G6TOK(KQS+256+(e), Y5) \
	G6TOK(KQS+512+(e), Y6) \
	G6TOK(KQS+768+(e), Y7)

// G6HALF(n): elements 128n..128n+127 (ql at 64n, qh at 128+32n).
#define G6HALF(n) \
	VMOVDQU (64*n)(SI), Y9 \
	VPAND   Y14, Y9, Y9 \
	VMOVDQU (128+32*n)(SI), Y8 \
	VPSLLW  $4, Y8, Y8 \
	G6CODES \
	G6PART(128*n, 4*n) \
	VMOVDQU (64*n+32)(SI), Y9 \
	VPAND   Y14, Y9, Y9 \
	VMOVDQU (128+32*n)(SI), Y8 \
	VPSLLW  $2, Y8, Y8 \
	G6CODES \
	G6PART(128*n+32, 4*n+1) \
	VMOVDQU (64*n)(SI), Y9 \
	VPSRLW  $4, Y9, Y9 \
	VPAND   Y14, Y9, Y9 \
	VMOVDQU (128+32*n)(SI), Y8 \
	G6CODES \
	G6PART(128*n+64, 4*n+2) \
	VMOVDQU (64*n+32)(SI), Y9 \
	VPSRLW  $4, Y9, Y9 \
	VPAND   Y14, Y9, Y9 \
	VMOVDQU (128+32*n)(SI), Y8 \
	VPSRLW  $2, Y8, Y8 \
	G6CODES \
	G6PART(128*n+96, 4*n+3)

// func gemmQ6_KAVX2(w *byte, rb, rows, nb int, pk *byte, y *float32, ys int)
TEXT ·gemmQ6_KAVX2(SB), NOSPLIT, $0-56
	MOVQ w+0(FP), R13
	MOVQ rows+16(FP), R8
	MOVQ y+40(FP), R14
	MOVQ ys+48(FP), R15
	MOVL         $0x0F0F0F0F, AX
	VMOVD        AX, X14
	VPBROADCASTD X14, Y14
	MOVL         $0x30303030, AX
	VMOVD        AX, X13
	VPBROADCASTD X13, Y13
	MOVL         $0x20202020, AX
	VMOVD        AX, X15
	VPBROADCASTD X15, Y15

g6row:
	MOVQ   R13, SI
	MOVQ   pk+32(FP), DI
	MOVQ   nb+24(FP), CX
	VXORPS Y0, Y0, Y0
	VXORPS Y1, Y1, Y1
	VXORPS Y2, Y2, Y2
	VXORPS Y3, Y3, Y3

g6blk:
	VMOVDQU 192(SI), X11
	VPXOR   Y4, Y4, Y4
	VPXOR   Y5, Y5, Y5
	VPXOR   Y6, Y6, Y6
	VPXOR   Y7, Y7, Y7
	G6HALF(0)
	G6HALF(1)
	MOVWLZX   208(SI), AX
	VMOVD     AX, X12
	VCVTPH2PS X12, X12
	VCVTDQ2PS    Y4, Y4
	VMULSS       (KD+0)(DI), X12, X8
	VBROADCASTSS X8, Y8
	VMULPS       Y8, Y4, Y4
	VADDPS       Y4, Y0, Y0
	VCVTDQ2PS    Y5, Y5
	VMULSS       (KD+4)(DI), X12, X8
	VBROADCASTSS X8, Y8
	VMULPS       Y8, Y5, Y5
	VADDPS       Y5, Y1, Y1
	VCVTDQ2PS    Y6, Y6
	VMULSS       (KD+8)(DI), X12, X8
	VBROADCASTSS X8, Y8
	VMULPS       Y8, Y6, Y6
	VADDPS       Y6, Y2, Y2
	VCVTDQ2PS    Y7, Y7
	VMULSS       (KD+12)(DI), X12, X8
	VBROADCASTSS X8, Y8
	VMULPS       Y8, Y7, Y7
	VADDPS       Y7, Y3, Y3
	ADDQ      $210, SI
	ADDQ      $KSTRIDE, DI
	DECQ      CX
	JNZ       g6blk

	HSUMTO(Y0, X0, X8, X9)
	VMOVSS   X8, (R14)
	HSUMTO(Y1, X1, X8, X9)
	VMOVSS   X8, (R14)(R15*1)
	HSUMTO(Y2, X2, X8, X9)
	VMOVSS   X8, (R14)(R15*2)
	HSUMTO(Y3, X3, X8, X9)
	LEAQ     (R14)(R15*2), R12
	VMOVSS   X8, (R12)(R15*1)

	ADDQ rb+8(FP), R13
	ADDQ $4, R14
	DECQ R8
	JNZ  g6row
	VZEROUPPER
	RET

// Q6_K against 8 tokens with AVX2 (packQ6_KLanes: per block DV, 8 × d_t
// per token at 32t; per token t and chunk k, elements 64k..64k+63 = parts
// X = 2k and Y = 2k+1, the quants at 256+256t+64k in the order of
// packQ4_KLanes and at 2304+128t+32k 16 int16 corrections, 32 × the
// 4-element sums of lane l of X and of Y). Each part's unsigned codes q
// (0..63) are built once for eight tokens and rearranged per chunk into W1
// and W2 as in the Q4_K 8-token kernel; per token VPMADDUBSW twice, VPADDW
// and VPSUBW of the correction give in dword l the exact sums of (q-32)·y
// over lane l of X and of Y (|·| ≤ 4·32·128), and one VPMADDWD with their
// scales (Y10) adds them: lane l's chunk contribution, the vector kernel's
// integer. The integer lanes stay in Y0–Y7, the float accumulators (8 × 8
// lanes at 32t(DX)) in the frame. Y11 = the block's 16 scale bytes, Y14 =
// 32 × 0x0F, Y15 = 32 × 0x30.

// Q6X8TOK(q, c, acc): one token's chunk: quants at q, corrections at c.
#define Q6X8TOK(q, c, acc) \
	VPMADDUBSW (q)(DI), Y8, Y12 \
	VPMADDUBSW (q+32)(DI), Y9, Y13 \
	VPADDW     Y13, Y12, Y12 \
	VPSUBW     (c)(DI), Y12, Y12 \
	VPMADDWD   Y10, Y12, Y12 \
	VPADDD     Y12, acc, acc

// Q6X8CODE(ql, lsh, qh, hsh, dst): one part's codes into dst: the low 4
// bits from the ql bytes at ql (lsh: the shift that brings them down), the
// high 2 from the qh bytes at qh (hsh: the shift that puts them at bits 4-5).
#define Q6X8CODE(ql, lsh, qh, hsh, dst) \
	VMOVDQU (ql)(SI), Y9 \
	lsh \
	VPAND   Y14, Y9, Y9 \
	VMOVDQU (qh)(SI), dst \
	hsh \
	VPAND   Y15, dst, dst \
	VPOR    Y9, dst, dst

// Q6X8CHUNK(k): parts X (codes Y12) and Y (Y13) rearranged into W1 (Y8)
// and W2 (Y9), the scale pairs into Y10, then the eight tokens.
#define Q6X8CHUNK(k) \
	VPSLLD    $16, Y13, Y8 \
	VPBLENDW  $0xAA, Y8, Y12, Y8 \
	VPSRLD    $16, Y12, Y12 \
	VPBLENDW  $0xAA, Y13, Y12, Y9 \
	VPSHUFB   ·gemmQ6PairShuf+(16*(k))(SB), X11, X10 \
	VPMOVSXBW X10, Y10 \
	Q6X8TOK(256+64*(k), 2304+32*(k), Y0) \
	Q6X8TOK(512+64*(k), 2432+32*(k), Y1) \
	Q6X8TOK(768+64*(k), 2560+32*(k), Y2) \
	Q6X8TOK(1024+64*(k), 2688+32*(k), Y3) \
	Q6X8TOK(1280+64*(k), 2816+32*(k), Y4) \
	Q6X8TOK(1536+64*(k), 2944+32*(k), Y5) \
	Q6X8TOK(1792+64*(k), 3072+32*(k), Y6) \
	Q6X8TOK(2048+64*(k), 3200+32*(k), Y7)

#define Q6LO4 VPSRLW $4, Y9, Y9
#define Q6SHL4 VPSLLW $4, Y12, Y12
#define Q6SHL2 VPSLLW $2, Y13, Y13
#define Q6NONE
#define Q6SHR2 VPSRLW $2, Y13, Y13

// Q6X8HALF(n): elements 128n..128n+127 (ql at 64n, qh at 128+32n): parts
// 4n, 4n+1 (chunk 2n), then 4n+2, 4n+3 (chunk 2n+1).
#define Q6X8HALF(n) \
	Q6X8CODE(64*n, Q6NONE, 128+32*n, Q6SHL4, Y12) \
	Q6X8CODE(64*n+32, Q6NONE, 128+32*n, Q6SHL2, Y13) \
	Q6X8CHUNK(2*n) \
	Q6X8CODE(64*n, Q6LO4, 128+32*n, Q6NONE, Y12) \
	Q6X8CODE(64*n+32, Q6LO4, 128+32*n, Q6SHR2, Y13) \
	Q6X8CHUNK(2*n+1)

// Q6X8OUT(t): y = hsum(facc_t) to (R12), next token.
#define Q6X8OUT(t) \
	VMOVUPS (32*t)(DX), Y8 \
	HSUMTO(Y8, X8, X9, X10) \
	VMOVSS  X9, (R12) \
	ADDQ    R15, R12

// func gemmQ6_KAVX2x8(w *byte, rb, rows, nb int, pk *byte, y *float32, ys int)
TEXT ·gemmQ6_KAVX2x8(SB), NOSPLIT, $256-56
	X8ENTER(256)
	MOVL         $0x30303030, AX
	VMOVD        AX, X15
	VPBROADCASTD X15, Y15

q6x8row:
	X8ROW

q6x8blk:
	VMOVDQU      192(SI), X11
	X8LANES0
	Q6X8HALF(0)
	Q6X8HALF(1)
	X8FINALL(208)
	ADDQ         $210, SI
	ADDQ         $3328, DI
	DECQ         CX
	JNZ          q6x8blk

	MOVQ R14, R12
	Q6X8OUT(0)
	Q6X8OUT(1)
	Q6X8OUT(2)
	Q6X8OUT(3)
	Q6X8OUT(4)
	Q6X8OUT(5)
	Q6X8OUT(6)
	Q6X8OUT(7)

	X8ROWEND
	JNZ        q6x8row
	VZEROUPPER
	RET

// Q8_0 against T = 8, 4 or 2 tokens: packed tile per block = T float32
// scales, then T × 32 quants (packQ8_0). Y8 = weights, Y9 = |weights|,
// Y12 = the block's scale in every lane (TOKSCALE), Y15 = 16 × int16(1);
// token t accumulates in Y(t): scale d_w·d_t (one product, the same bits
// in every lane) times the lanes' integer sums. Every
// token's lanes see the same instructions whatever T, so the 4- and
// 2-token kernels give the 8-token kernel's bits.
#define Q8TOKT(T, t, acc) \
	VMOVDQU      (4*T+32*t)(DI), Y10 \
	VPSIGNB      Y8, Y10, Y10 \
	VPMADDUBSW   Y10, Y9, Y10 \
	VPMADDWD     Y15, Y10, Y10 \
	VCVTDQ2PS    Y10, Y10 \
	VBROADCASTSS (4*t)(DI), Y11 \
	VMULPS       Y12, Y11, Y11 \
	VMULPS       Y11, Y10, Y10 \
	VADDPS       Y10, acc, acc

// TOKOUT(acc, xacc): token's sum to (R12), next token's output.
#define TOKOUT(acc, xacc) \
	HSUMTO(acc, xacc, X8, X9) \
	VMOVSS   X8, (R12) \
	ADDQ     R15, R12

// TOKSETUP loads the arguments and constants of the TOKX kernels.
#define TOKSETUP \
	MOVQ w+0(FP), R13 \
	MOVQ rows+16(FP), R8 \
	MOVQ y+40(FP), R14 \
	MOVQ ys+48(FP), R15 \
	MOVL         $0x00010001, AX \
	VMOVD        AX, X15 \
	VPBROADCASTD X15, Y15 \
	TOKCONST

// TOKROWSTART: the row's weights, the tile and the block count.
#define TOKROWSTART \
	MOVQ   R13, SI \
	MOVQ   pk+32(FP), DI \
	MOVQ   nb+24(FP), CX

// TOKROWEND: the next row.
#define TOKROWEND \
	ADDQ rb+8(FP), R13 \
	ADDQ $4, R14 \
	DECQ R8

// TOKX8 is the body of the 8-token AVX2 kernels of 32-element formats with
// signed codes: TOKCONST loads the format's constants, TOKHEAD unpacks one
// block of TOKBS bytes (f16 scale in X12, codes in Y8, |codes| in Y9), Q8TOKT
// accumulates each token (both defined before each TEXT). TOKX4 and TOKX2
// are the same for 4 and 2 tokens (the tails of a product).
#define TOKX8 \
	TOKSETUP \
row: \
	TOKROWSTART \
	TOKZERO4 \
	VXORPS Y4, Y4, Y4 \
	VXORPS Y5, Y5, Y5 \
	VXORPS Y6, Y6, Y6 \
	VXORPS Y7, Y7, Y7 \
blk: \
	TOKBLK4(8) \
	Q8TOKT(8, 4, Y4) \
	Q8TOKT(8, 5, Y5) \
	Q8TOKT(8, 6, Y6) \
	Q8TOKT(8, 7, Y7) \
	TOKBLKEND(288) \
	TOKOUT4 \
	TOKOUT(Y4, X4) \
	TOKOUT(Y5, X5) \
	TOKOUT(Y6, X6) \
	TOKOUT(Y7, X7) \
	TOKROWEND \
	JNZ  row \
	VZEROUPPER

#define TOKX4 \
	TOKSETUP \
row: \
	TOKROWSTART \
	TOKZERO4 \
blk: \
	TOKBLK4(4) \
	TOKBLKEND(144) \
	TOKOUT4 \
	TOKROWEND \
	JNZ  row \
	VZEROUPPER

#define TOKX2 \
	TOKSETUP \
row: \
	TOKROWSTART \
	VXORPS Y0, Y0, Y0 \
	VXORPS Y1, Y1, Y1 \
blk: \
	TOKHEAD \
	VBROADCASTSS X12, Y12 \
	Q8TOKT(2, 0, Y0) \
	Q8TOKT(2, 1, Y1) \
	TOKBLKEND(72) \
	TOKOUT(Y0, X0) \
	TOKOUT(Y1, X1) \
	TOKROWEND \
	JNZ  row \
	VZEROUPPER

// TOKZERO4 clears the first four tokens' accumulators.
#define TOKZERO4 \
	VXORPS Y0, Y0, Y0 \
	VXORPS Y1, Y1, Y1 \
	VXORPS Y2, Y2, Y2 \
	VXORPS Y3, Y3, Y3

// TOKBLK4(T): one block's head, then the first four of T tokens.
#define TOKBLK4(T) \
	TOKHEAD \
	VBROADCASTSS X12, Y12 \
	Q8TOKT(T, 0, Y0) \
	Q8TOKT(T, 1, Y1) \
	Q8TOKT(T, 2, Y2) \
	Q8TOKT(T, 3, Y3)

// TOKBLKEND(tb): the next block (tb = the tile's bytes per block), then
// the first output of the row.
#define TOKBLKEND(tb) \
	ADDQ $TOKBS, SI \
	ADDQ $tb, DI \
	DECQ CX \
	JNZ  blk \
	MOVQ R14, R12

// TOKOUT4 stores the first four tokens' sums.
#define TOKOUT4 \
	TOKOUT(Y0, X0) \
	TOKOUT(Y1, X1) \
	TOKOUT(Y2, X2) \
	TOKOUT(Y3, X3)

// Q8_0: the block's 32 int8 weights are the codes.
#define Q8AHEAD \
	MOVWLZX   (SI), AX \
	VMOVD     AX, X12 \
	VCVTPH2PS X12, X12 \
	VMOVDQU   2(SI), Y8 \
	VPABSB    Y8, Y9

#define TOKCONST
#define TOKHEAD Q8AHEAD
#define TOKBS 34

// func gemmQ8_0AVX2(w *byte, rb, rows, nb int, pk *byte, y *float32, ys int)
TEXT ·gemmQ8_0AVX2(SB), NOSPLIT, $0-56
	TOKX8
	RET

// func gemmQ8_0AVX2x4(w *byte, rb, rows, nb int, pk *byte, y *float32, ys int)
TEXT ·gemmQ8_0AVX2x4(SB), NOSPLIT, $0-56
	TOKX4
	RET

// func gemmQ8_0AVX2x2(w *byte, rb, rows, nb int, pk *byte, y *float32, ys int)
TEXT ·gemmQ8_0AVX2x2(SB), NOSPLIT, $0-56
	TOKX2
	RET

// Q5_0: codes (nibble | 16·bit) - 16 as in Q50BLOCK, made signed; Y13 =
// all ones, Y14 = 32 × 0x10, the other tables from memory.
#define Q5AHEAD \
	MOVWLZX        (SI), AX \
	VMOVD          AX, X12 \
	VCVTPH2PS      X12, X12 \
	VPBROADCASTD   2(SI), Y10 \
	VPSHUFB        ·q5Spread(SB), Y10, Y10 \
	VPOR           ·q5Bits(SB), Y10, Y10 \
	VPCMPEQB       Y13, Y10, Y10 \
	VPAND          Y14, Y10, Y10 \
	VBROADCASTI128 6(SI), Y8 \
	VPSRLVD        ·mxShift(SB), Y8, Y8 \
	VPAND          ·low4x32(SB), Y8, Y8 \
	VPOR           Y10, Y8, Y8 \
	VPSUBB         Y14, Y8, Y8 \
	VPABSB         Y8, Y9

#define Q5ACONST \
	VPCMPEQB     Y13, Y13, Y13 \
	MOVL         $0x10101010, AX \
	VMOVD        AX, X14 \
	VPBROADCASTD X14, Y14

#undef TOKCONST
#undef TOKHEAD
#undef TOKBS
#define TOKCONST Q5ACONST
#define TOKHEAD Q5AHEAD
#define TOKBS 22

// func gemmQ5_0AVX2(w *byte, rb, rows, nb int, pk *byte, y *float32, ys int)
TEXT ·gemmQ5_0AVX2(SB), NOSPLIT, $0-56
	TOKX8
	RET

// func gemmQ5_0AVX2x4(w *byte, rb, rows, nb int, pk *byte, y *float32, ys int)
TEXT ·gemmQ5_0AVX2x4(SB), NOSPLIT, $0-56
	TOKX4
	RET

// func gemmQ5_0AVX2x2(w *byte, rb, rows, nb int, pk *byte, y *float32, ys int)
TEXT ·gemmQ5_0AVX2x2(SB), NOSPLIT, $0-56
	TOKX2
	RET

// MXFP4: the low nibbles of the 16 bytes after the E8M0 scale are elements
// 0–15 (lanes 0–3), the high ones 16–31 (lanes 4–7); codes = the E2M1
// values (Y13, both halves) looked up by VPSHUFB; X12 = the E8M0 half-scale
// from its table (BX).
#define MXAHEAD \
	MOVBLZX        (SI), AX \
	VMOVSS         (BX)(AX*4), X12 \
	VBROADCASTI128 1(SI), Y8 \
	VPSRLVD        ·mxShift(SB), Y8, Y8 \
	VPAND          ·low4x32(SB), Y8, Y8 \
	VPSHUFB        Y8, Y13, Y8 \
	VPABSB         Y8, Y9

#define MXACONST \
	VBROADCASTI128 ·gemmMXKv(SB), Y13 \
	LEAQ           ·gemmE8M0(SB), BX

#undef TOKCONST
#undef TOKHEAD
#undef TOKBS
#define TOKCONST MXACONST
#define TOKHEAD MXAHEAD
#define TOKBS 17

// func gemmMXFP4AVX2(w *byte, rb, rows, nb int, pk *byte, y *float32, ys int)
TEXT ·gemmMXFP4AVX2(SB), NOSPLIT, $0-56
	TOKX8
	RET

// func gemmMXFP4AVX2x4(w *byte, rb, rows, nb int, pk *byte, y *float32, ys int)
TEXT ·gemmMXFP4AVX2x4(SB), NOSPLIT, $0-56
	TOKX4
	RET

// func gemmMXFP4AVX2x2(w *byte, rb, rows, nb int, pk *byte, y *float32, ys int)
TEXT ·gemmMXFP4AVX2x2(SB), NOSPLIT, $0-56
	TOKX2
	RET

// AVX-512 (F, BW) Q4_K against token pairs: a 512-bit register holds one
// 32-byte weight chunk twice and the matching quants of two tokens (packed
// side by side by packQ4_KPairs), so every integer instruction serves two
// tokens. Per 256-bit half the lanes and the float order are the vector
// kernel's; the horizontal sums run in both halves at once with the same
// pairings. Layout per block (T tokens, P = T/2 pairs, G = ceil(T/4)
// groups of four): DV: per pair 8 × d(t0) then 8 × d(t1); DM: per group
// 4 × d of each token; PS: per group, 8 int16 bsums pair sums per token;
// Q: per pair and chunk j, 64 bytes of low-nibble quants (32 per token)
// then 64 of high-nibble quants.

// Z4MIN(dm, ps, macc): four tokens' minimum lanes, macc += dmin·d_t ×
// float(madd(mins Z13, pair sums)); Z12 = broadcast f16 dmin.
#define Z4MIN(dm, ps, macc) \
	VPMADDWD  (ps)(DI), Z13, Z20 \
	VCVTDQ2PS Z20, Z20 \
	VMULPS    (dm)(DI), Z12, Z21 \
	VMULPS    Z21, Z20, Z20 \
	VADDPS    Z20, macc, macc

// Z4PAIR(q, acc): one pair's quants of a chunk (low at q, high at q+64).
#define Z4PAIR(q, acc) \
	VPMADDUBSW (q)(DI), Z9, Z20 \
	VPMADDWD   Z10, Z20, Z20 \
	VPADDD     Z20, acc, acc \
	VPMADDUBSW (q+64)(DI), Z8, Z21 \
	VPMADDWD   Z11, Z21, Z21 \
	VPADDD     Z21, acc, acc

// Z4UNPACK(j): chunk j's nibbles in both halves (Z9 low, Z8 high) and its
// two sub-block scales (Z10, Z11).
#define Z4UNPACK(j) \
	VBROADCASTI64X4 (16+32*j)(SI), Z8 \
	VPANDD          Z14, Z8, Z9 \
	VPSRLW          $4, Z8, Z8 \
	VPANDD          Z14, Z8, Z8 \
	VPSHUFB         ·gemmK4Shuf512+(128*j)(SB), Z15, Z10 \
	VPSHUFB         ·gemmK4Shuf512+(128*j+64)(SB), Z15, Z11

// Z4FIN(dv, facc, iacc): facc += float(iacc) * (d_w Z12 · d_t at dv).
#define Z4FIN(dv, facc, iacc) \
	VCVTDQ2PS iacc, iacc \
	VMULPS    (dv)(DI), Z12, Z20 \
	VMULPS    Z20, iacc, iacc \
	VADDPS    iacc, facc, facc

// Z4BLOCKHEAD: scales (Z15), mins (Z13) broadcast to every 128-bit lane,
// Z12 = f16 dmin.
#define Z4BLOCKHEAD \
	G4SCALES \
	VSHUFI32X4      $0, Z15, Z15, Z15 \
	VSHUFI32X4      $0, Z13, Z13, Z13 \
	MOVWLZX         2(SI), AX \
	VMOVD           AX, X12 \
	VCVTPH2PS       X12, X12 \
	VBROADCASTSS    X12, Z12

// Z4D: Z12 = f16 d of the block.
#define Z4D \
	MOVWLZX      (SI), AX \
	VMOVD        AX, X12 \
	VCVTPH2PS    X12, X12 \
	VBROADCASTSS X12, Z12

// Z4RED(facc): each 256-bit half's (r0+r2)+(r1+r3) into its element 0.
#define Z4RED(facc) \
	VSHUFF32X4 $0xB1, facc, facc, Z20 \
	VADDPS     Z20, facc, Z20 \
	VPERMILPS  $0x4E, Z20, Z21 \
	VADDPS     Z21, Z20, Z20 \
	VMOVSHDUP  Z20, Z21 \
	VADDPS     Z21, Z20, facc

// Z4MRED(macc): each 128-bit lane's (m0+m2)+(m1+m3) into its element 0.
#define Z4MRED(macc) \
	VPERMILPS $0x4E, macc, Z20 \
	VADDPS    Z20, macc, Z20 \
	VMOVSHDUP Z20, Z21 \
	VADDPS    Z21, Z20, macc

// Z4OUT(a, m): y = scratch[a] - scratch[m] to (R12), next token.
#define Z4OUT(a, m) \
	VMOVSS (a)(DX), X8 \
	VSUBSS (m)(DX), X8, X8 \
	VMOVSS X8, (R12) \
	ADDQ   R15, R12

// 8 tokens: DV 0, DM 256, PS 384, Q 512, 2560 bytes per block.
// func gemmQ4_KAVX512x8(w *byte, rb, rows, nb int, pk *byte, y *float32, ys int)
TEXT ·gemmQ4_KAVX512x8(SB), NOSPLIT, $384-56
	MOVQ w+0(FP), R13
	MOVQ rows+16(FP), R8
	MOVQ y+40(FP), R14
	MOVQ ys+48(FP), R15
	LEAQ scratch-384(SP), DX
	MOVL         $0x0F0F0F0F, AX
	VPBROADCASTD AX, Z14

z8row:
	MOVQ   R13, SI
	MOVQ   pk+32(FP), DI
	MOVQ   nb+24(FP), CX
	VPXORD Z0, Z0, Z0
	VPXORD Z1, Z1, Z1
	VPXORD Z2, Z2, Z2
	VPXORD Z3, Z3, Z3
	VPXORD Z4, Z4, Z4
	VPXORD Z5, Z5, Z5

z8blk:
	Z4BLOCKHEAD
	Z4MIN(256, 384, Z4)
	Z4MIN(320, 448, Z5)
	VPXORD Z16, Z16, Z16
	VPXORD Z17, Z17, Z17
	VPXORD Z18, Z18, Z18
	VPXORD Z19, Z19, Z19
	Z4UNPACK(0)
	Z4PAIR(512, Z16)
	Z4PAIR(1024, Z17)
	Z4PAIR(1536, Z18)
	Z4PAIR(2048, Z19)
	Z4UNPACK(1)
	Z4PAIR(640, Z16)
	Z4PAIR(1152, Z17)
	Z4PAIR(1664, Z18)
	Z4PAIR(2176, Z19)
	Z4UNPACK(2)
	Z4PAIR(768, Z16)
	Z4PAIR(1280, Z17)
	Z4PAIR(1792, Z18)
	Z4PAIR(2304, Z19)
	Z4UNPACK(3)
	Z4PAIR(896, Z16)
	Z4PAIR(1408, Z17)
	Z4PAIR(1920, Z18)
	Z4PAIR(2432, Z19)
	Z4D
	Z4FIN(0, Z0, Z16)
	Z4FIN(64, Z1, Z17)
	Z4FIN(128, Z2, Z18)
	Z4FIN(192, Z3, Z19)
	ADDQ $144, SI
	ADDQ $2560, DI
	DECQ CX
	JNZ  z8blk

	Z4RED(Z0)
	Z4RED(Z1)
	Z4RED(Z2)
	Z4RED(Z3)
	Z4MRED(Z4)
	Z4MRED(Z5)
	VMOVUPS Z0, 0(DX)
	VMOVUPS Z1, 64(DX)
	VMOVUPS Z2, 128(DX)
	VMOVUPS Z3, 192(DX)
	VMOVUPS Z4, 256(DX)
	VMOVUPS Z5, 320(DX)
	MOVQ    R14, R12
	Z4OUT(0, 256)
	Z4OUT(32, 272)
	Z4OUT(64, 288)
	Z4OUT(96, 304)
	Z4OUT(128, 320)
	Z4OUT(160, 336)
	Z4OUT(192, 352)
	Z4OUT(224, 368)

	ADDQ rb+8(FP), R13
	ADDQ $4, R14
	DECQ R8
	JNZ  z8row
	VZEROUPPER
	RET

// 2 tokens: DV 0, DM 64, PS 128, Q 192, 704 bytes per block.
// func gemmQ4_KAVX512x2(w *byte, rb, rows, nb int, pk *byte, y *float32, ys int)
TEXT ·gemmQ4_KAVX512x2(SB), NOSPLIT, $384-56
	MOVQ w+0(FP), R13
	MOVQ rows+16(FP), R8
	MOVQ y+40(FP), R14
	MOVQ ys+48(FP), R15
	LEAQ scratch-384(SP), DX
	MOVL         $0x0F0F0F0F, AX
	VPBROADCASTD AX, Z14

z2row:
	MOVQ   R13, SI
	MOVQ   pk+32(FP), DI
	MOVQ   nb+24(FP), CX
	VPXORD Z0, Z0, Z0
	VPXORD Z4, Z4, Z4

z2blk:
	Z4BLOCKHEAD
	Z4MIN(64, 128, Z4)
	VPXORD Z16, Z16, Z16
	Z4UNPACK(0)
	Z4PAIR(192, Z16)
	Z4UNPACK(1)
	Z4PAIR(320, Z16)
	Z4UNPACK(2)
	Z4PAIR(448, Z16)
	Z4UNPACK(3)
	Z4PAIR(576, Z16)
	Z4D
	Z4FIN(0, Z0, Z16)
	ADDQ $144, SI
	ADDQ $704, DI
	DECQ CX
	JNZ  z2blk

	Z4RED(Z0)
	Z4MRED(Z4)
	VMOVUPS Z0, 0(DX)
	VMOVUPS Z4, 256(DX)
	MOVQ    R14, R12
	Z4OUT(0, 256)
	Z4OUT(32, 272)

	ADDQ rb+8(FP), R13
	ADDQ $4, R14
	DECQ R8
	JNZ  z2row
	VZEROUPPER
	RET

// AVX-512 (F, BW) Q6_K against token pairs, like the Q4_K pair kernels:
// each part's codes (0..63, unsigned) are built once in both 256-bit
// halves; VPMADDUBSW against a pair's quants, minus the packed 32·(pair
// sums of the quants) (what the vector kernel's second VPMADDUBSW forms),
// times the scale pair, gives the vector kernel's exact lanes. Layout per
// block (P pairs): DV: per pair 8 × d(t0) then 8 × d(t1); then per pair
// 1024 bytes: per part c, 64 bytes of quants (32 per token) at 64c, and
// the 64 bytes of corrections at 512+64c.

// Z6C0..Z6C3(n): part codes of half n into Z9 (Z8 clobbered); Z13 = 0x30,
// Z14 = 0x0F bytes.
#define Z6C0(n) \
	VBROADCASTI64X4 (64*n)(SI), Z9 \
	VPANDD          Z14, Z9, Z9 \
	VBROADCASTI64X4 (128+32*n)(SI), Z8 \
	VPSLLW          $4, Z8, Z8 \
	VPANDD          Z13, Z8, Z8 \
	VPORD           Z8, Z9, Z9

#define Z6C1(n) \
	VBROADCASTI64X4 (64*n+32)(SI), Z9 \
	VPANDD          Z14, Z9, Z9 \
	VBROADCASTI64X4 (128+32*n)(SI), Z8 \
	VPSLLW          $2, Z8, Z8 \
	VPANDD          Z13, Z8, Z8 \
	VPORD           Z8, Z9, Z9

#define Z6C2(n) \
	VBROADCASTI64X4 (64*n)(SI), Z9 \
	VPSRLW          $4, Z9, Z9 \
	VPANDD          Z14, Z9, Z9 \
	VBROADCASTI64X4 (128+32*n)(SI), Z8 \
	VPANDD          Z13, Z8, Z8 \
	VPORD           Z8, Z9, Z9

#define Z6C3(n) \
	VBROADCASTI64X4 (64*n+32)(SI), Z9 \
	VPSRLW          $4, Z9, Z9 \
	VPANDD          Z14, Z9, Z9 \
	VBROADCASTI64X4 (128+32*n)(SI), Z8 \
	VPSRLW          $2, Z8, Z8 \
	VPANDD          Z13, Z8, Z8 \
	VPORD           Z8, Z9, Z9

// Z6SC(c): Z10 = scale pair c as 8 × lo, 8 × hi int16 in both halves.
#define Z6SC(c) \
	VPSHUFB    ·gemmQ6Shuf+(16*(c))(SB), X11, X10 \
	VPMOVSXBW  X10, Y10 \
	VSHUFI64X2 $0x44, Z10, Z10, Z10

// Z6P(yoff, acc): one pair's part.
#define Z6P(yoff, acc) \
	VPMADDUBSW (yoff)(DI), Z9, Z12 \
	VPSUBW     (yoff+512)(DI), Z12, Z12 \
	VPMADDWD   Z10, Z12, Z12 \
	VPADDD     Z12, acc, acc

// 8 tokens: pairs at 256, 1280, 2304, 3328; 4352 bytes per block.
#define Z6PART8(c) \
	Z6SC(c) \
	Z6P(256+64*(c), Z16) \
	Z6P(1280+64*(c), Z17) \
	Z6P(2304+64*(c), Z18) \
	Z6P(3328+64*(c), Z19)

#define Z6HALF8(n) \
	Z6C0(n) \
	Z6PART8(4*n) \
	Z6C1(n) \
	Z6PART8(4*n+1) \
	Z6C2(n) \
	Z6PART8(4*n+2) \
	Z6C3(n) \
	Z6PART8(4*n+3)

// 2 tokens: the pair at 64; 1088 bytes per block.
#define Z6PART2(c) \
	Z6SC(c) \
	Z6P(64+64*(c), Z16)

#define Z6HALF2(n) \
	Z6C0(n) \
	Z6PART2(4*n) \
	Z6C1(n) \
	Z6PART2(4*n+1) \
	Z6C2(n) \
	Z6PART2(4*n+2) \
	Z6C3(n) \
	Z6PART2(4*n+3)

// Z6CONST: Z13 = 0x30, Z14 = 0x0F bytes.
#define Z6CONST \
	MOVL         $0x0F0F0F0F, AX \
	VPBROADCASTD AX, Z14 \
	MOVL         $0x30303030, AX \
	VPBROADCASTD AX, Z13

// Z6D: Z12 = f16 d of the block (at 208).
#define Z6D \
	MOVWLZX      208(SI), AX \
	VMOVD        AX, X12 \
	VCVTPH2PS    X12, X12 \
	VBROADCASTSS X12, Z12

// Z6OUT(a): y = scratch[a] to (R12), next token.
#define Z6OUT(a) \
	VMOVSS (a)(DX), X8 \
	VMOVSS X8, (R12) \
	ADDQ   R15, R12

// func gemmQ6_KAVX512x8(w *byte, rb, rows, nb int, pk *byte, y *float32, ys int)
TEXT ·gemmQ6_KAVX512x8(SB), NOSPLIT, $384-56
	MOVQ w+0(FP), R13
	MOVQ rows+16(FP), R8
	MOVQ y+40(FP), R14
	MOVQ ys+48(FP), R15
	LEAQ scratch-384(SP), DX
	Z6CONST

z68row:
	MOVQ   R13, SI
	MOVQ   pk+32(FP), DI
	MOVQ   nb+24(FP), CX
	VPXORD Z0, Z0, Z0
	VPXORD Z1, Z1, Z1
	VPXORD Z2, Z2, Z2
	VPXORD Z3, Z3, Z3

z68blk:
	VMOVDQU 192(SI), X11
	VPXORD  Z16, Z16, Z16
	VPXORD  Z17, Z17, Z17
	VPXORD  Z18, Z18, Z18
	VPXORD  Z19, Z19, Z19
	Z6HALF8(0)
	Z6HALF8(1)
	Z6D
	Z4FIN(0, Z0, Z16)
	Z4FIN(64, Z1, Z17)
	Z4FIN(128, Z2, Z18)
	Z4FIN(192, Z3, Z19)
	ADDQ $210, SI
	ADDQ $4352, DI
	DECQ CX
	JNZ  z68blk

	Z4RED(Z0)
	Z4RED(Z1)
	Z4RED(Z2)
	Z4RED(Z3)
	VMOVUPS Z0, 0(DX)
	VMOVUPS Z1, 64(DX)
	VMOVUPS Z2, 128(DX)
	VMOVUPS Z3, 192(DX)
	MOVQ    R14, R12
	Z6OUT(0)
	Z6OUT(32)
	Z6OUT(64)
	Z6OUT(96)
	Z6OUT(128)
	Z6OUT(160)
	Z6OUT(192)
	Z6OUT(224)

	ADDQ rb+8(FP), R13
	ADDQ $4, R14
	DECQ R8
	JNZ  z68row
	VZEROUPPER
	RET

// func gemmQ6_KAVX512x2(w *byte, rb, rows, nb int, pk *byte, y *float32, ys int)
TEXT ·gemmQ6_KAVX512x2(SB), NOSPLIT, $384-56
	MOVQ w+0(FP), R13
	MOVQ rows+16(FP), R8
	MOVQ y+40(FP), R14
	MOVQ ys+48(FP), R15
	LEAQ scratch-384(SP), DX
	Z6CONST

z62row:
	MOVQ   R13, SI
	MOVQ   pk+32(FP), DI
	MOVQ   nb+24(FP), CX
	VPXORD Z0, Z0, Z0

z62blk:
	VMOVDQU 192(SI), X11
	VPXORD  Z16, Z16, Z16
	Z6HALF2(0)
	Z6HALF2(1)
	Z6D
	Z4FIN(0, Z0, Z16)
	ADDQ $210, SI
	ADDQ $1088, DI
	DECQ CX
	JNZ  z62blk

	Z4RED(Z0)
	VMOVUPS Z0, 0(DX)
	MOVQ    R14, R12
	Z6OUT(0)
	Z6OUT(32)

	ADDQ rb+8(FP), R13
	ADDQ $4, R14
	DECQ R8
	JNZ  z62row
	VZEROUPPER
	RET

// AVX-512 VNNI variants of the pair kernels: VPDPWSSD adds the
// scale-weighted pair sums straight into the int32 lanes (VPMADDWD +
// VPADDD in one instruction; the integer lanes are exactly the same).

#define Z4PAIRV(q, acc) \
	VPMADDUBSW (q)(DI), Z9, Z20 \
	VPDPWSSD   Z10, Z20, acc \
	VPMADDUBSW (q+64)(DI), Z8, Z21 \
	VPDPWSSD   Z11, Z21, acc

// func gemmQ4_KVNNIx8(w *byte, rb, rows, nb int, pk *byte, y *float32, ys int)
TEXT ·gemmQ4_KVNNIx8(SB), NOSPLIT, $384-56
	MOVQ w+0(FP), R13
	MOVQ rows+16(FP), R8
	MOVQ y+40(FP), R14
	MOVQ ys+48(FP), R15
	LEAQ scratch-384(SP), DX
	MOVL         $0x0F0F0F0F, AX
	VPBROADCASTD AX, Z14

v8row:
	MOVQ   R13, SI
	MOVQ   pk+32(FP), DI
	MOVQ   nb+24(FP), CX
	VPXORD Z0, Z0, Z0
	VPXORD Z1, Z1, Z1
	VPXORD Z2, Z2, Z2
	VPXORD Z3, Z3, Z3
	VPXORD Z4, Z4, Z4
	VPXORD Z5, Z5, Z5

v8blk:
	Z4BLOCKHEAD
	Z4MIN(256, 384, Z4)
	Z4MIN(320, 448, Z5)
	VPXORD Z16, Z16, Z16
	VPXORD Z17, Z17, Z17
	VPXORD Z18, Z18, Z18
	VPXORD Z19, Z19, Z19
	Z4UNPACK(0)
	Z4PAIRV(512, Z16)
	Z4PAIRV(1024, Z17)
	Z4PAIRV(1536, Z18)
	Z4PAIRV(2048, Z19)
	Z4UNPACK(1)
	Z4PAIRV(640, Z16)
	Z4PAIRV(1152, Z17)
	Z4PAIRV(1664, Z18)
	Z4PAIRV(2176, Z19)
	Z4UNPACK(2)
	Z4PAIRV(768, Z16)
	Z4PAIRV(1280, Z17)
	Z4PAIRV(1792, Z18)
	Z4PAIRV(2304, Z19)
	Z4UNPACK(3)
	Z4PAIRV(896, Z16)
	Z4PAIRV(1408, Z17)
	Z4PAIRV(1920, Z18)
	Z4PAIRV(2432, Z19)
	Z4D
	Z4FIN(0, Z0, Z16)
	Z4FIN(64, Z1, Z17)
	Z4FIN(128, Z2, Z18)
	Z4FIN(192, Z3, Z19)
	ADDQ $144, SI
	ADDQ $2560, DI
	DECQ CX
	JNZ  v8blk

	Z4RED(Z0)
	Z4RED(Z1)
	Z4RED(Z2)
	Z4RED(Z3)
	Z4MRED(Z4)
	Z4MRED(Z5)
	VMOVUPS Z0, 0(DX)
	VMOVUPS Z1, 64(DX)
	VMOVUPS Z2, 128(DX)
	VMOVUPS Z3, 192(DX)
	VMOVUPS Z4, 256(DX)
	VMOVUPS Z5, 320(DX)
	MOVQ    R14, R12
	Z4OUT(0, 256)
	Z4OUT(32, 272)
	Z4OUT(64, 288)
	Z4OUT(96, 304)
	Z4OUT(128, 320)
	Z4OUT(160, 336)
	Z4OUT(192, 352)
	Z4OUT(224, 368)

	ADDQ rb+8(FP), R13
	ADDQ $4, R14
	DECQ R8
	JNZ  v8row
	VZEROUPPER
	RET

// func gemmQ4_KVNNIx2(w *byte, rb, rows, nb int, pk *byte, y *float32, ys int)
TEXT ·gemmQ4_KVNNIx2(SB), NOSPLIT, $384-56
	MOVQ w+0(FP), R13
	MOVQ rows+16(FP), R8
	MOVQ y+40(FP), R14
	MOVQ ys+48(FP), R15
	LEAQ scratch-384(SP), DX
	MOVL         $0x0F0F0F0F, AX
	VPBROADCASTD AX, Z14

v2row:
	MOVQ   R13, SI
	MOVQ   pk+32(FP), DI
	MOVQ   nb+24(FP), CX
	VPXORD Z0, Z0, Z0
	VPXORD Z4, Z4, Z4

v2blk:
	Z4BLOCKHEAD
	Z4MIN(64, 128, Z4)
	VPXORD Z16, Z16, Z16
	Z4UNPACK(0)
	Z4PAIRV(192, Z16)
	Z4UNPACK(1)
	Z4PAIRV(320, Z16)
	Z4UNPACK(2)
	Z4PAIRV(448, Z16)
	Z4UNPACK(3)
	Z4PAIRV(576, Z16)
	Z4D
	Z4FIN(0, Z0, Z16)
	ADDQ $144, SI
	ADDQ $704, DI
	DECQ CX
	JNZ  v2blk

	Z4RED(Z0)
	Z4MRED(Z4)
	VMOVUPS Z0, 0(DX)
	VMOVUPS Z4, 256(DX)
	MOVQ    R14, R12
	Z4OUT(0, 256)
	Z4OUT(32, 272)

	ADDQ rb+8(FP), R13
	ADDQ $4, R14
	DECQ R8
	JNZ  v2row
	VZEROUPPER
	RET

// 4 tokens (two pairs, one group): DV 0, DM 128, PS 192, Q 256, 1280
// bytes per block.
// func gemmQ4_KVNNIx4(w *byte, rb, rows, nb int, pk *byte, y *float32, ys int)
TEXT ·gemmQ4_KVNNIx4(SB), NOSPLIT, $384-56
	MOVQ w+0(FP), R13
	MOVQ rows+16(FP), R8
	MOVQ y+40(FP), R14
	MOVQ ys+48(FP), R15
	LEAQ scratch-384(SP), DX
	MOVL         $0x0F0F0F0F, AX
	VPBROADCASTD AX, Z14

v4row:
	MOVQ   R13, SI
	MOVQ   pk+32(FP), DI
	MOVQ   nb+24(FP), CX
	VPXORD Z0, Z0, Z0
	VPXORD Z1, Z1, Z1
	VPXORD Z4, Z4, Z4

v4blk:
	Z4BLOCKHEAD
	Z4MIN(128, 192, Z4)
	VPXORD Z16, Z16, Z16
	VPXORD Z17, Z17, Z17
	Z4UNPACK(0)
	Z4PAIRV(256, Z16)
	Z4PAIRV(768, Z17)
	Z4UNPACK(1)
	Z4PAIRV(384, Z16)
	Z4PAIRV(896, Z17)
	Z4UNPACK(2)
	Z4PAIRV(512, Z16)
	Z4PAIRV(1024, Z17)
	Z4UNPACK(3)
	Z4PAIRV(640, Z16)
	Z4PAIRV(1152, Z17)
	Z4D
	Z4FIN(0, Z0, Z16)
	Z4FIN(64, Z1, Z17)
	ADDQ $144, SI
	ADDQ $1280, DI
	DECQ CX
	JNZ  v4blk

	Z4RED(Z0)
	Z4RED(Z1)
	Z4MRED(Z4)
	VMOVUPS Z0, 0(DX)
	VMOVUPS Z1, 64(DX)
	VMOVUPS Z4, 256(DX)
	MOVQ    R14, R12
	Z4OUT(0, 256)
	Z4OUT(32, 272)
	Z4OUT(64, 288)
	Z4OUT(96, 304)

	ADDQ rb+8(FP), R13
	ADDQ $4, R14
	DECQ R8
	JNZ  v4row
	VZEROUPPER
	RET

#define Z6PV(yoff, acc) \
	VPMADDUBSW (yoff)(DI), Z9, Z12 \
	VPSUBW     (yoff+512)(DI), Z12, Z12 \
	VPDPWSSD   Z10, Z12, acc

#define Z6PART8V(c) \
	Z6SC(c) \
	Z6PV(256+64*(c), Z16) \
	Z6PV(1280+64*(c), Z17) \
	Z6PV(2304+64*(c), Z18) \
	Z6PV(3328+64*(c), Z19)

#define Z6HALF8V(n) \
	Z6C0(n) \
	Z6PART8V(4*n) \
	Z6C1(n) \
	Z6PART8V(4*n+1) \
	Z6C2(n) \
	Z6PART8V(4*n+2) \
	Z6C3(n) \
	Z6PART8V(4*n+3)

#define Z6PART2V(c) \
	Z6SC(c) \
	Z6PV(64+64*(c), Z16)

#define Z6HALF2V(n) \
	Z6C0(n) \
	Z6PART2V(4*n) \
	Z6C1(n) \
	Z6PART2V(4*n+1) \
	Z6C2(n) \
	Z6PART2V(4*n+2) \
	Z6C3(n) \
	Z6PART2V(4*n+3)

// func gemmQ6_KVNNIx8(w *byte, rb, rows, nb int, pk *byte, y *float32, ys int)
TEXT ·gemmQ6_KVNNIx8(SB), NOSPLIT, $384-56
	MOVQ w+0(FP), R13
	MOVQ rows+16(FP), R8
	MOVQ y+40(FP), R14
	MOVQ ys+48(FP), R15
	LEAQ scratch-384(SP), DX
	Z6CONST

w68row:
	MOVQ   R13, SI
	MOVQ   pk+32(FP), DI
	MOVQ   nb+24(FP), CX
	VPXORD Z0, Z0, Z0
	VPXORD Z1, Z1, Z1
	VPXORD Z2, Z2, Z2
	VPXORD Z3, Z3, Z3

w68blk:
	VMOVDQU 192(SI), X11
	VPXORD  Z16, Z16, Z16
	VPXORD  Z17, Z17, Z17
	VPXORD  Z18, Z18, Z18
	VPXORD  Z19, Z19, Z19
	Z6HALF8V(0)
	Z6HALF8V(1)
	Z6D
	Z4FIN(0, Z0, Z16)
	Z4FIN(64, Z1, Z17)
	Z4FIN(128, Z2, Z18)
	Z4FIN(192, Z3, Z19)
	ADDQ $210, SI
	ADDQ $4352, DI
	DECQ CX
	JNZ  w68blk

	Z4RED(Z0)
	Z4RED(Z1)
	Z4RED(Z2)
	Z4RED(Z3)
	VMOVUPS Z0, 0(DX)
	VMOVUPS Z1, 64(DX)
	VMOVUPS Z2, 128(DX)
	VMOVUPS Z3, 192(DX)
	MOVQ    R14, R12
	Z6OUT(0)
	Z6OUT(32)
	Z6OUT(64)
	Z6OUT(96)
	Z6OUT(128)
	Z6OUT(160)
	Z6OUT(192)
	Z6OUT(224)

	ADDQ rb+8(FP), R13
	ADDQ $4, R14
	DECQ R8
	JNZ  w68row
	VZEROUPPER
	RET

// func gemmQ6_KVNNIx2(w *byte, rb, rows, nb int, pk *byte, y *float32, ys int)
TEXT ·gemmQ6_KVNNIx2(SB), NOSPLIT, $384-56
	MOVQ w+0(FP), R13
	MOVQ rows+16(FP), R8
	MOVQ y+40(FP), R14
	MOVQ ys+48(FP), R15
	LEAQ scratch-384(SP), DX
	Z6CONST

w62row:
	MOVQ   R13, SI
	MOVQ   pk+32(FP), DI
	MOVQ   nb+24(FP), CX
	VPXORD Z0, Z0, Z0

w62blk:
	VMOVDQU 192(SI), X11
	VPXORD  Z16, Z16, Z16
	Z6HALF2V(0)
	Z6HALF2V(1)
	Z6D
	Z4FIN(0, Z0, Z16)
	ADDQ $210, SI
	ADDQ $1088, DI
	DECQ CX
	JNZ  w62blk

	Z4RED(Z0)
	VMOVUPS Z0, 0(DX)
	MOVQ    R14, R12
	Z6OUT(0)
	Z6OUT(32)

	ADDQ rb+8(FP), R13
	ADDQ $4, R14
	DECQ R8
	JNZ  w62row
	VZEROUPPER
	RET

// 4 tokens: pairs at 128 and 1152; 2176 bytes per block.
#define Z6PART4V(c) \
	Z6SC(c) \
	Z6PV(128+64*(c), Z16) \
	Z6PV(1152+64*(c), Z17)

#define Z6HALF4V(n) \
	Z6C0(n) \
	Z6PART4V(4*n) \
	Z6C1(n) \
	Z6PART4V(4*n+1) \
	Z6C2(n) \
	Z6PART4V(4*n+2) \
	Z6C3(n) \
	Z6PART4V(4*n+3)

// func gemmQ6_KVNNIx4(w *byte, rb, rows, nb int, pk *byte, y *float32, ys int)
TEXT ·gemmQ6_KVNNIx4(SB), NOSPLIT, $384-56
	MOVQ w+0(FP), R13
	MOVQ rows+16(FP), R8
	MOVQ y+40(FP), R14
	MOVQ ys+48(FP), R15
	LEAQ scratch-384(SP), DX
	Z6CONST

w64row:
	MOVQ   R13, SI
	MOVQ   pk+32(FP), DI
	MOVQ   nb+24(FP), CX
	VPXORD Z0, Z0, Z0
	VPXORD Z1, Z1, Z1

w64blk:
	VMOVDQU 192(SI), X11
	VPXORD  Z16, Z16, Z16
	VPXORD  Z17, Z17, Z17
	Z6HALF4V(0)
	Z6HALF4V(1)
	Z6D
	Z4FIN(0, Z0, Z16)
	Z4FIN(64, Z1, Z17)
	ADDQ $210, SI
	ADDQ $2176, DI
	DECQ CX
	JNZ  w64blk

	Z4RED(Z0)
	Z4RED(Z1)
	VMOVUPS Z0, 0(DX)
	VMOVUPS Z1, 64(DX)
	MOVQ    R14, R12
	Z6OUT(0)
	Z6OUT(32)
	Z6OUT(64)
	Z6OUT(96)

	ADDQ rb+8(FP), R13
	ADDQ $4, R14
	DECQ R8
	JNZ  w64row
	VZEROUPPER
	RET

// AVX-512 (F, BW) MXFP4 against token pairs. Per 32-element block the
// codes are unpacked once into both 256-bit halves (element order) as
// signed values q; a pair's quants are negated where q < 0 (merge-masked
// VPSUBB) so VPMADDUBSW(|q|, ±y) + VPMADDWD(1) form the exact lanes of
// lanes32. The eight tokens' scales are multiplied by the block's E8M0
// half-scale at once and spread to each pair's halves with VPERMPS.
// Layout per block: 8 float32 activation scales (token t at 4t), then per
// pair 64 bytes of quants (32 per token).

// MXPAIR(yoff, acc, idx)
#define MXPAIR(yoff, acc, idx) \
	VMOVDQU64  (yoff)(DI), Z20 \
	VPSUBB     Z20, Z23, K1, Z20 \
	VPMADDUBSW Z20, Z8, Z20 \
	VPMADDWD   Z22, Z20, Z20 \
	VCVTDQ2PS  Z20, Z20 \
	VPERMPS    Z10, idx, Z21 \
	VMULPS     Z21, Z20, Z20 \
	VADDPS     Z20, acc, acc

// MXHEAD: block scale products into Y10, |q| into Z8, q < 0 into K1.
#define MXHEAD \
	MOVBLZX         (SI), AX \
	VBROADCASTSS    (R9)(AX*4), Z12 \
	VMULPS          (DI), Y12, Y10 \
	VBROADCASTI32X4 1(SI), Z8 \
	VPSRLVD         Z15, Z8, Z8 \
	VPANDD          Z14, Z8, Z8 \
	VPSHUFB         Z8, Z13, Z8 \
	VPMOVB2M        Z8, K1 \
	VPABSB          Z8, Z8

// MXCONST: Z13 signed code table, Z14 = 0x0F bytes, Z15 shift counts,
// Z16..Z19 pair indices, Z22 = int16 ones, Z23 = 0, R9 = E8M0 table.
#define MXCONST \
	VBROADCASTI32X4 ·gemmMXKv(SB), Z13 \
	MOVL            $0x0F0F0F0F, AX \
	VPBROADCASTD    AX, Z14 \
	VMOVDQU64       ·gemmMXShift(SB), Z15 \
	VMOVDQU64       ·gemmMXIdx(SB), Z16 \
	VMOVDQU64       ·gemmMXIdx+64(SB), Z17 \
	VMOVDQU64       ·gemmMXIdx+128(SB), Z18 \
	VMOVDQU64       ·gemmMXIdx+192(SB), Z19 \
	MOVL            $0x00010001, AX \
	VPBROADCASTD    AX, Z22 \
	VPXORD          Z23, Z23, Z23 \
	LEAQ            ·gemmE8M0(SB), R9

// The pair kernels' bodies, shared by the 32-element formats: PAIRCONST
// loads the constants, PAIRHEAD unpacks one block of PAIRBS bytes (its
// scale products into Y10, |q| into Z8, q < 0 into K1), MXPAIR accumulates
// each token pair; the three are defined before each format's TEXTs.

// PAIRX8: 8 tokens (4 pairs) per row.
#define PAIRX8 \
	MOVQ w+0(FP), R13 \
	MOVQ rows+16(FP), R8 \
	MOVQ y+40(FP), R14 \
	MOVQ ys+48(FP), R15 \
	LEAQ scratch-384(SP), DX \
	PAIRCONST \
row8: \
	MOVQ   R13, SI \
	MOVQ   pk+32(FP), DI \
	MOVQ   nb+24(FP), CX \
	VPXORD Z0, Z0, Z0 \
	VPXORD Z1, Z1, Z1 \
	VPXORD Z2, Z2, Z2 \
	VPXORD Z3, Z3, Z3 \
blk8: \
	PAIRHEAD \
	MXPAIR(32, Z0, Z16) \
	MXPAIR(96, Z1, Z17) \
	MXPAIR(160, Z2, Z18) \
	MXPAIR(224, Z3, Z19) \
	ADDQ $PAIRBS, SI \
	ADDQ $288, DI \
	DECQ CX \
	JNZ  blk8 \
	Z4RED(Z0) \
	Z4RED(Z1) \
	Z4RED(Z2) \
	Z4RED(Z3) \
	VMOVUPS Z0, 0(DX) \
	VMOVUPS Z1, 64(DX) \
	VMOVUPS Z2, 128(DX) \
	VMOVUPS Z3, 192(DX) \
	MOVQ    R14, R12 \
	Z6OUT(0) \
	Z6OUT(32) \
	Z6OUT(64) \
	Z6OUT(96) \
	Z6OUT(128) \
	Z6OUT(160) \
	Z6OUT(192) \
	Z6OUT(224) \
	ADDQ rb+8(FP), R13 \
	ADDQ $4, R14 \
	DECQ R8 \
	JNZ  row8 \
	VZEROUPPER

// PAIRX2: 2 tokens (one pair) per row.
#define PAIRX2 \
	MOVQ w+0(FP), R13 \
	MOVQ rows+16(FP), R8 \
	MOVQ y+40(FP), R14 \
	MOVQ ys+48(FP), R15 \
	LEAQ scratch-384(SP), DX \
	PAIRCONST \
row2: \
	MOVQ   R13, SI \
	MOVQ   pk+32(FP), DI \
	MOVQ   nb+24(FP), CX \
	VPXORD Z0, Z0, Z0 \
blk2: \
	PAIRHEAD \
	MXPAIR(32, Z0, Z16) \
	ADDQ $PAIRBS, SI \
	ADDQ $96, DI \
	DECQ CX \
	JNZ  blk2 \
	Z4RED(Z0) \
	VMOVUPS Z0, 0(DX) \
	MOVQ    R14, R12 \
	Z6OUT(0) \
	Z6OUT(32) \
	ADDQ rb+8(FP), R13 \
	ADDQ $4, R14 \
	DECQ R8 \
	JNZ  row2 \
	VZEROUPPER

#define PAIRCONST MXCONST
#define PAIRHEAD MXHEAD
#define PAIRBS 17

// func gemmMXFP4AVX512x8(w *byte, rb, rows, nb int, pk *byte, y *float32, ys int)
TEXT ·gemmMXFP4AVX512x8(SB), NOSPLIT, $384-56
	PAIRX8
	RET

// func gemmMXFP4AVX512x2(w *byte, rb, rows, nb int, pk *byte, y *float32, ys int)
TEXT ·gemmMXFP4AVX512x2(SB), NOSPLIT, $384-56
	PAIRX2
	RET

// AVX-512 (F, BW) Q8_0 against token pairs: the MXFP4 pair kernel with
// the block's 32 int8 weights as the codes (|w| up to 128 is exact as an
// unsigned VPMADDUBSW operand) and its f16 scale. Same packed layout.

// Q8HEAD: block scale products into Y10, |w| into Z8, w < 0 into K1.
#define Q8HEAD \
	MOVWLZX         (SI), AX \
	VMOVD           AX, X12 \
	VCVTPH2PS       X12, X12 \
	VBROADCASTSS    X12, Y12 \
	VMULPS          (DI), Y12, Y10 \
	VBROADCASTI64X4 2(SI), Z8 \
	VPMOVB2M        Z8, K1 \
	VPABSB          Z8, Z8

#undef PAIRCONST
#undef PAIRHEAD
#undef PAIRBS
#define PAIRCONST MXCONST
#define PAIRHEAD Q8HEAD
#define PAIRBS 34

// func gemmQ8_0AVX512x8(w *byte, rb, rows, nb int, pk *byte, y *float32, ys int)
TEXT ·gemmQ8_0AVX512x8(SB), NOSPLIT, $384-56
	PAIRX8
	RET

// func gemmQ8_0AVX512x2(w *byte, rb, rows, nb int, pk *byte, y *float32, ys int)
TEXT ·gemmQ8_0AVX512x2(SB), NOSPLIT, $384-56
	PAIRX2
	RET

// Two-token AVX2 kernels for Q4_K and Q6_K, the tile after the 4-token one
// (the last two tokens of a product, an expert's pair of tokens): the same
// per-token code on the packed layout of a 2-token tile.
#undef KBS
#undef KQS
#undef KSTRIDE
#define KBS 8
#define KQS 72
#define KSTRIDE 584

// G4CHUNK2(j): G4CHUNK for two tokens.
#define G4CHUNK2(j) \
	VMOVDQU (16+32*j)(SI), Y8 \
	VPAND   Y14, Y8, Y9 \
	VPSRLW  $4, Y8, Y8 \
	VPAND   Y14, Y8, Y8 \
	VPSHUFB ·gemmK4Shuf+(64*j)(SB), Y15, Y10 \
	VPSHUFB ·gemmK4Shuf+(64*j+32)(SB), Y15, Y11 \
	G4TOK(j, 0, Y4) \
	G4TOK(j, 1, Y5)

// G4OUT(acc, xacc, moff, dst): dst = hsum(acc) - hsum4(macc at moff(DX)).
#define G4OUT(acc, xacc, moff, dst) \
	HSUMTO(acc, xacc, X8, X9) \
	VMOVUPS moff(DX), X10 \
	HSUM4TO(X10, X11, X12) \
	VSUBSS  X11, X8, X8 \
	VMOVSS  X8, dst

// func gemmQ4_K2AVX2(w *byte, rb, rows, nb int, pk *byte, y *float32, ys int, macc *[16]float32)
TEXT ·gemmQ4_K2AVX2(SB), NOSPLIT, $0-64
	MOVQ         w+0(FP), R13
	MOVQ         rows+16(FP), R8
	MOVQ         y+40(FP), R14
	MOVQ         ys+48(FP), R15
	MOVQ         macc+56(FP), DX
	MOVL         $0x0F0F0F0F, AX
	VMOVD        AX, X14
	VPBROADCASTD X14, Y14

g42row:
	MOVQ    R13, SI
	MOVQ    pk+32(FP), DI
	MOVQ    nb+24(FP), CX
	VXORPS  Y0, Y0, Y0
	VXORPS  Y1, Y1, Y1
	VMOVUPS X0, 0(DX)
	VMOVUPS X0, 16(DX)

g42blk:
	G4SCALES
	MOVWLZX   2(SI), AX
	VMOVD     AX, X12
	VCVTPH2PS X12, X12
	G4MIN(0)
	G4MIN(1)
	VPXOR     Y4, Y4, Y4
	VPXOR     Y5, Y5, Y5
	G4CHUNK2(0)
	G4CHUNK2(1)
	G4CHUNK2(2)
	G4CHUNK2(3)
	MOVWLZX   (SI), AX
	VMOVD     AX, X12
	VCVTPH2PS X12, X12
	BLKFIN(0, Y0, Y4, X12)
	BLKFIN(1, Y1, Y5, X12)
	ADDQ      $144, SI
	ADDQ      $KSTRIDE, DI
	DECQ      CX
	JNZ       g42blk

	G4OUT(Y0, X0, 0, (R14))
	G4OUT(Y1, X1, 16, (R14)(R15*1))
	ADDQ rb+8(FP), R13
	ADDQ $4, R14
	DECQ R8
	JNZ  g42row
	VZEROUPPER
	RET

// G6PART2(e, c): G6PART for two tokens.
#define G6PART2(e, c) \
	VPSHUFB   ·gemmQ6Shuf+(16*(c))(SB), X11, X10 \
	VPMOVSXBW X10, Y10 \
	G6TOK(KQS+(e), Y4) \
	G6TOK(KQS+256+(e), Y5)

// G6HALF2(n): G6HALF for two tokens.
#define G6HALF2(n) \
	VMOVDQU (64*n)(SI), Y9 \
	VPAND   Y14, Y9, Y9 \
	VMOVDQU (128+32*n)(SI), Y8 \
	VPSLLW  $4, Y8, Y8 \
	G6CODES \
	G6PART2(128*n, 4*n) \
	VMOVDQU (64*n+32)(SI), Y9 \
	VPAND   Y14, Y9, Y9 \
	VMOVDQU (128+32*n)(SI), Y8 \
	VPSLLW  $2, Y8, Y8 \
	G6CODES \
	G6PART2(128*n+32, 4*n+1) \
	VMOVDQU (64*n)(SI), Y9 \
	VPSRLW  $4, Y9, Y9 \
	VPAND   Y14, Y9, Y9 \
	VMOVDQU (128+32*n)(SI), Y8 \
	G6CODES \
	G6PART2(128*n+64, 4*n+2) \
	VMOVDQU (64*n+32)(SI), Y9 \
	VPSRLW  $4, Y9, Y9 \
	VPAND   Y14, Y9, Y9 \
	VMOVDQU (128+32*n)(SI), Y8 \
	VPSRLW  $2, Y8, Y8 \
	G6CODES \
	G6PART2(128*n+96, 4*n+3)

// G6FIN(t, lanes, acc): acc += float(lanes) · (d_w X12 · d_t).
#define G6FIN(t, lanes, acc) \
	VCVTDQ2PS    lanes, lanes \
	VMULSS       (KD+4*t)(DI), X12, X8 \
	VBROADCASTSS X8, Y8 \
	VMULPS       Y8, lanes, lanes \
	VADDPS       lanes, acc, acc

// func gemmQ6_K2AVX2(w *byte, rb, rows, nb int, pk *byte, y *float32, ys int)
TEXT ·gemmQ6_K2AVX2(SB), NOSPLIT, $0-56
	MOVQ         w+0(FP), R13
	MOVQ         rows+16(FP), R8
	MOVQ         y+40(FP), R14
	MOVQ         ys+48(FP), R15
	MOVL         $0x0F0F0F0F, AX
	VMOVD        AX, X14
	VPBROADCASTD X14, Y14
	MOVL         $0x30303030, AX
	VMOVD        AX, X13
	VPBROADCASTD X13, Y13
	MOVL         $0x20202020, AX
	VMOVD        AX, X15
	VPBROADCASTD X15, Y15

g62row:
	MOVQ   R13, SI
	MOVQ   pk+32(FP), DI
	MOVQ   nb+24(FP), CX
	VXORPS Y0, Y0, Y0
	VXORPS Y1, Y1, Y1

g62blk:
	VMOVDQU   192(SI), X11
	VPXOR     Y4, Y4, Y4
	VPXOR     Y5, Y5, Y5
	G6HALF2(0)
	G6HALF2(1)
	MOVWLZX   208(SI), AX
	VMOVD     AX, X12
	VCVTPH2PS X12, X12
	G6FIN(0, Y4, Y0)
	G6FIN(1, Y5, Y1)
	ADDQ      $210, SI
	ADDQ      $KSTRIDE, DI
	DECQ      CX
	JNZ       g62blk

	HSUMTO(Y0, X0, X8, X9)
	VMOVSS X8, (R14)
	HSUMTO(Y1, X1, X8, X9)
	VMOVSS X8, (R14)(R15*1)
	ADDQ   rb+8(FP), R13
	ADDQ   $4, R14
	DECQ   R8
	JNZ    g62row
	VZEROUPPER
	RET
