//go:build amd64 && !purego

#include "textflag.h"
#include "dot_amd64.h"

// AVX2 dot products, hand-written. Every routine follows the reference's
// operation order (see the package doc): integer lanes per block, then
// acc = acc + float32(d*float32(lane)) with separate VMULPS/VADDPS (no FMA),
// then the fixed horizontal sum r[i]=a[i]+a[i+4]; (r0+r2)+(r1+r3).
// Float addition and multiplication are commutative in IEEE arithmetic, so
// operand order inside one instruction does not matter.

// PFDIST is how far ahead of the weight pointer the loops prefetch (bytes).
// Without software prefetch the hardware prefetcher fell behind on
// streamed rows (Q4_K: 5.8 -> 12.5 GB/s per CPU-second from RAM); a
// prefetch past the end of the matrix is harmless (no fault).
#define PFDIST 1024

// ones16: Y15 = 16 × int16(1)
#define ONES16 \
	MOVL         $0x00010001, AX \
	VMOVD        AX, X15         \
	VPBROADCASTD X15, Y15

// LOW4: Y14 = 32 × 0x0F
#define LOW4 \
	MOVL         $0x0F0F0F0F, AX \
	VMOVD        AX, X14         \
	VPBROADCASTD X14, Y14

// OFFSETDOT is the body of the dots of 32-element formats with unsigned
// codes and a per-lane offset from the activation's corr (MXFP4, Q4_0,
// Q5_0): OFFBLOCK(off, yoff, doff, coff) adds one block of OFFBS bytes to
// Y0 (four per iteration, then the rest one by one) after OFFCONST loads the
// format's constants (the three are defined before each TEXT); it ends with
// the sum in X0.
#define OFFSETDOT \
	MOVQ w+0(FP), SI \
	MOVQ qs+8(FP), DI \
	MOVQ d+16(FP), DX \
	MOVQ corr+24(FP), R9 \
	MOVQ nb+32(FP), CX \
	ONES16 \
	LOW4 \
	OFFCONST \
	VMOVDQU ·mxShift(SB), Y12 \
	VXORPS  Y0, Y0, Y0 \
	SHRQ    $2, CX \
	JZ      tail \
loop: \
	PREFETCHT0 PFDIST(SI) \
	PREFETCHT0 (PFDIST+64)(SI) \
	OFFBLOCK(0, 0, 0, 0) \
	OFFBLOCK((OFFBS), 32, 4, 32) \
	OFFBLOCK((2*OFFBS), 64, 8, 64) \
	OFFBLOCK((3*OFFBS), 96, 12, 96) \
	ADDQ $(4*OFFBS), SI \
	ADDQ $128, DI \
	ADDQ $16, DX \
	ADDQ $128, R9 \
	DECQ CX \
	JNZ  loop \
tail: \
	MOVQ nb+32(FP), CX \
	ANDQ $3, CX \
	JZ   done \
tailloop: \
	OFFBLOCK(0, 0, 0, 0) \
	ADDQ $OFFBS, SI \
	ADDQ $32, DI \
	ADDQ $4, DX \
	ADDQ $32, R9 \
	DECQ CX \
	JNZ  tailloop \
done: \
	HSUM8

// func dotQ8_0AVX2(w *byte, qs *int8, d *float32, nb int) float32
TEXT ·dotQ8_0AVX2(SB), NOSPLIT, $0-36
	MOVQ w+0(FP), SI
	MOVQ qs+8(FP), DI
	MOVQ d+16(FP), DX
	MOVQ nb+24(FP), CX
	ONES16
	VXORPS Y0, Y0, Y0

