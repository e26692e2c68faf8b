package quant

import (
	"errors"
	"math"
	"testing"
)

// FuzzDequantize feeds arbitrary bytes, type numbers and element counts to
// Dequantize: it must never panic, must succeed exactly when the type is
// supported and len(src) == RowSize(n), and must otherwise return an error
// wrapping ErrLength, ErrUnsupported or ErrUnknownType. Successful F32/F16/
// BF16/Q8_0 output is re-quantized and compared where that is lossless.
func FuzzDequantize(f *testing.F) {
	f.Add(uint16(Q4_K), uint16(256), make([]byte, 144))
	f.Add(uint16(Q6_K), uint16(256), make([]byte, 210))
	f.Add(uint16(MXFP4), uint16(32), []byte{0xff, 1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11, 12, 13, 14, 15, 16})
	f.Add(uint16(Q8_0), uint16(32), make([]byte, 33))
	f.Add(uint16(F16), uint16(3), []byte{0x00, 0x7c, 0x01, 0x7c, 0xff, 0xff})
	f.Add(uint16(4), uint16(32), make([]byte, 18))
	f.Add(uint16(IQ2_XXS), uint16(256), make([]byte, 66))
	f.Fuzz(func(t *testing.T, typ uint16, n uint16, src []byte) {
		tt := Type(typ % 64)
		dst := make([]float32, int(n))
		err := Dequantize(tt, src, dst)
		rs, rsErr := tt.RowSize(int64(n))
		wantOK := CanDequantize(tt) && rsErr == nil && rs == int64(len(src))
		if wantOK != (err == nil) {
			t.Fatalf("Dequantize(%s, %d bytes, %d floats): err=%v, want ok=%v", tt, len(src), n, err, wantOK)
		}
		if err != nil {
			if !errors.Is(err, ErrLength) && !errors.Is(err, ErrUnsupported) && !errors.Is(err, ErrUnknownType) {
				t.Fatalf("error %v wraps no sentinel", err)
			}
			return
		}
		switch tt {
		case F32, F16, BF16, Q8_0:
			// These formats re-encode their own dequantization exactly when
			// the values are finite and (Q8_0) the block scale is canonical,
			// so only check the lossless ones: F32 always, F16/BF16 unless NaN.
			if tt == Q8_0 {
				return
			}
			for _, v := range dst {
				if math.IsNaN(float64(v)) {
					return
				}
			}
			back := make([]byte, len(src))
			if err := Quantize(tt, dst, back); err != nil {
				t.Fatal(err)
			}
			if string(back) != string(src) {
				t.Fatalf("%s: dequantize→quantize changed the bytes", tt)
			}
		}
	})
}

// FuzzQuantize: arbitrary float32 bit patterns (NaN, Inf, subnormals) never
// make a quantizer panic, and the output always dequantizes.
func FuzzQuantize(f *testing.F) {
	f.Add(uint16(Q4_K), []byte{0, 0, 0x80, 0x7f})
	f.Add(uint16(Q3_K), []byte{1, 0, 0, 0})
	f.Add(uint16(MXFP4), []byte{0xff, 0xff, 0xff, 0x7f})
	f.Fuzz(func(t *testing.T, typ uint16, seed []byte) {
		tt := Type(typ % 64)
		if !CanQuantize(tt) || len(seed) < 4 {
			return
		}
		n := tt.BlockSize()
		if n < QK_K {
			n = QK_K
		}
		x := make([]float32, n)
		for i := range x {
			j := (4 * i) % (len(seed) - 3)
			x[i] = math.Float32frombits(uint32(seed[j]) | uint32(seed[j+1])<<8 | uint32(seed[j+2])<<16 | uint32(seed[j+3])<<24 ^ uint32(i*2654435761))
		}
		rs, _ := tt.RowSize(int64(n))
		q := make([]byte, rs)
		if err := Quantize(tt, x, q); err != nil {
			t.Fatal(err)
		}
		if err := Dequantize(tt, q, make([]float32, n)); err != nil {
			t.Fatal(err)
		}
	})
}
