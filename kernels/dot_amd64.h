// Macros shared by dot_amd64.s and dot512_amd64.s (AVX2 and AVX-512
// single-vector dots).

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