q80loop:
	PREFETCHT0   PFDIST(SI)
	MOVWLZX      (SI), AX
	VMOVD        AX, X1
	VCVTPH2PS    X1, X1
	VMULSS       (DX), X1, X1
	VBROADCASTSS X1, Y1
	VMOVDQU      2(SI), Y2
	VMOVDQU      (DI), Y3
	VPSIGNB      Y2, Y3, Y3
	VPABSB       Y2, Y2
	VPMADDUBSW   Y3, Y2, Y2
	VPMADDWD     Y15, Y2, Y2
	VCVTDQ2PS    Y2, Y2
	VMULPS       Y1, Y2, Y2
	VADDPS       Y2, Y0, Y0
	ADDQ         $34, SI
	ADDQ         $32, DI
	ADDQ         $4, DX
	DECQ         CX
	JNZ          q80loop

	HSUM8
	VMOVSS     X0, ret+32(FP)
	VZEROUPPER
	RET

// MXBLOCK(off, yoff, doff, coff): one MXFP4 block at off(SI) against 32
// quants at yoff(DI), activation scale doff(DX), correction lanes coff(R9);
// added to Y0. The 16 code bytes are broadcast to both halves and the upper
// half shifted right by 4 (VPSRLVD with Y12 = [0,0,0,0,4,4,4,4]), so after
// masking the register holds the 32 codes in element order. Y13 maps codes
// to kvalues+12 (unsigned), so VPMADDUBSW takes the activation directly and
// the lanes are corrected by 12·Σ4q (exact integers, same lanes).
#define MXBLOCK(off, yoff, doff, coff) \
	MOVBLZX        off(SI), AX        \
	VMOVSS         (R8)(AX*4), X1     \
	VMULSS         doff(DX), X1, X1   \
	VBROADCASTSS   X1, Y1             \
	VBROADCASTI128 (off+1)(SI), Y2    \
	VPSRLVD        Y12, Y2, Y2        \
	VPAND          Y14, Y2, Y2        \
	VPSHUFB        Y2, Y13, Y2        \
	VPMADDUBSW     yoff(DI), Y2, Y2   \
	VPMADDWD       Y15, Y2, Y2        \
	VPSUBD         coff(R9), Y2, Y2   \
	VCVTDQ2PS      Y2, Y2             \
	VMULPS         Y1, Y2, Y2         \
	VADDPS         Y2, Y0, Y0

#define OFFCONST \
	LEAQ           ·e8m0HalfTable(SB), R8 \
	VBROADCASTI128 ·kvaluesMXFP4u(SB), Y13
#define OFFBLOCK MXBLOCK
#define OFFBS 17

// func dotMXFP4AVX2(w *byte, qs *int8, d *float32, corr *int32, nb int) float32
TEXT ·dotMXFP4AVX2(SB), NOSPLIT, $0-44
	OFFSETDOT
	VMOVSS X0, ret+40(FP)
	VZEROUPPER
	RET

// K4SCALES unpacks the 12 scale bytes at 4(SI) of a Q4_K/Q5_K block:
// X3 = 8 scales as int16 (in both halves of Y3), X4 = 8 mins as int16.
// Clobbers AX, BX, R9, R10, R11.
#define K4SCALES \
	MOVL         4(SI), AX \
	MOVL         8(SI), BX \
	MOVL         12(SI), R9 \
	MOVL         R9, R10              \
	SHRL         $4, R10              \
	ANDL         $0x0f0f0f0f, R10     \
	MOVL         BX, R11              \
	SHRL         $6, R11              \
	ANDL         $0x03030303, R11     \
	SHLL         $4, R11              \
	ORL          R11, R10             \
	ANDL         $0x3f3f3f3f, BX      \
	ANDL         $0x0f0f0f0f, R9      \
	MOVL         AX, R11              \
	SHRL         $6, R11              \
	ANDL         $0x03030303, R11     \
	SHLL         $4, R11              \
	ORL          R11, R9              \
	ANDL         $0x3f3f3f3f, AX      \
	SHLQ         $32, R9              \
	ORQ          R9, AX               \
	VMOVQ        AX, X3               \
	VPMOVZXBW    X3, X3               \
	VINSERTI128  $1, X3, Y3, Y3       \
	SHLQ         $32, R10             \
	ORQ          R10, BX              \
	VMOVQ        BX, X4               \
	VPMOVZXBW    X4, X4

