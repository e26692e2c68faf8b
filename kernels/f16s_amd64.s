//go:build amd64 && !purego

#include "textflag.h"

// func fp32ToFP16sAVX2(dst *uint16, src *float32, n int) bool
//
// dst[i] = F16 of src[i], nearest even (n a multiple of 8); returns
// whether any src[i] was a NaN.
TEXT ·fp32ToFP16sAVX2(SB), NOSPLIT, $0-25
	MOVQ   dst+0(FP), DI
	MOVQ   src+8(FP), SI
	MOVQ   n+16(FP), CX
	SHRQ   $3, CX
	VXORPS Y2, Y2, Y2

hloop:
	VMOVUPS   (SI), Y0
	VCVTPS2PH $0, Y0, X1
	VMOVDQU   X1, (DI)
	VCMPPS    $3, Y0, Y0, Y3 // unordered: NaN
	VORPS     Y3, Y2, Y2
	ADDQ      $32, SI
	ADDQ      $16, DI
	DECQ      CX
	JNZ       hloop
	VMOVMSKPS Y2, AX
	TESTL     AX, AX
	SETNE     ret+24(FP)
	VZEROUPPER
	RET
