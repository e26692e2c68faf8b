// Encodings of the AArch64 Advanced SIMD instructions the Go assembler has
// no mnemonic for. Every macro takes register numbers (0-31) and emits one
// instruction word; the comment gives the instruction. The by-element forms
// take the lane index i (0-3) of a 32-bit element of Vm.

// SDOT Vd.4S, Vn.16B, Vm.16B (ARMv8.2 dot product)
#define SDOT(d, n, m) WORD $(0x4e809400 | ((m)<<16) | ((n)<<5) | (d))
// SMULL Vd.8H, Vn.8B, Vm.8B
#define SMULL8H(d, n, m) WORD $(0x0e20c000 | ((m)<<16) | ((n)<<5) | (d))
// SMULL2 Vd.8H, Vn.16B, Vm.16B
#define SMULL28H(d, n, m) WORD $(0x4e20c000 | ((m)<<16) | ((n)<<5) | (d))
// SMULL Vd.4S, Vn.4H, Vm.4H
#define SMULL4S(d, n, m) WORD $(0x0e60c000 | ((m)<<16) | ((n)<<5) | (d))
// SMULL2 Vd.4S, Vn.8H, Vm.8H
#define SMULL24S(d, n, m) WORD $(0x4e60c000 | ((m)<<16) | ((n)<<5) | (d))
// ADDP Vd.8H, Vn.8H, Vm.8H
#define ADDP8H(d, n, m) WORD $(0x4e60bc00 | ((m)<<16) | ((n)<<5) | (d))
// ADDP Vd.4S, Vn.4S, Vm.4S
#define ADDP4S(d, n, m) WORD $(0x4ea0bc00 | ((m)<<16) | ((n)<<5) | (d))
// SADDLP Vd.4S, Vn.8H
#define SADDLP4S(d, n) WORD $(0x4e602800 | ((n)<<5) | (d))
// SADDLP Vd.8H, Vn.16B
#define SADDLP8H(d, n) WORD $(0x4e202800 | ((n)<<5) | (d))
// ADDV Hd, Vn.8H
#define ADDVH(d, n) WORD $(0x4e71b800 | ((n)<<5) | (d))
// MLA Vd.4S, Vn.4S, Vm.S[i]
#define MLAE(d, n, m, i) WORD $(0x6f800000 | (((i)&1)<<21) | (((i)>>1)<<11) | ((m)<<16) | ((n)<<5) | (d))
// MUL Vd.4S, Vn.4S, Vm.S[i]
#define MULE(d, n, m, i) WORD $(0x4f808000 | (((i)&1)<<21) | (((i)>>1)<<11) | ((m)<<16) | ((n)<<5) | (d))
// SMIN Vd.4S, Vn.4S, Vm.4S
#define SMIN4S(d, n, m) WORD $(0x4ea06c00 | ((m)<<16) | ((n)<<5) | (d))
// SXTL Vd.8H, Vn.8B (SSHLL #0)
#define SXTL8H(d, n) WORD $(0x0f08a400 | ((n)<<5) | (d))
// SXTL2 Vd.8H, Vn.16B (SSHLL2 #0)
#define SXTL28H(d, n) WORD $(0x4f08a400 | ((n)<<5) | (d))
// SXTL Vd.4S, Vn.4H (SSHLL #0)
#define SXTL4S(d, n) WORD $(0x0f10a400 | ((n)<<5) | (d))
// SXTL2 Vd.4S, Vn.8H (SSHLL2 #0)
#define SXTL24S(d, n) WORD $(0x4f10a400 | ((n)<<5) | (d))
// SQXTN Vd.4H, Vn.4S
#define SQXTN4H(d, n) WORD $(0x0e614800 | ((n)<<5) | (d))
// SQXTN2 Vd.8H, Vn.4S
#define SQXTN28H(d, n) WORD $(0x4e614800 | ((n)<<5) | (d))
// SQXTN Vd.8B, Vn.8H
#define SQXTN8B(d, n) WORD $(0x0e214800 | ((n)<<5) | (d))
// SQXTN2 Vd.16B, Vn.8H
#define SQXTN216B(d, n) WORD $(0x4e214800 | ((n)<<5) | (d))