// Q4KCHUNK j: nibbles of 32 bytes at 16+32j(SI) against 64 quants at
// 64j(DI), scales for sub-blocks 2j, 2j+1; adds to Y10.
#define Q4KCHUNK(j) \
	VMOVDQU    (16+32*j)(SI), Y5          \
	VPAND      Y14, Y5, Y6                \
	VPSRLW     $4, Y5, Y7                 \
	VPAND      Y14, Y7, Y7                \
	VPMADDUBSW (64*j)(DI), Y6, Y6         \
	VPMADDUBSW (64*j+32)(DI), Y7, Y7      \
	VPSHUFB    ·k4Shuf+(64*j)(SB), Y3, Y8 \
	VPMADDWD   Y8, Y6, Y6                 \
	VPSHUFB    ·k4Shuf+(64*j+32)(SB), Y3, Y9 \
	VPMADDWD   Y9, Y7, Y7                 \
	VPADDD     Y6, Y10, Y10               \
	VPADDD     Y7, Y10, Y10

// func dotQ4_KAVX2(w *byte, qs *int8, d *float32, bsums *int16, nb int) float32
TEXT ·dotQ4_KAVX2(SB), NOSPLIT, $0-44
	MOVQ w+0(FP), SI
	MOVQ qs+8(FP), DI
	MOVQ d+16(FP), DX
	MOVQ bsums+24(FP), R12
	MOVQ nb+32(FP), CX
	LOW4
	VXORPS Y0, Y0, Y0
	VXORPS X12, X12, X12

q4kloop:
	PREFETCHT0 PFDIST(SI)
	PREFETCHT0 (PFDIST+64)(SI)
	PREFETCHT0 (PFDIST+128)(SI)
	DSCALE(0, Y1, X1)
	DSCALE(2, Y2, X2)
	K4SCALES
	K4MINS
	VPXOR    Y10, Y10, Y10
	Q4KCHUNK(0)
	Q4KCHUNK(1)
	Q4KCHUNK(2)
	Q4KCHUNK(3)
	VCVTDQ2PS Y10, Y10
	VMULPS    Y1, Y10, Y10
	VADDPS    Y10, Y0, Y0
	ADDQ      $144, SI
	ADDQ      $256, DI
	ADDQ      $4, DX
	ADDQ      $32, R12
	DECQ      CX
	JNZ       q4kloop

	HSUM8
	VMOVHLPS  X12, X12, X13
	VADDPS    X13, X12, X12
	VMOVSHDUP X12, X13
	VADDSS    X13, X12, X12
	VSUBSS    X12, X0, X0
	VMOVSS    X0, ret+40(FP)
	VZEROUPPER
	RET

// Q5KCHUNK j: like Q4KCHUNK with the 5th bit from qh (Y11) bits 2j, 2j+1;
// nibbles at 48+32j(SI). Y13 = 32 × 0x01.
#define Q5KCHUNK(j) \
	VMOVDQU    (48+32*j)(SI), Y5          \
	VPAND      Y14, Y5, Y6                \
	VPSRLW     $4, Y5, Y7                 \
	VPAND      Y14, Y7, Y7                \
	VPSRLW     $(2*j), Y11, Y8            \
	VPAND      Y13, Y8, Y8                \
	VPSLLW     $4, Y8, Y8                 \
	VPOR       Y8, Y6, Y6                 \
	VPSRLW     $(2*j+1), Y11, Y9          \
	VPAND      Y13, Y9, Y9                \
	VPSLLW     $4, Y9, Y9                 \
	VPOR       Y9, Y7, Y7                 \
	VPMADDUBSW (64*j)(DI), Y6, Y6         \
	VPMADDUBSW (64*j+32)(DI), Y7, Y7      \
	VPSHUFB    ·k4Shuf+(64*j)(SB), Y3, Y8 \
	VPMADDWD   Y8, Y6, Y6                 \
	VPSHUFB    ·k4Shuf+(64*j+32)(SB), Y3, Y9 \
	VPMADDWD   Y9, Y7, Y7                 \
	VPADDD     Y6, Y10, Y10               \
	VPADDD     Y7, Y10, Y10

