// Macros shared by dot_amd64.s and dot512_amd64.s (AVX2 and AVX-512
// single-vector dots, and the four-row kernels' setup, one-block rows and
// stores).

// HSUM8 reduces Y0 into X0[0] (clobbers X1).
#define HSUM8 \
	VEXTRACTF128 $1, Y0, X1 \
	VADDPS       X1, X0, X0 \
	VMOVHLPS     X0, X0, X1 \
	VADDPS       X1, X0, X0 \
	VMOVSHDUP    X0, X1     \
	VADDSS       X1, X0, X0

// K4MINS: X12 += dmin * float(madd(mins, pairsums(bsums))), bsums at (BX').
// Expects X4 = mins int16, X2 = dmin broadcast (xmm), R12 = bsums pointer.
#define K4MINS \
	VMOVDQU   (R12), X5      \
	VMOVDQU   16(R12), X6    \
	VPHADDW   X6, X5, X5     \
	VPMADDWD  X5, X4, X4     \
	VCVTDQ2PS X4, X4         \
	VMULPS    X2, X4, X4     \
	VADDPS    X4, X12, X12

// DSCALE: reg = broadcast(f16 at off(SI) * (DX)), xreg its low lane (d at
// 0, dmin at 2 of a K-quant block).
#define DSCALE(off, reg, xreg) \
	MOVWLZX      off(SI), AX  \
	VMOVD        AX, xreg     \
	VCVTPH2PS    xreg, xreg   \
	VMULSS       (DX), xreg, xreg \
	VBROADCASTSS xreg, reg

// ROWS4STORE: y[0..3] = hsum of Y0, Y5, Y6, Y7 (y pointer in BX).
#define ROWS4STORE \
	HSUM8 \
	VMOVSS  X0, (BX) \
	VMOVAPS Y5, Y0 \
	HSUM8 \
	VMOVSS  X0, 4(BX) \
	VMOVAPS Y6, Y0 \
	HSUM8 \
	VMOVSS  X0, 8(BX) \
	VMOVAPS Y7, Y0 \
	HSUM8 \
	VMOVSS  X0, 12(BX) \
	VZEROUPPER

// MXROW(R, acc): one MXFP4 block of the row at R against Y3 (quants) and
// Y4 (correction lanes), activation scale at (DX): MXBLOCK's operations.
#define MXROW(R, acc) \
	MOVBLZX        (R), AX       \
	VMOVSS         (R8)(AX*4), X1 \
	VMULSS         (DX), X1, X1  \
	VBROADCASTSS   X1, Y1        \
	VBROADCASTI128 1(R), Y2      \
	VPSRLVD        Y12, Y2, Y2   \
	VPAND          Y14, Y2, Y2   \
	VPSHUFB        Y2, Y13, Y2   \
	VPMADDUBSW     Y3, Y2, Y2    \
	VPMADDWD       Y15, Y2, Y2   \
	VPSUBD         Y4, Y2, Y2    \
	VCVTDQ2PS      Y2, Y2        \
	VMULPS         Y1, Y2, Y2    \
	VADDPS         Y2, acc, acc

// Q5ROW(R, acc): one Q5_0 block of the row at R against Y3 (quants) and Y4
// (correction lanes), activation scale at (DX): Q50BLOCK's operations, the
// high-bit lanes formed in Y8. Uses Q50BLOCK's constants (Y9-Y15).
#define Q5ROW(R, acc) \
	MOVWLZX        (R), AX     \
	VMOVD          AX, X1      \
	VCVTPH2PS      X1, X1      \
	VMULSS         (DX), X1, X1 \
	VBROADCASTSS   X1, Y1      \
	VPBROADCASTD   2(R), Y8    \
	VPSHUFB        Y13, Y8, Y8 \
	VPOR           Y11, Y8, Y8 \
	VPCMPEQB       Y10, Y8, Y8 \
	VPAND          Y9, Y8, Y8  \
	VBROADCASTI128 6(R), Y2    \
	VPSRLVD        Y12, Y2, Y2 \
	VPAND          Y14, Y2, Y2 \
	VPOR           Y8, Y2, Y2  \
	VPMADDUBSW     Y3, Y2, Y2  \
	VPMADDWD       Y15, Y2, Y2 \
	VPSUBD         Y4, Y2, Y2  \
	VCVTDQ2PS      Y2, Y2      \
	VMULPS         Y1, Y2, Y2  \
	VADDPS         Y2, acc, acc

// ROWS4SETUP: R11..R13 = the rows after the one at SI, AX bytes apart;
// R10 = the row after them. The four-row loops prefetch the next four rows
// in address order from R10, as many bytes per iteration as the four rows
// consume, so the next group is in cache when its call starts: with the
// four rows' streams interleaved the hardware prefetcher falls behind
// (BenchmarkMatVec).
#define ROWS4SETUP \
	LEAQ (SI)(AX*1), R11 \
	LEAQ (R11)(AX*1), R12 \
	LEAQ (R12)(AX*1), R13 \
	LEAQ (R13)(AX*1), R10

// Q8ROW(R, acc): one Q8_0 block of the row at R against Y3 (quants),
// activation scale at (DX): dotQ8_0AVX2's operations.
#define Q8ROW(R, acc) \
	MOVWLZX      (R), AX        \
	VMOVD        AX, X1         \
	VCVTPH2PS    X1, X1         \
	VMULSS       (DX), X1, X1   \
	VBROADCASTSS X1, Y1         \
	VMOVDQU      2(R), Y2       \
	VPSIGNB      Y2, Y3, Y4     \
	VPABSB       Y2, Y2         \
	VPMADDUBSW   Y4, Y2, Y2     \
	VPMADDWD     Y15, Y2, Y2    \
	VCVTDQ2PS    Y2, Y2         \
	VMULPS       Y1, Y2, Y2     \
	VADDPS       Y2, acc, acc
