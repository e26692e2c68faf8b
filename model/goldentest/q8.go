package goldentest

import (
	"math"
	"testing"

	"github.com/pipe-engine/pipe/kernels"
	"github.com/pipe-engine/pipe/quant"
)

// The Q8_0 activation-rounding checks the families' rounding tests share:
// a block of 32 inputs, pipe's quants of it and ggml's rule.

// BitsToF32 turns float32 bit patterns (as the tests pin dumped blocks)
// into floats.
func BitsToF32(b []uint32) []float32 {
	out := make([]float32, len(b))
	for i, u := range b {
		out[i] = math.Float32frombits(u)
	}
	return out
}

// Q8Quants returns the Q8_0 quants pipe gives x (one block of 32), read
// through its Q8_0×Q8_0 matmul: row j of the weight is one-hot at column j
// with scale 1, so y[j] = fp16(amax/127)·q[j].
func Q8Quants(t *testing.T, x []float32) []int {
	t.Helper()
	const n = 32
	if len(x) != n {
		t.Fatalf("Q8Quants: %d values, want one block of %d", len(x), n)
	}
	w := make([]byte, n*(2+n))
	for j := 0; j < n; j++ {
		blk := w[j*(2+n):]
		blk[0], blk[1] = 0x00, 0x3c // fp16 1.0, little-endian
		blk[2+j] = 1
	}
	pool := kernels.NewPool(1)
	defer pool.Close()
	y := make([]float32, n)
	if err := pool.MatMul(quant.Q8_0, w, n, n, x, 1, y); err != nil {
		t.Fatal(err)
	}
	var amax float32
	for _, v := range x {
		amax = max(amax, float32(math.Abs(float64(v))))
	}
	d := quant.FP16ToFP32(quant.FP32ToFP16(amax / 127))
	q := make([]int, n)
	for j, v := range y {
		q[j] = int(math.Round(float64(v / d)))
		if float32(q[j])*d != v {
			t.Fatalf("column %d: %v is not a multiple of the block scale %v", j, v, d)
		}
	}
	return q
}

// GGMLQ8 is ggml's quantize_row_q8_0 (its AVX2 form) for x[i]: round to
// nearest of x·(127/amax).
func GGMLQ8(x []float32, i int) int {
	var amax float32
	for _, v := range x {
		amax = max(amax, float32(math.Abs(float64(v))))
	}
	id := 127 / amax
	return int(math.RoundToEven(float64(x[i] * id)))
}