// func dotQ5_KAVX2(w *byte, qs *int8, d *float32, bsums *int16, nb int) float32
TEXT ·dotQ5_KAVX2(SB), NOSPLIT, $0-44
	MOVQ w+0(FP), SI
	MOVQ qs+8(FP), DI
	MOVQ d+16(FP), DX
	MOVQ bsums+24(FP), R12
	MOVQ nb+32(FP), CX
	LOW4
	MOVL         $0x01010101, AX
	VMOVD        AX, X13
	VPBROADCASTD X13, Y13
	VXORPS       Y0, Y0, Y0
	VXORPS       X12, X12, X12

q5kloop:
	PREFETCHT0 PFDIST(SI)
	PREFETCHT0 (PFDIST+64)(SI)
	PREFETCHT0 (PFDIST+128)(SI)
	DSCALE(0, Y1, X1)
	DSCALE(2, Y2, X2)
	K4SCALES
	K4MINS
	VMOVDQU  16(SI), Y11
	VPXOR    Y10, Y10, Y10
	Q5KCHUNK(0)
	Q5KCHUNK(1)
	Q5KCHUNK(2)
	Q5KCHUNK(3)
	VCVTDQ2PS Y10, Y10
	VMULPS    Y1, Y10, Y10
	VADDPS    Y10, Y0, Y0
	ADDQ      $176, SI
	ADDQ      $256, DI
	ADDQ      $4, DX
	ADDQ      $32, R12
	DECQ      CX
	JNZ       q5kloop

	HSUM8
	VMOVHLPS  X12, X12, X13
	VADDPS    X13, X12, X12
	VMOVSHDUP X12, X13
	VADDSS    X13, X12, X12
	VSUBSS    X12, X0, X0
	VMOVSS    X0, ret+40(FP)
	VZEROUPPER
	RET

// Q6KPART(q, y, c): q (Y register, values 0..63) against 32 quants at y(DI),
// chunk c's scales; adds to Y10. Y12 = 32 × 32; X11 = the 16 int8 scales.
#define Q6KPART(q, yoff, c) \
	VMOVDQU    yoff(DI), Y8               \
	VPMADDUBSW Y8, q, q                   \
	VPMADDUBSW Y8, Y12, Y8                \
	VPSUBW     Y8, q, q                   \
	VPSHUFB    ·q6Shuf+(16*c)(SB), X11, X9 \
	VPMOVSXBW  X9, Y9                     \
	VPMADDWD   Y9, q, q                   \
	VPADDD     q, Y10, Y10

// Q6KHALF n: elements 128n..128n+127.
#define Q6KHALF(n) \
	VMOVDQU (64*n)(SI), Y4        \
	VMOVDQU (64*n+32)(SI), Y5     \
	VMOVDQU (128+32*n)(SI), Y6    \
	VPAND   Y14, Y4, Y1           \
	VPSLLW  $4, Y6, Y7            \
	VPAND   Y13, Y7, Y7           \
	VPOR    Y7, Y1, Y1 \
	VPAND   Y14, Y5, Y2           \
	VPSLLW  $2, Y6, Y7            \
	VPAND   Y13, Y7, Y7           \
	VPOR    Y7, Y2, Y2 \
	VPSRLW  $4, Y4, Y3            \
	VPAND   Y14, Y3, Y3           \
	VPAND   Y13, Y6, Y7           \
	VPOR    Y7, Y3, Y3 \
	VPSRLW  $4, Y5, Y4            \
	VPAND   Y14, Y4, Y4           \
	VPSRLW  $2, Y6, Y7            \
	VPAND   Y13, Y7, Y7           \
	VPOR    Y7, Y4, Y4 \
	Q6KPART(Y1, (128*n), (4*n))     \
	Q6KPART(Y2, (128*n+32), (4*n+1)) \
	Q6KPART(Y3, (128*n+64), (4*n+2)) \
	Q6KPART(Y4, (128*n+96), (4*n+3))

