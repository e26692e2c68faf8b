//go:build amd64 && !purego

#include "textflag.h"
#include "dot_amd64.h"

// AVX-512 (F/BW/VL) + VNNI single-vector dots for Q4_K and Q6_K: one 512-bit
// register carries two 32-element sub-blocks (or Q6_K parts) side by side,
// VPDPWSSD folds the sub-block scale multiply and the add, and the two
// 256-bit halves are added at the end of each block. The per-block integer
// lanes are the AVX2 kernels' (exact integer sums, so the order of the
// additions does not matter) and the float32 steps are theirs, so results
// are bit-identical to the reference. After them, the four-row Q8_0 and
// MXFP4 kernels and Q5_0 (two blocks per 512-bit register, VPDPBUSD; see
// there).

#define PFDIST512 1024

// K4SCALES512 unpacks the 12 scale bytes at 4(SI) of a Q4_K block in
// vector registers (the scalar K4SCALES of dot_amd64.s, byte for byte):
// scale i<4 = b[i]&63, i>=4 = (b[i+4]&15) | (b[i-4]>>6)<<4; min i<4 =
// b[i+4]&63, i>=4 = (b[i+4]>>4) | (b[i]>>6)<<4. X3 = the 8 scales as
// int16, broadcast to every 128-bit lane of Z3; X4 = the 8 mins as int16.
#define K4SCALES512 \
	VMOVDQU      4(SI), X5 \
	VPSHUFB      ·k4ScaleLo(SB), X5, X6 \
	VPSRLW       $4, X6, X7 \
	VPAND        ·k4MaskA(SB), X6, X6 \
	VPAND        ·k4MaskB(SB), X7, X7 \
	VPOR         X7, X6, X6 \
	VPSHUFB      ·k4ScaleHi(SB), X5, X7 \
	VPAND        ·k4MaskC0(SB), X7, X7 \
	VPSRLW       $2, X7, X7 \
	VPOR         X7, X6, X6 \
	VPMOVZXBW    X6, Y6 \
	VEXTRACTI128 $1, Y6, X4 \
	VSHUFI32X4   $0, Z6, Z6, Z3

// DM512: Y1 = broadcast(f16 d at 0(SI) * (DX)), X2 = broadcast(f16 dmin
// at 2(SI) * (DX)): DSCALE twice, one conversion and multiply for both.
#define DM512 \
	VMOVD        (SI), X1 \
	VCVTPH2PS    X1, X1 \
	VBROADCASTSS (DX), X2 \
	VMULPS       X2, X1, X1 \
	VMOVSHDUP    X1, X2 \
	VBROADCASTSS X2, X2 \
	VBROADCASTSS X1, Y1

// Q4KPAIR512 j: the 32 bytes of nibbles at 16+32j(SI) in both halves of Z5,
// the high half shifted down 4 (Z13 counts): sub-block 2j (low nibbles)
// against the quants at 64j(DI), sub-block 2j+1 (high) against 64j+32;
// each half times its scale (Z3 shuffled by k4Shuf512d[j]) into Z10.
#define Q4KPAIR512(j) \
	VBROADCASTI64X4 (16+32*j)(SI), Z5 \
	VPSRLVW    Z13, Z5, Z5 \
	VPANDQ     Z14, Z5, Z5 \
	VPMADDUBSW (64*j)(DI), Z5, Z6 \
	VPSHUFB    ·k4Shuf512d+(64*j)(SB), Z3, Z8 \
	VPDPWSSD   Z8, Z6, Z10

// func dotQ4_KVNNI512(w *byte, qs *int8, d *float32, bsums *int16, nb int) float32
TEXT ·dotQ4_KVNNI512(SB), NOSPLIT, $0-44
	MOVQ w+0(FP), SI
	MOVQ qs+8(FP), DI
	MOVQ d+16(FP), DX
	MOVQ bsums+24(FP), R12
	MOVQ nb+32(FP), CX
	MOVL         $0x0F0F0F0F, AX
	VPBROADCASTD AX, Z14
	VMOVDQU64    ·q4kShiftW(SB), Z13
	VXORPS Y0, Y0, Y0
	VXORPS X12, X12, X12

