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

// TestPanicOnAnyThreadReachesCaller: a panic in a helper (as a memory fault
// on a shrunken mapping becomes with SetPanicOnFault) is re-raised on the
// calling goroutine after the call, and the pool keeps working.
func TestPanicOnAnyThreadReachesCaller(t *testing.T) {
	p := NewPool(4)
	defer p.Close()
	for round := 0; round < 20; round++ {
		var got any
		func() {
			defer func() { got = recover() }()
			_ = p.Parallel(64, func(i int) {
				if i == 63 { // a late index: usually a helper's
					panic("fault")
				}
			})
		}()
		if got != "fault" {
			t.Fatalf("round %d: recovered %v, want the helper's panic", round, got)
		}
		var n atomic.Int32
		if err := p.Parallel(64, func(int) { n.Add(1) }); err != nil || n.Load() != 64 {
			t.Fatalf("after a panic: %v, %d of 64 calls", err, n.Load())
		}
	}
}