// func dotQ6_KAVX2(w *byte, qs *int8, d *float32, nb int) float32
TEXT ·dotQ6_KAVX2(SB), NOSPLIT, $0-36
	MOVQ w+0(FP), SI
	MOVQ qs+8(FP), DI
	MOVQ d+16(FP), DX
	MOVQ nb+24(FP), CX
	LOW4
	MOVL         $0x30303030, AX
	VMOVD        AX, X13
	VPBROADCASTD X13, Y13
	MOVL         $0x20202020, AX
	VMOVD        AX, X12
	VPBROADCASTD X12, Y12
	VXORPS       Y0, Y0, Y0

q6kloop:
	PREFETCHT0 PFDIST(SI)
	PREFETCHT0 (PFDIST+64)(SI)
	PREFETCHT0 (PFDIST+128)(SI)
	PREFETCHT0 (PFDIST+192)(SI)
	VMOVDQU  192(SI), X11
	VPXOR    Y10, Y10, Y10
	Q6KHALF(0)
	Q6KHALF(1)
	DSCALE(208, Y1, X1)
	VCVTDQ2PS Y10, Y10
	VMULPS    Y1, Y10, Y10
	VADDPS    Y10, Y0, Y0
	ADDQ      $210, SI
	ADDQ      $256, DI
	ADDQ      $4, DX
	DECQ      CX
	JNZ       q6kloop

	HSUM8
	VMOVSS     X0, ret+32(FP)
	VZEROUPPER
	RET

// COMBINE4: Y0 = (Y0+Y2) + (Y1+Y3)
#define COMBINE4 \
	VADDPS Y2, Y0, Y0 \
	VADDPS Y3, Y1, Y1 \
	VADDPS Y1, Y0, Y0

// func dotF32AVX2(w *byte, x *float32, n int) float32
TEXT ·dotF32AVX2(SB), NOSPLIT, $0-28
	MOVQ w+0(FP), SI
	MOVQ x+8(FP), DI
	MOVQ n+16(FP), CX
	VXORPS Y0, Y0, Y0
	VXORPS Y1, Y1, Y1
	VXORPS Y2, Y2, Y2
	VXORPS Y3, Y3, Y3
	VXORPS X5, X5, X5
	MOVQ   CX, BX
	SHRQ   $5, BX
	JZ     f32tail

f32loop:
	PREFETCHT0 PFDIST(SI)
	PREFETCHT0 (PFDIST+64)(SI)
	VMOVUPS (SI), Y4
	VMULPS  (DI), Y4, Y4
	VADDPS  Y4, Y0, Y0
	VMOVUPS 32(SI), Y4
	VMULPS  32(DI), Y4, Y4
	VADDPS  Y4, Y1, Y1
	VMOVUPS 64(SI), Y4
	VMULPS  64(DI), Y4, Y4
	VADDPS  Y4, Y2, Y2
	VMOVUPS 96(SI), Y4
	VMULPS  96(DI), Y4, Y4
	VADDPS  Y4, Y3, Y3
	ADDQ    $128, SI
	ADDQ    $128, DI
	DECQ    BX
	JNZ     f32loop

f32tail:
	ANDQ $31, CX
	JZ   f32done

f32tailloop:
	VMOVSS (SI), X4
	VMULSS (DI), X4, X4
	VADDSS X4, X5, X5
	ADDQ   $4, SI
	ADDQ   $4, DI
	DECQ   CX
	JNZ    f32tailloop

