package kernels

import (
	"errors"
	"fmt"
	"math/rand/v2"
	"testing"

	"github.com/pipe-engine/pipe/quant"
)

// TestMatVecsEqualsMatVecQ: a batch of products of every type (odd row
// counts, unaligned weight slices, a shared activation, a product of one row)
// gives each product exactly MatVecQ's bits, for every implementation and
// 1..4 threads, and writes nothing outside the outputs.
func TestMatVecsEqualsMatVecQ(t *testing.T) {
	rng := rand.New(rand.NewPCG(51, 52))
	var ps []Product
	for i, typ := range allTypes {
		cols := colsFor(typ)[1]
		rows := []int{1, 3, 97, 130}[i%4]
		w := randRows(rng, typ, rows, cols)
		w = append(make([]byte, 1+i%3), w...)[1+i%3:] // unaligned start
		a, err := QuantizeActivation(typ, randX(rng, cols))
		if err != nil {
			t.Fatal(err)
		}
		ps = append(ps, Product{Type: typ, W: w, Rows: rows, Cols: cols, A: a})
		// a second matrix sharing the activation (gate/up, q/k)
		w2 := randRows(rng, typ, rows+2, cols)
		ps = append(ps, Product{Type: typ, W: w2, Rows: rows + 2, Cols: cols, A: a})
	}
	for _, m := range implementations() {
		saved := impl
		impl = m
		for _, threads := range []int{1, 2, 3, 4} {
			t.Run(fmt.Sprintf("%s/t%d", m.name, threads), func(t *testing.T) {
				p := NewPool(threads)
				defer p.Close()
				want := make([][]float32, len(ps))
				for i, pr := range ps {
					want[i] = make([]float32, pr.Rows)
					if err := p.MatVecQ(pr.Type, pr.W, pr.Rows, pr.Cols, pr.A, want[i]); err != nil {
						t.Fatal(err)
					}
				}
				bufs := make([][]float32, len(ps))
				batch := append([]Product(nil), ps...)
				for i := range batch {
					bufs[i], batch[i].Y = guarded(batch[i].Rows)
				}
				for round := 0; round < 2; round++ { // the pool's scratch is reused
					if err := p.MatVecs(batch); err != nil {
						t.Fatal(err)
					}
					for i, pr := range batch {
						checkGuards(t, bufs[i], pr.Rows)
						if !bitsEqual(pr.Y, want[i]) {
							t.Fatalf("product %d (%v, %d rows): MatVecs differs from MatVecQ", i, pr.Type, pr.Rows)
						}
					}
				}
			})
		}
		impl = saved
	}
}

func TestMatVecsErrors(t *testing.T) {
	p := NewPool(2)
	x := make([]float32, 256)
	a, err := QuantizeActivation(quant.Q4_K, x)
	if err != nil {
		t.Fatal(err)
	}
	w := make([]byte, 4*144)
	ok := Product{Type: quant.Q4_K, W: w, Rows: 4, Cols: 256, A: a, Y: make([]float32, 4)}
	if err := p.MatVecs(nil); err != nil {
		t.Fatalf("empty batch: %v", err)
	}
	for name, bad := range map[string]Product{
		"short weights":  {Type: quant.Q4_K, W: w[:3*144], Rows: 4, Cols: 256, A: a, Y: make([]float32, 4)},
		"short y":        {Type: quant.Q4_K, W: w, Rows: 4, Cols: 256, A: a, Y: make([]float32, 3)},
		"nil activation": {Type: quant.Q4_K, W: w, Rows: 4, Cols: 256, Y: make([]float32, 4)},
		"wrong act type": {Type: quant.Q8_0, W: make([]byte, 4*34*8), Rows: 4, Cols: 256, A: a, Y: make([]float32, 4)},
	} {
		err := p.MatVecs([]Product{ok, bad})
		if !errors.Is(err, ErrShape) {
			t.Errorf("%s: got %v, want ErrShape", name, err)
		}
	}
	p.Close()
	if err := p.MatVecs([]Product{ok}); !errors.Is(err, ErrClosed) {
		t.Fatalf("after Close: %v", err)
	}
}

// BenchmarkExpertsBatched: the gate and up projections of 8 Qwen3-30B-A3B
// experts (Q4_K, 768×2048 each) against one input, as 16 MatVecQ calls
// ("calls") or one MatVecs dispatch ("batched"); bytes are the 16 matrices.
func BenchmarkExpertsBatched(b *testing.B) {
	const experts, rows, cols = 8, 768, 2048
	typ := quant.Q4_K
	cold := &coldSet{t: typ, rows: rows, cols: cols}
	defer cold.free()
	a, err := QuantizeActivation(typ, randX(rand.New(rand.NewPCG(53, 54)), cols))
	if err != nil {
		b.Fatal(err)
	}
	y := make([]float32, 2*experts*rows)
	for _, mode := range []string{"calls", "batched"} {
		for _, threads := range []int{1, 2} {
			b.Run(fmt.Sprintf("%s/t%d", mode, threads), func(b *testing.B) {
				w, size, ncopies := cold.get(b)
				p := NewPool(threads)
				defer p.Close()
				ps := make([]Product, 2*experts)
				b.SetBytes(int64(len(ps) * size))
				b.ResetTimer()
				cpu0 := processCPUSeconds()
				c := 0
				for i := 0; i < b.N; i++ {
					for k := range ps {
						ps[k] = Product{Type: typ, W: w[c*size : (c+1)*size], Rows: rows, Cols: cols, A: a, Y: y[k*rows : (k+1)*rows]}
						c = (c + 1) % ncopies
					}
					if mode == "batched" {
						if err := p.MatVecs(ps); err != nil {
							b.Fatal(err)
						}
						continue
					}
					for _, pr := range ps {
						if err := p.MatVecQ(pr.Type, pr.W, pr.Rows, pr.Cols, pr.A, pr.Y); err != nil {
							b.Fatal(err)
						}
					}
				}
				cpuMetric(b, int64(len(ps)*size), cpu0)
			})
		}
	}
}
