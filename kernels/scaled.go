package kernels

// MulScalar writes y[i]·w into out (float32 products); y holds at least
// len(out) values.
func MulScalar(out, y []float32, w float32) { mulScalar(out, y[:len(out)], w) }

// AddMulScalar adds y[i]·w to out[i], the product rounded to float32
// before the addition (never fused), as out[i] += float32(y[i]*w); y holds
// at least len(out) values. Vectorized where the assembly runs, with the
// same values bit for bit.
func AddMulScalar(out, y []float32, w float32) { addMulScalar(out, y[:len(out)], w) }

func refMulScalar(out, y []float32, w float32) {
	for i := range out {
		out[i] = y[i] * w
	}
}

func refAddMulScalar(out, y []float32, w float32) {
	for i := range out {
		out[i] += float32(y[i] * w) // explicit rounding: never fused into an FMA
	}
}