f32done:
	COMBINE4
	HSUM8
	VADDSS     X5, X0, X0
	VMOVSS     X0, ret+24(FP)
	VZEROUPPER
	RET

// func dotF16AVX2(w *byte, x *uint16, n int) float32
TEXT ·dotF16AVX2(SB), NOSPLIT, $0-28
	MOVQ w+0(FP), SI
	MOVQ x+8(FP), DI
	MOVQ n+16(FP), CX
	VXORPS Y0, Y0, Y0
	VXORPS Y1, Y1, Y1
	VXORPS Y2, Y2, Y2
	VXORPS Y3, Y3, Y3
	VXORPS X5, X5, X5
	MOVQ   CX, BX
	SHRQ   $5, BX
	JZ     f16tail

f16loop:
	PREFETCHT0 PFDIST(SI)
	VCVTPH2PS (SI), Y4
	VCVTPH2PS (DI), Y6
	VMULPS    Y6, Y4, Y4
	VADDPS    Y4, Y0, Y0
	VCVTPH2PS 16(SI), Y4
	VCVTPH2PS 16(DI), Y6
	VMULPS    Y6, Y4, Y4
	VADDPS    Y4, Y1, Y1
	VCVTPH2PS 32(SI), Y4
	VCVTPH2PS 32(DI), Y6
	VMULPS    Y6, Y4, Y4
	VADDPS    Y4, Y2, Y2
	VCVTPH2PS 48(SI), Y4
	VCVTPH2PS 48(DI), Y6
	VMULPS    Y6, Y4, Y4
	VADDPS    Y4, Y3, Y3
	ADDQ      $64, SI
	ADDQ      $64, DI
	DECQ      BX
	JNZ       f16loop

f16tail:
	ANDQ $31, CX
	JZ   f16done

f16tailloop:
	MOVWLZX   (SI), AX
	VMOVD     AX, X4
	VCVTPH2PS X4, X4
	MOVWLZX   (DI), AX
	VMOVD     AX, X6
	VCVTPH2PS X6, X6
	VMULSS    X6, X4, X4
	VADDSS    X4, X5, X5
	ADDQ      $2, SI
	ADDQ      $2, DI
	DECQ      CX
	JNZ       f16tailloop

f16done:
	COMBINE4
	HSUM8
	VADDSS     X5, X0, X0
	VMOVSS     X0, ret+24(FP)
	VZEROUPPER
	RET

// Q40BLOCK(off, yoff, doff, coff): one Q4_0 block (fp16 d, 16 code bytes)
// at off(SI); codes split like MXFP4; the raw nibbles (value+8) go to
// VPMADDUBSW unsigned and the lanes are corrected by 8·Σ4q (coff(R9)).
#define Q40BLOCK(off, yoff, doff, coff) \
	MOVWLZX        off(SI), AX        \
	VMOVD          AX, X1             \
	VCVTPH2PS      X1, X1             \
	VMULSS         doff(DX), X1, X1   \
	VBROADCASTSS   X1, Y1             \
	VBROADCASTI128 (off+2)(SI), Y2    \
	VPSRLVD        Y12, Y2, Y2        \
	VPAND          Y14, Y2, Y2        \
	VPMADDUBSW     yoff(DI), Y2, Y2   \
	VPMADDWD       Y15, Y2, Y2        \
	VPSUBD         coff(R9), Y2, Y2   \
	VCVTDQ2PS      Y2, Y2             \
	VMULPS         Y1, Y2, Y2         \
	VADDPS         Y2, Y0, Y0

#undef OFFCONST
#undef OFFBLOCK
#undef OFFBS
#define OFFCONST
#define OFFBLOCK Q40BLOCK
#define OFFBS 18

// func dotQ4_0AVX2(w *byte, qs *int8, d *float32, corr *int32, nb int) float32
TEXT ·dotQ4_0AVX2(SB), NOSPLIT, $0-44
	OFFSETDOT
	VMOVSS X0, ret+40(FP)
	VZEROUPPER
	RET