q4k512loop:
	PREFETCHT0 PFDIST512(SI)
	PREFETCHT0 (PFDIST512+64)(SI)
	PREFETCHT0 (PFDIST512+128)(SI)
	DM512
	K4SCALES512
	K4MINS
	VPXORQ     Z10, Z10, Z10
	Q4KPAIR512(0)
	Q4KPAIR512(1)
	Q4KPAIR512(2)
	Q4KPAIR512(3)
	VEXTRACTI64X4 $1, Z10, Y11
	VPADDD    Y11, Y10, Y10
	VCVTDQ2PS Y10, Y10
	VMULPS    Y1, Y10, Y10
	VADDPS    Y10, Y0, Y0
	ADDQ      $144, SI
	ADDQ      $256, DI
	ADDQ      $4, DX
	ADDQ      $32, R12
	DECQ      CX
	JNZ       q4k512loop

	HSUM8
	VMOVHLPS  X12, X12, X13
	VADDPS    X13, X12, X12
	VMOVSHDUP X12, X13
	VADDSS    X13, X12, X12
	VSUBSS    X12, X0, X0
	VMOVSS    X0, ret+40(FP)
	VZEROUPPER
	RET

// Q4KROW512(R, accF, accM): one Q4_K block of the row at R against the
// activation block held in registers (Z16-Z19 quants, X0 bsum pair sums,
// X21 its scale broadcast, Z22-Z25 the k4Shuf512d controls): the
// operations of one dotQ4_KVNNI512 iteration (DM512, K4SCALES512, K4MINS,
// Q4KPAIR512 0-3), with accF and accM as that kernel's Y0 and X12.
#define Q4KROW512(R, accF, accM) \
	VMOVD        (R), X1 \
	VCVTPH2PS    X1, X1 \
	VMULPS       X21, X1, X1 \
	VMOVSHDUP    X1, X2 \
	VBROADCASTSS X2, X2 \
	VBROADCASTSS X1, Y1 \
	VMOVDQU      4(R), X5 \
	VPSHUFB      ·k4ScaleLo(SB), X5, X6 \
	VPSRLW       $4, X6, X7 \
	VPAND        ·k4MaskA(SB), X6, X6 \
	VPAND        ·k4MaskB(SB), X7, X7 \
	VPOR         X7, X6, X6 \
	VPSHUFB      ·k4ScaleHi(SB), X5, X7 \
	VPAND        ·k4MaskC0(SB), X7, X7 \
	VPSRLW       $2, X7, X7 \
	VPOR         X7, X6, X6 \
	VPMOVZXBW    X6, Y6 \
	VEXTRACTI128 $1, Y6, X4 \
	VSHUFI32X4   $0, Z6, Z6, Z3 \
	VPMADDWD     X0, X4, X4 \
	VCVTDQ2PS    X4, X4 \
	VMULPS       X2, X4, X4 \
	VADDPS       X4, accM, accM \
	VBROADCASTI64X4 16(R), Z5 \
	VPSRLVW    Z13, Z5, Z5 \
	VPANDQ     Z14, Z5, Z5 \
	VPMADDUBSW Z16, Z5, Z6 \
	VPSHUFB    Z22, Z3, Z8 \
	VPXORQ     Z10, Z10, Z10 \
	VPDPWSSD   Z8, Z6, Z10 \
	VBROADCASTI64X4 48(R), Z5 \
	VPSRLVW    Z13, Z5, Z5 \
	VPANDQ     Z14, Z5, Z5 \
	VPMADDUBSW Z17, Z5, Z6 \
	VPSHUFB    Z23, Z3, Z8 \
	VPDPWSSD   Z8, Z6, Z10 \
	VBROADCASTI64X4 80(R), Z5 \
	VPSRLVW    Z13, Z5, Z5 \
	VPANDQ     Z14, Z5, Z5 \
	VPMADDUBSW Z18, Z5, Z6 \
	VPSHUFB    Z24, Z3, Z8 \
	VPDPWSSD   Z8, Z6, Z10 \
	VBROADCASTI64X4 112(R), Z5 \
	VPSRLVW    Z13, Z5, Z5 \
	VPANDQ     Z14, Z5, Z5 \
	VPMADDUBSW Z19, Z5, Z6 \
	VPSHUFB    Z25, Z3, Z8 \
	VPDPWSSD   Z8, Z6, Z10 \
	VEXTRACTI64X4 $1, Z10, Y11 \
	VPADDD    Y11, Y10, Y10 \
	VCVTDQ2PS Y10, Y10 \
	VMULPS    Y1, Y10, Y10 \
	VADDPS    Y10, accF, accF

