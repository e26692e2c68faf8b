package kernels

import (
	"encoding/binary"
	"math"
	"math/rand/v2"

	"github.com/pipe-engine/pipe/quant"
)

// allTypes are the weight types with kernels.
var allTypes = []quant.Type{
	quant.F32, quant.F16, quant.BF16,
	quant.Q4_0, quant.Q4_1, quant.Q5_0, quant.Q5_1, quant.Q8_0, quant.MXFP4,
	quant.Q2_K, quant.Q3_K, quant.Q4_K, quant.Q5_K, quant.Q6_K,
}

// scaleFields are the byte offsets of the fp16 scale fields inside a block;
// random block bytes are valid quants everywhere else.
var scaleFields = map[quant.Type][]int{
	quant.Q4_0: {0}, quant.Q4_1: {0, 2}, quant.Q5_0: {0}, quant.Q5_1: {0, 2},
	quant.Q8_0: {0}, quant.Q2_K: {80, 82}, quant.Q3_K: {108},
	quant.Q4_K: {0, 2}, quant.Q5_K: {0, 2}, quant.Q6_K: {208},
}

// randRows builds rows random rows of type t with sane (finite, moderate)
// scales. Random quant bytes cover the whole code space (e.g. -128 in
// Q8_0, every 6-bit scale in K-quants).
func randRows(rng *rand.Rand, t quant.Type, rows, cols int) []byte {
	rb, err := t.RowSize(int64(cols))
	if err != nil {
		panic(err)
	}
	w := make([]byte, int(rb)*rows)
	switch t {
	case quant.F32:
		for i := 0; i < len(w); i += 4 {
			binary.LittleEndian.PutUint32(w[i:], math.Float32bits(float32(rng.NormFloat64())))
		}
		return w
	case quant.F16:
		for i := 0; i < len(w); i += 2 {
			binary.LittleEndian.PutUint16(w[i:], quant.FP32ToFP16(float32(rng.NormFloat64())))
		}
		return w
	case quant.BF16:
		for i := 0; i < len(w); i += 2 {
			binary.LittleEndian.PutUint16(w[i:], quant.FP32ToBF16(float32(rng.NormFloat64())))
		}
		return w
	}
	for i := range w {
		w[i] = byte(rng.Uint32())
	}
	bs := t.TypeSize()
	for b := 0; b < len(w); b += bs {
		if t == quant.MXFP4 {
			w[b] = byte(118 + rng.IntN(12))
			continue
		}
		for _, off := range scaleFields[t] {
			v := float32(rng.Float64()*0.02 + 1e-4)
			if rng.IntN(8) == 0 {
				v = -v
			}
			binary.LittleEndian.PutUint16(w[b+off:], quant.FP32ToFP16(v))
		}
	}
	return w
}

// randX is an activation-like vector: mostly normal values, with some
// all-zero 32-blocks, exact ties for the rounding modes and huge/tiny blocks.
func randX(rng *rand.Rand, n int) []float32 {
	x := make([]float32, n)
	for i := range x {
		x[i] = float32(rng.NormFloat64())
	}
	for b := 0; b+32 <= n; b += 32 {
		switch rng.IntN(10) {
		case 0:
			clear(x[b : b+32])
		case 1: // 127 max gives id = 1 exactly-ish: many .5 ties
			for i := b; i < b+32; i++ {
				x[i] = float32(rng.IntN(255)-127) / 2
			}
			x[b] = 127
		case 2:
			for i := b; i < b+32; i++ {
				x[i] *= 100
			}
		case 3:
			for i := b; i < b+32; i++ {
				x[i] *= 1e-6
			}
		case 4: // the largest magnitude appears twice with both signs
			x[b+3] = 9
			x[b+20] = -9
		}
	}
	return x
}