// Q50BLOCK: one Q5_0 block (22 bytes: fp16 d, 32 high bits qh, 16 bytes of
// nibble pairs) against a Q8_0 block. The 5-bit codes are formed unsigned
// (0..31): the nibbles as in Q40BLOCK, ORed with 16 where the code's bit of
// qh is set (qh broadcast, each byte spread over 8 lanes by q5Spread, ORed
// with q5Bits — every bit but the lane's own — and compared with all ones);
// the offset 16·Σq of each 4-lane group comes from corr. Lanes and float
// order are refDotQ5_0's.
// Uses Y9 = 32 × 0x10, Y10 = all ones, Y11 = q5Bits, Y13 = q5Spread.
#define Q50BLOCK(off, yoff, doff, coff) \
	MOVWLZX        off(SI), AX        \
	VMOVD          AX, X1             \
	VCVTPH2PS      X1, X1             \
	VMULSS         doff(DX), X1, X1   \
	VBROADCASTSS   X1, Y1             \
	VPBROADCASTD   (off+2)(SI), Y3    \
	VPSHUFB        Y13, Y3, Y3        \
	VPOR           Y11, Y3, Y3        \
	VPCMPEQB       Y10, Y3, Y3        \
	VPAND          Y9, Y3, Y3         \
	VBROADCASTI128 (off+6)(SI), Y2    \
	VPSRLVD        Y12, Y2, Y2        \
	VPAND          Y14, Y2, Y2        \
	VPOR           Y3, Y2, Y2         \
	VPMADDUBSW     yoff(DI), Y2, Y2   \
	VPMADDWD       Y15, Y2, Y2        \
	VPSUBD         coff(R9), Y2, Y2   \
	VCVTDQ2PS      Y2, Y2             \
	VMULPS         Y1, Y2, Y2         \
	VADDPS         Y2, Y0, Y0

#undef OFFCONST
#undef OFFBLOCK
#undef OFFBS
#define OFFCONST \
	MOVL         $0x10101010, AX \
	VMOVD        AX, X9 \
	VPBROADCASTD X9, Y9 \
	VPCMPEQB     Y10, Y10, Y10 \
	VMOVDQU      ·q5Bits(SB), Y11 \
	VMOVDQU      ·q5Spread(SB), Y13
#define OFFBLOCK Q50BLOCK
#define OFFBS 22

// func dotQ5_0AVX2(w *byte, qs *int8, d *float32, corr *int32, nb int) float32
TEXT ·dotQ5_0AVX2(SB), NOSPLIT, $0-44
	OFFSETDOT
	VMOVSS X0, ret+40(FP)
	VZEROUPPER
	RET

// Four-row dots: rows r0..r3 at SI, R11, R12, R13 (rb bytes apart) against
// one activation, each row in its own accumulator (Y0, Y5, Y6, Y7) with the
// single-row kernel's operations in its order, so each result is
// bit-identical to that row's single dot. The activation's quants, scale
// and correction lanes are loaded once per block for the four rows, and the
// four accumulation chains are independent: the single-row loop waits on
// one VADDPS chain per block.

// func dotMXFP4x4AVX2(w *byte, rb int, qs *int8, d *float32, corr *int32, nb int, y *float32)
TEXT ·dotMXFP4x4AVX2(SB), NOSPLIT, $0-56
	MOVQ w+0(FP), SI
	MOVQ rb+8(FP), AX
	ROWS4SETUP
	MOVQ qs+16(FP), DI
	MOVQ d+24(FP), DX
	MOVQ corr+32(FP), R9
	MOVQ nb+40(FP), CX
	MOVQ y+48(FP), BX
	ONES16
	LOW4
	LEAQ           ·e8m0HalfTable(SB), R8
	VBROADCASTI128 ·kvaluesMXFP4u(SB), Y13
	VMOVDQU        ·mxShift(SB), Y12
	VXORPS         Y0, Y0, Y0
	VXORPS         Y5, Y5, Y5
	VXORPS         Y6, Y6, Y6
	VXORPS         Y7, Y7, Y7