// Q4KSTORE512(accF, accM, off): off(BX) = hsum(accF) − hsum(accM), the
// end of dotQ4_KVNNI512 (clobbers X0, X1, X13).
#define Q4KSTORE512(accF, accM, off) \
	VMOVAPS   accF, Y0 \
	HSUM8 \
	VMOVHLPS  accM, accM, X13 \
	VADDPS    X13, accM, accM \
	VMOVSHDUP accM, X13 \
	VADDSS    X13, accM, accM \
	VSUBSS    accM, X0, X0 \
	VMOVSS    X0, off(BX)

// dotQ4_Kx4VNNI512: dotQ4_KVNNI512 on four rows rb bytes apart (y[0..3]),
// each row with its own accumulators and that kernel's operations in its
// order (bit-identical per row); the activation block's quants, bsum pair
// sums and scale are loaded once per block for the four rows. Prefetches
// the next four rows in address order (ROWS4SETUP's scheme).
//
// func dotQ4_Kx4VNNI512(w *byte, rb int, qs *int8, d *float32, bsums *int16, nb int, y *float32)
TEXT ·dotQ4_Kx4VNNI512(SB), NOSPLIT, $0-56
	MOVQ w+0(FP), SI
	MOVQ rb+8(FP), AX
	LEAQ (SI)(AX*1), R8
	LEAQ (R8)(AX*1), R9
	LEAQ (R9)(AX*1), R11
	LEAQ (R11)(AX*1), R10
	MOVQ qs+16(FP), DI
	MOVQ d+24(FP), DX
	MOVQ bsums+32(FP), R12
	MOVQ nb+40(FP), CX
	MOVQ y+48(FP), BX
	MOVL         $0x0F0F0F0F, AX
	VPBROADCASTD AX, Z14
	VMOVDQU64    ·q4kShiftW(SB), Z13
	VMOVDQU64    ·k4Shuf512d+0(SB), Z22
	VMOVDQU64    ·k4Shuf512d+64(SB), Z23
	VMOVDQU64    ·k4Shuf512d+128(SB), Z24
	VMOVDQU64    ·k4Shuf512d+192(SB), Z25
	VPXORD Y26, Y26, Y26
	VPXORD Y27, Y27, Y27
	VPXORD Y28, Y28, Y28
	VPXORD Y29, Y29, Y29
	VXORPS X9, X9, X9
	VXORPS X12, X12, X12
	VXORPS X15, X15, X15
	VPXORD X30, X30, X30

