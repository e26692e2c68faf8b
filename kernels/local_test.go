package kernels

import (
	"math/rand/v2"
	"sync/atomic"
	"testing"
)

// TestLocalEqualsPool: Local.MatMul gives MatMul's bits for every type and
// 1–9 tokens (the multi-token kernels, their padded tiles and the vector
// remainder), run alone and with one Local per thread inside ParallelWith
// on 1–3 threads, all products at once.
func TestLocalEqualsPool(t *testing.T) {
	rng := rand.New(rand.NewPCG(61, 62))
	ref := NewPool(1)
	defer ref.Close()
	type product struct {
		w    []byte
		x    []float32
		n    int
		want []float32
	}
	for _, typ := range allTypes {
		cols := colsFor(typ)[1]
		const rows = 37
		var ps []product
		for n := 1; n <= 9; n++ {
			pr := product{w: randRows(rng, typ, rows, cols), x: randX(rng, n*cols), n: n, want: make([]float32, n*rows)}
			if err := ref.MatMul(typ, pr.w, rows, cols, pr.x, n, pr.want); err != nil {
				t.Fatal(err)
			}
			ps = append(ps, pr)
		}
		var alone Local
		for _, pr := range ps {
			y := make([]float32, pr.n*rows)
			if err := alone.MatMul(typ, pr.w, rows, cols, pr.x, pr.n, y); err != nil {
				t.Fatal(err)
			}
			if !bitsEqual(y, pr.want) {
				t.Fatalf("%v n=%d: Local differs from Pool", typ, pr.n)
			}
		}
		for threads := 1; threads <= 3; threads++ {
			p := NewPool(threads)
			locals := make([]Local, threads)
			ys := make([][]float32, len(ps))
			errs := make([]error, len(ps))
			if err := p.ParallelWith(len(ps), func(th, i int) {
				ys[i] = make([]float32, ps[i].n*rows)
				errs[i] = locals[th].MatMul(typ, ps[i].w, rows, cols, ps[i].x, ps[i].n, ys[i])
			}); err != nil {
				t.Fatal(err)
			}
			p.Close()
			for i, pr := range ps {
				if errs[i] != nil {
					t.Fatal(errs[i])
				}
				if !bitsEqual(ys[i], pr.want) {
					t.Fatalf("%v n=%d threads=%d: Local in ParallelWith differs from Pool", typ, pr.n, threads)
				}
			}
		}
	}
}

// TestLocalChecksShapes: a Local refuses what MatMul refuses.
func TestLocalChecksShapes(t *testing.T) {
	var l Local
	w := make([]byte, 4*8)
	if err := l.MatMul(allTypes[0], w, 8, 1, make([]float32, 3), 2, make([]float32, 16)); err == nil {
		t.Fatal("x of the wrong length accepted")
	}
}

// TestParallelWithThreadIndex: every index runs once, on a thread index in
// [0, threads) that no other call holds at the same time, and a lone
// thread takes the indices in increasing order.
func TestParallelWithThreadIndex(t *testing.T) {
	for threads := 1; threads <= 3; threads++ {
		p := NewPool(threads)
		const n = 2000
		hits := make([]atomic.Int32, n)
		busy := make([]atomic.Bool, threads)
		last := -1
		ordered := true
		if err := p.ParallelWith(n, func(th, i int) {
			if th < 0 || th >= threads {
				t.Errorf("threads %d: thread index %d", threads, th)
				return
			}
			if !busy[th].CompareAndSwap(false, true) {
				t.Errorf("threads %d: thread index %d used by two calls at once", threads, th)
			}
			hits[i].Add(1)
			if threads == 1 {
				ordered = ordered && i == last+1
				last = i
			}
			busy[th].Store(false)
		}); err != nil {
			t.Fatal(err)
		}
		p.Close()
		for i := range hits {
			if h := hits[i].Load(); h != 1 {
				t.Fatalf("threads %d: index %d ran %d times", threads, i, h)
			}
		}
		if !ordered {
			t.Fatal("one thread did not take the indices in order")
		}
		if err := p.ParallelWith(1, func(int, int) {}); err != ErrClosed {
			t.Fatalf("after Close: %v", err)
		}
	}
}

// TestParallelWithPanicReachesCaller: as for Parallel, a helper's panic is
// re-raised on the caller after the call and the pool keeps working.
func TestParallelWithPanicReachesCaller(t *testing.T) {
	p := NewPool(3)
	defer p.Close()
	for round := 0; round < 20; round++ {
		var got any
		func() {
			defer func() { got = recover() }()
			_ = p.ParallelWith(64, func(_, i int) {
				if i == 63 {
					panic("fault")
				}
			})
		}()
		if got != "fault" {
			t.Fatalf("round %d: recovered %v, want the panic", round, got)
		}
		var n atomic.Int32
		if err := p.ParallelWith(64, func(int, int) { n.Add(1) }); err != nil || n.Load() != 64 {
			t.Fatalf("after a panic: %v, %d of 64 calls", err, n.Load())
		}
	}
}
