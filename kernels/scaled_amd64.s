//go:build amd64 && !purego

#include "textflag.h"

// func mulScalarAVX2(out, y *float32, n int, w float32)
//
// out[i] = y[i]·w (n a multiple of 8).
TEXT ·mulScalarAVX2(SB), NOSPLIT, $0-28
	MOVQ         out+0(FP), DI
	MOVQ         y+8(FP), SI
	MOVQ         n+16(FP), CX
	VBROADCASTSS w+24(FP), Y15
	SHRQ         $3, CX

msloop:
	VMULPS  (SI), Y15, Y0
	VMOVUPS Y0, (DI)
	ADDQ    $32, SI
	ADDQ    $32, DI
	DECQ    CX
	JNZ     msloop
	VZEROUPPER
	RET

// func addMulScalarAVX2(out, y *float32, n int, w float32)
//
// out[i] += y[i]·w, the product rounded before the addition (n a multiple
// of 8).
TEXT ·addMulScalarAVX2(SB), NOSPLIT, $0-28
	MOVQ         out+0(FP), DI
	MOVQ         y+8(FP), SI
	MOVQ         n+16(FP), CX
	VBROADCASTSS w+24(FP), Y15
	SHRQ         $3, CX

amloop:
	VMULPS  (SI), Y15, Y0
	VADDPS  (DI), Y0, Y0
	VMOVUPS Y0, (DI)
	ADDQ    $32, SI
	ADDQ    $32, DI
	DECQ    CX
	JNZ     amloop
	VZEROUPPER
	RET
