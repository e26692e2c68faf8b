package kernels

import (
	"sync/atomic"
	"testing"

	"github.com/pipe-engine/pipe/quant"
)

func TestParallelCoversEveryIndexOnce(t *testing.T) {
	for _, threads := range []int{1, 2, 4} {
		p := NewPool(threads)
		for _, n := range []int{0, 1, 3, 64, 1000} {
			hits := make([]int32, n)
			if err := p.Parallel(n, func(i int) { atomic.AddInt32(&hits[i], 1) }); err != nil {
				t.Fatal(err)
			}
			for i, h := range hits {
				if h != 1 {
					t.Fatalf("threads %d n %d: index %d ran %d times", threads, n, i, h)
				}
			}
		}
		// products still work after a Parallel call
		w := make([]byte, 4*8)
		y := make([]float32, 8)
		if err := p.MatVec(quant.F32, w, 8, 1, []float32{1}, y); err != nil {
			t.Fatal(err)
		}
		p.Close()
		if err := p.Parallel(2, func(int) {}); err != ErrClosed {
			t.Fatalf("after Close: %v", err)
		}
	}
}