mx4loop:
	PREFETCHT0 (R10)
	PREFETCHT0 64(R10)
	ADDQ       $68, R10
	VMOVDQU (DI), Y3
	VMOVDQU (R9), Y4
	MXROW(SI, Y0)
	MXROW(R11, Y5)
	MXROW(R12, Y6)
	MXROW(R13, Y7)
	ADDQ $17, SI
	ADDQ $17, R11
	ADDQ $17, R12
	ADDQ $17, R13
	ADDQ $32, DI
	ADDQ $4, DX
	ADDQ $32, R9
	DECQ CX
	JNZ  mx4loop

	ROWS4STORE
	RET

// func dotQ5_0x4AVX2(w *byte, rb int, qs *int8, d *float32, corr *int32, nb int, y *float32)
TEXT ·dotQ5_0x4AVX2(SB), NOSPLIT, $0-56
	MOVQ w+0(FP), SI
	MOVQ rb+8(FP), AX
	ROWS4SETUP
	MOVQ qs+16(FP), DI
	MOVQ d+24(FP), DX
	MOVQ corr+32(FP), R9
	MOVQ nb+40(FP), CX
	MOVQ y+48(FP), BX
	ONES16
	LOW4
	MOVL         $0x10101010, AX
	VMOVD        AX, X9
	VPBROADCASTD X9, Y9
	VPCMPEQB     Y10, Y10, Y10
	VMOVDQU      ·q5Bits(SB), Y11
	VMOVDQU      ·q5Spread(SB), Y13
	VMOVDQU      ·mxShift(SB), Y12
	VXORPS       Y0, Y0, Y0
	VXORPS       Y5, Y5, Y5
	VXORPS       Y6, Y6, Y6
	VXORPS       Y7, Y7, Y7

q54loop:
	PREFETCHT0 (R10)
	PREFETCHT0 64(R10)
	ADDQ       $88, R10
	VMOVDQU (DI), Y3
	VMOVDQU (R9), Y4
	Q5ROW(SI, Y0)
	Q5ROW(R11, Y5)
	Q5ROW(R12, Y6)
	Q5ROW(R13, Y7)
	ADDQ $22, SI
	ADDQ $22, R11
	ADDQ $22, R12
	ADDQ $22, R13
	ADDQ $32, DI
	ADDQ $4, DX
	ADDQ $32, R9
	DECQ CX
	JNZ  q54loop

	ROWS4STORE
	RET

// func dotQ8_0x4AVX2(w *byte, rb int, qs *int8, d *float32, nb int, y *float32)
TEXT ·dotQ8_0x4AVX2(SB), NOSPLIT, $0-48
	MOVQ w+0(FP), SI
	MOVQ rb+8(FP), AX
	ROWS4SETUP
	MOVQ qs+16(FP), DI
	MOVQ d+24(FP), DX
	MOVQ nb+32(FP), CX
	MOVQ y+40(FP), BX
	ONES16
	VXORPS Y0, Y0, Y0
	VXORPS Y5, Y5, Y5
	VXORPS Y6, Y6, Y6
	VXORPS Y7, Y7, Y7

q84loop:
	PREFETCHT0 (R10)
	PREFETCHT0 64(R10)
	PREFETCHT0 128(R10)
	ADDQ       $136, R10
	VMOVDQU (DI), Y3
	Q8ROW(SI, Y0)
	Q8ROW(R11, Y5)
	Q8ROW(R12, Y6)
	Q8ROW(R13, Y7)
	ADDQ $34, SI
	ADDQ $34, R11
	ADDQ $34, R12
	ADDQ $34, R13
	ADDQ $32, DI
	ADDQ $4, DX
	DECQ CX
	JNZ  q84loop

	ROWS4STORE
	RET
