package quant_test

import (
	"fmt"
	"math"

	"github.com/pipe-engine/pipe/quant"
)

// Quantize one row of 256 floats to Q4_K with llama.cpp's reference
// quantizer and read it back.
func Example() {
	x := make([]float32, 256)
	for i := range x {
		x[i] = float32(math.Sin(float64(i) / 10))
	}
	rs, err := quant.Q4_K.RowSize(int64(len(x)))
	if err != nil {
		panic(err)
	}
	q := make([]byte, rs)
	if err := quant.Quantize(quant.Q4_K, x, q); err != nil {
		panic(err)
	}
	y := make([]float32, len(x))
	if err := quant.Dequantize(quant.Q4_K, q, y); err != nil {
		panic(err)
	}
	var maxErr float64
	for i := range x {
		maxErr = math.Max(maxErr, math.Abs(float64(x[i]-y[i])))
	}
	fmt.Printf("%d floats -> %d bytes, max error below 0.1: %v\n", len(x), len(q), maxErr < 0.1)
	// Output: 256 floats -> 144 bytes, max error below 0.1: true
}

func ExampleFP32ToFP16() {
	h := quant.FP32ToFP16(0.1)
	fmt.Printf("%#04x %v\n", h, quant.FP16ToFP32(h))
	// Output: 0x2e66 0.099975586
}