// SCVTF Vd.4S, Vn.4S
#define SCVTF4S(d, n) WORD $(0x4e21d800 | ((n)<<5) | (d))
// FADD Vd.4S, Vn.4S, Vm.4S
#define FADD4S(d, n, m) WORD $(0x4e20d400 | ((m)<<16) | ((n)<<5) | (d))
// FSUB Vd.4S, Vn.4S, Vm.4S
#define FSUB4S(d, n, m) WORD $(0x4ea0d400 | ((m)<<16) | ((n)<<5) | (d))
// FMUL Vd.4S, Vn.4S, Vm.4S
#define FMUL4S(d, n, m) WORD $(0x6e20dc00 | ((m)<<16) | ((n)<<5) | (d))
// FMUL Vd.4S, Vn.4S, Vm.S[i]
#define FMULE(d, n, m, i) WORD $(0x4f809000 | (((i)&1)<<21) | (((i)>>1)<<11) | ((m)<<16) | ((n)<<5) | (d))
// FADDP Sd, Vn.2S
#define FADDPS(d, n) WORD $(0x7e30d800 | ((n)<<5) | (d))
// FABS Vd.4S, Vn.4S
#define FABS4S(d, n) WORD $(0x4ea0f800 | ((n)<<5) | (d))
// FMAX Vd.4S, Vn.4S, Vm.4S
#define FMAX4S(d, n, m) WORD $(0x4e20f400 | ((m)<<16) | ((n)<<5) | (d))
// FMIN Vd.4S, Vn.4S, Vm.4S
#define FMIN4S(d, n, m) WORD $(0x4ea0f400 | ((m)<<16) | ((n)<<5) | (d))
// FMAXV Sd, Vn.4S
#define FMAXV(d, n) WORD $(0x6e30f800 | ((n)<<5) | (d))
// FMINV Sd, Vn.4S
#define FMINV(d, n) WORD $(0x6eb0f800 | ((n)<<5) | (d))
// FCVTAS Vd.4S, Vn.4S (to nearest, ties away from zero)
#define FCVTAS4S(d, n) WORD $(0x4e21c800 | ((n)<<5) | (d))
// FCVTNS Vd.4S, Vn.4S (to nearest, ties to even)
#define FCVTNS4S(d, n) WORD $(0x4e21a800 | ((n)<<5) | (d))
// EXT Vd.16B, Vn.16B, Vm.16B, #imm
#define EXT16(d, n, m, imm) WORD $(0x6e000000 | ((m)<<16) | ((imm)<<11) | ((n)<<5) | (d))
// FCVTL Vd.4S, Vn.4H
#define FCVTL4S(d, n) WORD $(0x0e217800 | ((n)<<5) | (d))
// FCVTL2 Vd.4S, Vn.8H
#define FCVTL24S(d, n) WORD $(0x4e217800 | ((n)<<5) | (d))

// HSUM8(d, a, b, t): Sd = the package's horizontal sum of the 8 float
// lanes a (0-3) and b (4-7): r = a+b; (r0+r2) + (r1+r3). Clobbers Vt, Va.
#define HSUM8(d, a, b, t) \
	FADD4S(a, a, b) \
	HSUM4(d, a, t)

// HSUM4(d, a, t): Sd = (a0+a2) + (a1+a3). Clobbers Vt, Va.
#define HSUM4(d, a, t) \
	EXT16(t, a, a, 8) \
	FADD4S(a, a, t) \
	FADDPS(d, a)

// FADDP Vd.4S, Vn.4S, Vm.4S: [n0+n1, n2+n3, m0+m1, m2+m3].
#define FADDP4S(d, n, m) WORD $(0x6e20d400 | ((m)<<16) | ((n)<<5) | (d))

// HSUMP4(d, a): Sd = (a0+a1) + (a2+a3), the order of the reference's
// four-lane dot products. Clobbers Va.
#define HSUMP4(d, a) \
	FADDP4S(a, a, a) \
	FADDPS(d, a)

// FCVTN Vd.4H, Vn.4S (to nearest, ties to even, under the default FPCR)
#define FCVTN4H(d, n) WORD $(0x0e216800 | ((n)<<5) | (d))
// FCMEQ Vd.4S, Vn.4S, Vm.4S (all ones where equal: FCMEQ(d, n, n) is
// all ones in every lane but a NaN's)
#define FCMEQ4S(d, n, m) WORD $(0x4e20e400 | ((m)<<16) | ((n)<<5) | (d))

// MOVI Vd.2D, #0
#define ZERO(d) WORD $(0x6f00e400 | (d))