q4k512x4loop:
	PREFETCHT0 (R10)
	PREFETCHT0 64(R10)
	PREFETCHT0 128(R10)
	PREFETCHT0 192(R10)
	PREFETCHT0 256(R10)
	PREFETCHT0 320(R10)
	PREFETCHT0 384(R10)
	PREFETCHT0 448(R10)
	PREFETCHT0 512(R10)
	ADDQ $576, R10
	VMOVDQU64    (DI), Z16
	VMOVDQU64    64(DI), Z17
	VMOVDQU64    128(DI), Z18
	VMOVDQU64    192(DI), Z19
	VMOVDQU      (R12), X5
	VMOVDQU      16(R12), X6
	VPHADDW      X6, X5, X0
	VBROADCASTSS (DX), X21
	Q4KROW512(SI, Y26, X9)
	Q4KROW512(R8, Y27, X12)
	Q4KROW512(R9, Y28, X15)
	Q4KROW512(R11, Y29, X30)
	ADDQ $144, SI
	ADDQ $144, R8
	ADDQ $144, R9
	ADDQ $144, R11
	ADDQ $256, DI
	ADDQ $4, DX
	ADDQ $32, R12
	DECQ CX
	JNZ  q4k512x4loop

	Q4KSTORE512(Y26, X9, 0)
	Q4KSTORE512(Y27, X12, 4)
	Q4KSTORE512(Y28, X15, 8)
	Q4KSTORE512(Y29, X30, 12)
	VZEROUPPER
	RET

// Q6KPAIR512(q, yoff, idx): q (Z register, values 0..63: two parts) against
// the 64 quants at yoff(DI); the 4 scales of the two parts are words of Z11
// picked by the VPERMW index idx; adds to Z10. Z12 = 64 × 32.
#define Q6KPAIR512(q, yoff, idx) \
	VMOVDQU64  yoff(DI), Z8 \
	VPMADDUBSW Z8, q, q \
	VPMADDUBSW Z8, Z12, Z8 \
	VPSUBW     Z8, q, q \
	VPERMW     Z11, idx, Z9 \
	VPDPWSSD   Z9, q, Z10

// Q6KHALF512 n: elements 128n..128n+127. Z1 = parts 4n, 4n+1 (low nibbles
// of the 64 bytes at 64n with the high bits of 128+32n shifted up 4 and
// 2), Z2 = parts 4n+2, 4n+3 (high nibbles, high bits shifted 0 and down 2).
#define Q6KHALF512(n, idxa, idxb) \
	VMOVDQU64       (64*n)(SI), Z4 \
	VBROADCASTI64X4 (128+32*n)(SI), Z6 \
	VPANDQ  Z14, Z4, Z1 \
	VPSLLVW Z15, Z6, Z7 \
	VPANDQ  Z13, Z7, Z7 \
	VPORQ   Z7, Z1, Z1 \
	VPSRLW  $4, Z4, Z2 \
	VPANDQ  Z14, Z2, Z2 \
	VPSRLVW Z16, Z6, Z7 \
	VPANDQ  Z13, Z7, Z7 \
	VPORQ   Z7, Z2, Z2 \
	Q6KPAIR512(Z1, (128*n), idxa) \
	Q6KPAIR512(Z2, (128*n+64), idxb)

// func dotQ6_KVNNI512(w *byte, qs *int8, d *float32, nb int) float32
TEXT ·dotQ6_KVNNI512(SB), NOSPLIT, $0-36
	MOVQ w+0(FP), SI
	MOVQ qs+8(FP), DI
	MOVQ d+16(FP), DX
	MOVQ nb+24(FP), CX
	MOVL         $0x0F0F0F0F, AX
	VPBROADCASTD AX, Z14
	MOVL         $0x30303030, AX
	VPBROADCASTD AX, Z13
	MOVL         $0x20202020, AX
	VPBROADCASTD AX, Z12
	VMOVDQU64    ·q6kShiftL(SB), Z15
	VMOVDQU64    ·q6kShiftR(SB), Z16
	VMOVDQU64    ·q6kPerm+0(SB), Z17
	VMOVDQU64    ·q6kPerm+64(SB), Z18
	VMOVDQU64    ·q6kPerm+128(SB), Z19
	VMOVDQU64    ·q6kPerm+192(SB), Z20
	VXORPS       Y0, Y0, Y0

