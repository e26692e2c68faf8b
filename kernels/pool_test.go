package kernels

import (
	"encoding/binary"
	"math"
	"runtime"
	"slices"
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

// TestUnclaimedJob: a helper that has not started on a call by the time the
// caller has run every unit (here: it cannot, with one processor for both)
// is not waited for — the caller takes the job back — and the helper still
// serves later calls, every index run once and every product exact.
func TestUnclaimedJob(t *testing.T) {
	ref := NewPool(1)
	defer ref.Close()
	prev := runtime.GOMAXPROCS(1)
	p := NewPool(2)
	defer func() {
		p.Close()
		runtime.GOMAXPROCS(prev)
	}()
	const rows, cols = 64, 256
	w := make([]byte, rows*cols*4)
	x := make([]float32, cols)
	for i := range x {
		x[i] = float32(i%7) - 3
	}
	for r := 0; r < rows; r++ {
		for c := 0; c < cols; c++ {
			binary.LittleEndian.PutUint32(w[(r*cols+c)*4:], math.Float32bits(float32((r+c)%5)-2))
		}
	}
	want := make([]float32, rows)
	if err := ref.MatVec(quant.F32, w, rows, cols, x, want); err != nil {
		t.Fatal(err)
	}
	old := parallelMinBytes
	parallelMinBytes = 0
	defer func() { parallelMinBytes = old }()
	for round := 0; round < 100; round++ {
		if round%3 == 0 {
			// let the helper run out its spin and park: the next call
			// wakes it with a token, then takes the job back from it
			for p.helpers[0].state.Load() != parked {
				runtime.Gosched()
			}
		}
		hits := make([]int32, 16)
		if err := p.ParallelWith(len(hits), func(_, i int) { atomic.AddInt32(&hits[i], 1) }); err != nil {
			t.Fatal(err)
		}
		for i, h := range hits {
			if h != 1 {
				t.Fatalf("round %d: index %d ran %d times", round, i, h)
			}
		}
		y := make([]float32, rows)
		if err := p.MatVec(quant.F32, w, rows, cols, x, y); err != nil {
			t.Fatal(err)
		}
		if !slices.Equal(y, want) {
			t.Fatalf("round %d: product differs from one thread's", round)
		}
	}
	if p.retracted.Load() == 0 {
		t.Fatal("no call took its job back: the caller waited for a helper that could not start")
	}
}
