// Macros shared by the NEON dot-product routines (dot_arm64.s) and the
// multi-token ones (gemm_arm64.s): the same instructions per token, so the
// same bits.

// The SDOT form of LANES16(t, w, y, s): Vt.4S = 4-byte dot products of Vw
// and Vy (Vs unused).
#define LANES16_SDOT(t, w, y, s) \
	ZERO(t)    \
	SDOT(t, w, y)

// The plain NEON form (clobbers Vs).
#define LANES16_NEON(t, w, y, s) \
	SMULL8H(t, w, y)  \
	SMULL28H(s, w, y) \
	ADDP8H(t, t, s)   \
	SADDLP4S(t, t)

// ACCLANES(a, b): V30/V31 += float32(F16 * float32(Va/Vb)).
#define ACCLANES(a, b) \
	SCVTF4S(a, a)       \
	SCVTF4S(b, b)       \
	FMULE(a, a, 16, 0)  \
	FMULE(b, b, 16, 0)  \
	FADD4S(30, 30, a)   \
	FADD4S(31, 31, b)

// K4MINSUM(acc): Vacc += float32(F18 · float32(M)) with M[k] =
// mn[2k]·(bs[4k]+bs[4k+1]) + mn[2k+1]·(bs[4k+2]+bs[4k+3]): the Q4_K/Q5_K
// block's mins (V22.8H) against the activation's Q8_K sums in V23/V24.
// Clobbers V23-V25.
#define K4MINSUM(acc) \
	ADDP8H(23, 23, 24)   \
	SMULL4S(24, 22, 23)  \
	SMULL24S(25, 22, 23) \
	ADDP4S(24, 24, 25)   \
	SCVTF4S(24, 24)      \
	FMULE(24, 24, 18, 0) \
	FADD4S(acc, acc, 24)

// K4SCALES unpacks the 12 scale bytes at 4(R0) (llama.cpp's utmp shuffle):
// V20.4S = scales 0-3, V21.4S = scales 4-7, V22.8H = the 8 mins. Clobbers
// R5-R12, V19.
#define K4SCALES \
	MOVWU  4(R0), R5               \
	MOVWU  8(R0), R6               \
	MOVWU  12(R0), R7              \
	ANDW   $0x3f3f3f3f, R5, R8     \
	ANDW   $0x3f3f3f3f, R6, R9     \
	LSRW   $6, R5, R10             \
	ANDW   $0x03030303, R10, R10   \
	ANDW   $0x0f0f0f0f, R7, R11    \
	ORRW   R10<<4, R11, R11        \
	LSRW   $6, R6, R10             \
	ANDW   $0x03030303, R10, R10   \
	LSRW   $4, R7, R12             \
	ANDW   $0x0f0f0f0f, R12, R12   \
	ORRW   R10<<4, R12, R12        \
	ORR    R11<<32, R8, R8         \
	ORR    R12<<32, R9, R9         \
	FMOVD  R8, F19                 \
	VUXTL  V19.B8, V19.H8          \
	VUXTL  V19.H4, V20.S4          \
	VUXTL2 V19.H8, V21.S4          \
	FMOVD  R9, F22                 \
	VUXTL  V22.B8, V22.H8