q6k512loop:
	PREFETCHT0 PFDIST512(SI)
	PREFETCHT0 (PFDIST512+64)(SI)
	PREFETCHT0 (PFDIST512+128)(SI)
	PREFETCHT0 (PFDIST512+192)(SI)
	VPMOVSXBW  192(SI), Y11
	VPXORQ     Z10, Z10, Z10
	Q6KHALF512(0, Z17, Z18)
	Q6KHALF512(1, Z19, Z20)
	DSCALE(208, Y1, X1)
	VEXTRACTI64X4 $1, Z10, Y11
	VPADDD    Y11, Y10, Y10
	VCVTDQ2PS Y10, Y10
	VMULPS    Y1, Y10, Y10
	VADDPS    Y10, Y0, Y0
	ADDQ      $210, SI
	ADDQ      $256, DI
	ADDQ      $4, DX
	DECQ      CX
	JNZ       q6k512loop

	HSUM8
	VMOVSS       X0, ret+32(FP)
	VZEROUPPER
	RET

// Four-row MXFP4 dots (AVX-512 F/BW/VL + VNNI + VBMI): rows at SI, R11,
// R12, R13, each in its own accumulator (Y0, Y5, Y6, Y7), two blocks per
// 512-bit register. Per row and pair of blocks: one masked load of the 34
// bytes, VPERMB spreading block b's 16 code bytes into 128-bit lanes 0-1
// and block b+1's into lanes 2-3 (the odd lanes shifted down 4: high
// nibbles), the kvalues+12 lookup (VPERMB on a 64-byte table, so the
// bits above the nibble need no mask), VPDPBUSD of the codes against the 64
// activation quants into the negated correction lanes (the exact integer
// lanes of MXBLOCK), then the block scales: VPERMB puts exponent e of each
// block in the dwords of its half, and VSCALEFPS makes d·2^(e-128), the
// correctly rounded product the reference's d·e8m0Half(e) also is. The
// low half (block b) and then the high half (block b+1) are added to the
// row's accumulator: MXBLOCK's float steps in its order. An odd last block
// goes through MXROW.

// MX512ROW(R, acc): blocks b and b+1 of the row at R (see below) added to
// acc. Expects Z16 = the pair's activation quants, Z17 = its negated
// correction lanes, Z18 = its activation scales (block b's in the low
// half), and the constants the function loads.
#define MX512ROW(R, acc) \
	VMOVDQU8.Z    (R), K1, Z20      \
	VPERMB        Z20, Z21, Z22     \
	VPSRLVD       Z12, Z22, Z22     \
	VPERMB        Z13, Z22, Z22     \
	VMOVDQA64     Z17, Z23          \
	VPDPBUSD      Z16, Z22, Z23     \
	VCVTDQ2PS     Z23, Z23          \
	VPERMB.Z      Z20, Z24, K2, Z25 \
	VPADDD        Z26, Z25, Z25     \
	VCVTDQ2PS     Z25, Z25          \
	VSCALEFPS     Z25, Z18, Z25     \
	VMULPS        Z25, Z23, Z23     \
	VADDPS        Y23, acc, acc     \
	VEXTRACTF64X4 $1, Z23, Y27      \
	VADDPS        Y27, acc, acc

