package kernels

import (
	"fmt"

	"github.com/pipe-engine/pipe/quant"
)

// dotFunc computes one row · activation. w is exactly one row.
type dotFunc func(w []byte, a *Activation) float32

// rowsFunc computes y[i] = row_i · a for i < len(y), rows of rb bytes
// packed in w (len(w) >= len(y)*rb); it saves the per-row dispatch of a
// dotFunc loop.
type rowsFunc func(w []byte, rb int, a *Activation, y []float32)

// implementation is one complete set of kernels. Entries an implementation
// does not accelerate are the reference's.
type implementation struct {
	name      string
	quantQ8_0 func(x []float32, qs []int8, d []float32)
	quantQ8_K func(x []float32, qs []int8, d []float32, bsums []int16)
	dots      map[quant.Type]dotFunc
	rows      map[quant.Type]rowsFunc    // optional fast paths for single vectors
	native    map[quant.Type]bool        // types with a non-reference kernel
	gemm      map[quant.Type]*gemmKernel // multi-token kernels (gemm.go)
}

func refDots() map[quant.Type]dotFunc {
	return map[quant.Type]dotFunc{
		quant.F32:   refDotF32,
		quant.F16:   refDotF16,
		quant.BF16:  refDotBF16,
		quant.Q4_0:  refDotQ4_0,
		quant.Q4_1:  refDotQ4_1,
		quant.Q5_0:  refDotQ5_0,
		quant.Q5_1:  refDotQ5_1,
		quant.Q8_0:  refDotQ8_0,
		quant.MXFP4: refDotMXFP4,
		quant.Q2_K:  refDotQ2_K,
		quant.Q3_K:  refDotQ3_K,
		quant.Q4_K:  refDotQ4_K,
		quant.Q5_K:  refDotQ5_K,
		quant.Q6_K:  refDotQ6_K,
	}
}

var refImpl = &implementation{
	name:      "purego",
	quantQ8_0: refQuantQ8_0,
	quantQ8_K: refQuantQ8_K,
	dots:      refDots(),
	native:    map[quant.Type]bool{},
	gemm:      refGEMMs(),
}

// impl is the implementation in use, chosen once at init (see impl_*.go).
var impl = bestImpl()

// Implementation names the kernel set in use ("purego", "avx2", ...).
func Implementation() string { return impl.name }

// rowBytes validates a matrix shape and returns its row size.
func rowBytes(t quant.Type, w []byte, rows, cols int) (int, error) {
	if _, err := ActivationType(t); err != nil {
		return 0, err
	}
	if rows < 0 || cols <= 0 || uint64(rows) > maxUnits {
		return 0, fmt.Errorf("%w: %d rows × %d cols", ErrShape, rows, cols)
	}
	rb, err := t.RowSize(int64(cols))
	if err != nil {
		return 0, fmt.Errorf("%w: %w", ErrShape, err)
	}
	if int64(len(w))/rb < int64(rows) {
		return 0, fmt.Errorf("%w: weights hold %d bytes, %d rows of %d %v elements need %d", ErrShape, len(w), rows, cols, t, int64(rows)*rb)
	}
	return int(rb), nil
}

// checkAct verifies that a was prepared for rows of type t and length cols.
func checkAct(t quant.Type, cols int, a *Activation) error {
	if a == nil {
		return fmt.Errorf("%w: nil activation", ErrShape)
	}
	at, _ := ActivationType(t)
	if a.typ != at || a.cols != cols {
		return fmt.Errorf("%w: activation is %v×%d, rows of %v×%d need %v×%d", ErrShape, a.typ, a.cols, t, cols, at, cols)
	}
	return nil
}