// func dotMXFP4x4VNNI512(w *byte, rb int, qs *int8, d *float32, corr *int32, nb int, y *float32)
TEXT ·dotMXFP4x4VNNI512(SB), NOSPLIT, $0-56
	MOVQ w+0(FP), SI
	MOVQ rb+8(FP), AX
	ROWS4SETUP
	MOVQ qs+16(FP), DI
	MOVQ d+24(FP), DX
	MOVQ corr+32(FP), R9
	MOVQ nb+40(FP), CX
	MOVQ y+48(FP), BX
	MOVQ $0x3ffffffff, AX
	KMOVQ AX, K1
	MOVQ $0x1111111111111111, AX
	KMOVQ AX, K2
	MOVL $0x0f0f0f0f, AX
	VPBROADCASTD AX, Z14
	MOVL $-128, AX
	VPBROADCASTD AX, Z26
	VMOVDQU64 ·mx512KV(SB), Z13
	VMOVDQU64 ·mx512Shift(SB), Z12
	VMOVDQU64 ·mx512Codes(SB), Z21
	VMOVDQU64 ·mx512Exps(SB), Z24
	VMOVDQU64 ·mx512DIdx(SB), Z19
	VXORPS Y0, Y0, Y0
	VXORPS Y5, Y5, Y5
	VXORPS Y6, Y6, Y6
	VXORPS Y7, Y7, Y7
	SHRQ $1, CX
	JZ   mx512tail

mx512loop:
	PREFETCHT0 (R10)
	PREFETCHT0 64(R10)
	PREFETCHT0 128(R10)
	ADDQ $136, R10
	VMOVDQU64 (DI), Z16
	VPXORD    Z17, Z17, Z17
	VPSUBD    (R9), Z17, Z17
	VMOVQ     (DX), X18
	VPERMPS   Z18, Z19, Z18
	MX512ROW(SI, Y0)
	MX512ROW(R11, Y5)
	MX512ROW(R12, Y6)
	MX512ROW(R13, Y7)
	ADDQ $34, SI
	ADDQ $34, R11
	ADDQ $34, R12
	ADDQ $34, R13
	ADDQ $64, DI
	ADDQ $8, DX
	ADDQ $64, R9
	DECQ CX
	JNZ  mx512loop

mx512tail:
	MOVQ nb+40(FP), CX
	ANDQ $1, CX
	JZ   mx512done
	MOVL $0x00010001, AX
	VPBROADCASTD AX, Y15
	LEAQ    ·e8m0HalfTable(SB), R8
	VMOVDQU (DI), Y3
	VMOVDQU (R9), Y4
	MXROW(SI, Y0)
	MXROW(R11, Y5)
	MXROW(R12, Y6)
	MXROW(R13, Y7)

mx512done:
	ROWS4STORE
	RET

// Q8512ROW(R, acc): Q8_0 blocks b and b+1 of the row at R added to acc.
// Expects Z16 = the pair's activation quants, Z17 = -128·(each 4-quant
// group's sum), Z18 = the pair's activation scales (block b's in the low
// half), Z19 = 64 × 0x80, Z24 = the VPERMW indices of the two weight
// scales.
#define Q8512ROW(R, acc) \
	VMOVDQU64     (R), Z20          \
	VPERMW        Z20, Z24, Z25     \
	VCVTPH2PS     Y25, Z25          \
	VMULPS        Z18, Z25, Z25     \
	VMOVDQU64     2(R), Y22         \
	VINSERTI64X4  $1, 36(R), Z22, Z22 \
	VPXORD        Z19, Z22, Z22     \
	VMOVDQA64     Z17, Z23          \
	VPDPBUSD      Z16, Z22, Z23     \
	VCVTDQ2PS     Z23, Z23          \
	VMULPS        Z25, Z23, Z23     \
	VADDPS        Y23, acc, acc     \
	VEXTRACTF64X4 $1, Z23, Y27      \
	VADDPS        Y27, acc, acc

// Four-row Q8_0 dots (AVX-512 F/BW + VNNI), two blocks per 512-bit
// register, as dotMXFP4x4VNNI512: the weight quants are made unsigned by
// flipping their top bit (w+128), VPDPBUSD sums them against the
// activation quants into lanes that start at -128·Σ of each 4-quant group
// (computed once per pair for the four rows), which leaves the exact
// integer lanes of dotQ8_0AVX2; the two weight scales come from one VPERMW
// and F16 conversion, times the activation's. Float steps as dotQ8_0AVX2,
// block b then b+1. An odd last block goes through Q8ROW.

// func dotQ8_0x4VNNI512(w *byte, rb int, qs *int8, d *float32, nb int, y *float32)
TEXT ·dotQ8_0x4VNNI512(SB), NOSPLIT, $0-48
	MOVQ w+0(FP), SI
	MOVQ rb+8(FP), AX
	ROWS4SETUP
	MOVQ qs+16(FP), DI
	MOVQ d+24(FP), DX
	MOVQ nb+32(FP), CX
	MOVQ y+40(FP), BX
	MOVL $0x80808080, AX
	VPBROADCASTD AX, Z19
	VMOVDQU64 ·q8512Scales(SB), Z24
	VMOVDQU64 ·mx512DIdx(SB), Z21
	VXORPS Y0, Y0, Y0
	VXORPS Y5, Y5, Y5
	VXORPS Y6, Y6, Y6
	VXORPS Y7, Y7, Y7
	SHRQ $1, CX
	JZ   q8512tail

q8512loop:
	PREFETCHT0 (R10)
	PREFETCHT0 64(R10)
	PREFETCHT0 128(R10)
	PREFETCHT0 192(R10)
	PREFETCHT0 256(R10)
	ADDQ $272, R10
	VMOVDQU64 (DI), Z16
	VPXORD    Z26, Z26, Z26
	VPDPBUSD  Z16, Z19, Z26
	VPXORD    Z17, Z17, Z17
	VPSUBD    Z26, Z17, Z17
	VMOVQ     (DX), X18
	VPERMPS   Z18, Z21, Z18
	Q8512ROW(SI, Y0)
	Q8512ROW(R11, Y5)
	Q8512ROW(R12, Y6)
	Q8512ROW(R13, Y7)
	ADDQ $68, SI
	ADDQ $68, R11
	ADDQ $68, R12
	ADDQ $68, R13
	ADDQ $64, DI
	ADDQ $8, DX
	DECQ CX
	JNZ  q8512loop

q8512tail:
	MOVQ nb+32(FP), CX
	ANDQ $1, CX
	JZ   q8512done
	MOVL $0x00010001, AX
	VPBROADCASTD AX, Y15
	VMOVDQU (DI), Y3
	Q8ROW(SI, Y0)
	Q8ROW(R11, Y5)
	Q8ROW(R12, Y6)
	Q8ROW(R13, Y7)

q8512done:
	ROWS4STORE
	RET

// Four-row Q5_0 dots (AVX-512 F/BW + VNNI + VBMI), two blocks per 512-bit
// register, as dotMXFP4x4VNNI512. Per row and pair of blocks: one masked
// load of the 44 bytes; VPERMB spreads block b's 16 code bytes into 128-bit
// lanes 0-1 and block b+1's into lanes 2-3, the odd lanes shifted down 4
// (high nibbles), masked to the nibble; a second VPERMB gives byte lane j the
// qh byte holding code j's high bit, VPTESTMB against the lane's bit makes
// the mask of the set bits, and a masked VPADDB adds 16 there: the unsigned
// 5-bit codes of Q50BLOCK. VPDPBUSD sums them against the 64 activation
// quants into the negated correction lanes (Q50BLOCK's exact integer lanes),
// the two weight scales come from one VPERMW and F16 conversion times the
// activation's, and the low half (block b), then the high half (block b+1),
// is added to the row's accumulator: Q50BLOCK's float steps in its order.
// An odd last block goes through Q5ROW.

// Q5512ROW(R, acc): blocks b and b+1 of the row at R added to acc. Expects
// Z16 = the pair's activation quants, Z17 = its negated correction lanes,
// Z18 = its activation scales (block b's in the low half), and the
// constants the function loads.
#define Q5512ROW(R, acc) \
	VMOVDQU8.Z    (R), K1, Z20      \
	VPERMB        Z20, Z21, Z22     \
	VPSRLVD       Z12, Z22, Z22     \
	VPANDD        Z14, Z22, Z22     \
	VPERMB        Z20, Z26, Z29     \
	VPTESTMB      Z28, Z29, K3      \
	VPADDB        Z9, Z22, K3, Z22  \
	VMOVDQA64     Z17, Z23          \
	VPDPBUSD      Z16, Z22, Z23     \
	VCVTDQ2PS     Z23, Z23          \
	VPERMW        Z20, Z24, Z25     \
	VCVTPH2PS     Y25, Z25          \
	VMULPS        Z18, Z25, Z25     \
	VMULPS        Z25, Z23, Z23     \
	VADDPS        Y23, acc, acc     \
	VEXTRACTF64X4 $1, Z23, Y27      \
	VADDPS        Y27, acc, acc

// func dotQ5_0x4VNNI512(w *byte, rb int, qs *int8, d *float32, corr *int32, nb int, y *float32)
TEXT ·dotQ5_0x4VNNI512(SB), NOSPLIT, $0-56
	MOVQ w+0(FP), SI
	MOVQ rb+8(FP), AX
	ROWS4SETUP
	MOVQ qs+16(FP), DI
	MOVQ d+24(FP), DX
	MOVQ corr+32(FP), R9
	MOVQ nb+40(FP), CX
	MOVQ y+48(FP), BX
	MOVQ $0xfffffffffff, AX
	KMOVQ AX, K1
	MOVL $0x0f0f0f0f, AX
	VPBROADCASTD AX, Z14
	MOVL $0x10101010, AX
	VPBROADCASTD AX, Z9
	VMOVDQU64 ·mx512Shift(SB), Z12
	VMOVDQU64 ·q5512Codes(SB), Z21
	VMOVDQU64 ·q5512Qh(SB), Z26
	VMOVDQU64 ·q5512Bits(SB), Z28
	VMOVDQU64 ·q5512Scales(SB), Z24
	VMOVDQU64 ·mx512DIdx(SB), Z19
	VXORPS Y0, Y0, Y0
	VXORPS Y5, Y5, Y5
	VXORPS Y6, Y6, Y6
	VXORPS Y7, Y7, Y7
	SHRQ $1, CX
	JZ   q5512tail

q5512loop:
	PREFETCHT0 (R10)
	PREFETCHT0 64(R10)
	PREFETCHT0 128(R10)
	ADDQ $176, R10
	VMOVDQU64 (DI), Z16
	VPXORD    Z17, Z17, Z17
	VPSUBD    (R9), Z17, Z17
	VMOVQ     (DX), X18
	VPERMPS   Z18, Z19, Z18
	Q5512ROW(SI, Y0)
	Q5512ROW(R11, Y5)
	Q5512ROW(R12, Y6)
	Q5512ROW(R13, Y7)
	ADDQ $44, SI
	ADDQ $44, R11
	ADDQ $44, R12
	ADDQ $44, R13
	ADDQ $64, DI
	ADDQ $8, DX
	ADDQ $64, R9
	DECQ CX
	JNZ  q5512loop

q5512tail:
	MOVQ nb+40(FP), CX
	ANDQ $1, CX
	JZ   q5512done
	MOVL $0x00010001, AX
	VPBROADCASTD AX, Y15
	VPCMPEQB   Y10, Y10, Y10
	VMOVDQU    ·q5Bits(SB), Y11
	VMOVDQU    ·q5Spread(SB), Y13
	VMOVDQU    (DI), Y3
	VMOVDQU    (R9), Y4
	Q5ROW(SI, Y0)
	Q5ROW(R11, Y5)
	Q5ROW(R12, Y6)
	Q5ROW(R13, Y7)

q5512done:
	ROWS4STORE
	RET
