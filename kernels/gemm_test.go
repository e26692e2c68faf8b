package kernels

import (
	"fmt"
	"math"
	"math/rand/v2"
	"slices"
	"testing"

	"github.com/pipe-engine/pipe/quant"
)

// gemmSets are the reference kernels and every native set usable here.
func gemmSets() []gemmSet {
	return append([]gemmSet{{"purego", refImpl.gemm}}, nativeGEMMSets...)
}

// gemmTypes are the weight types with a multi-token kernel in some set.
func gemmTypes() []quant.Type {
	var ts []quant.Type
	for _, typ := range allTypes {
		for _, s := range gemmSets() {
			if s.kernels[typ] != nil {
				ts = append(ts, typ)
				break
			}
		}
	}
	return ts
}

// TestGEMMKernelsIdentical calls every multi-token kernel (each tile size)
// directly (unaligned weights, odd row counts, an output stride wider than
// the rows) and demands each (row, token) equal the reference dot product.
func TestGEMMKernelsIdentical(t *testing.T) {
	rng := rand.New(rand.NewPCG(41, 42))
	for _, set := range gemmSets() {
		for _, typ := range gemmTypes() {
			for k := set.kernels[typ]; k != nil; k = k.next {
				for _, cols := range colsFor(typ) {
					for _, rows := range []int{1, 3, 37} {
						t.Run(fmt.Sprintf("%s/%v/x%d/%dx%d", set.name, typ, k.tile, rows, cols), func(t *testing.T) {
							checkGEMMKernel(t, rng, impl, k, typ, rows, cols)
						})
					}
				}
			}
		}
	}
}

func checkGEMMKernel(t *testing.T, rng *rand.Rand, m *implementation, k *gemmKernel, typ quant.Type, rows, cols int) {
	w0 := randRows(rng, typ, rows, cols)
	rb := len(w0) / rows
	acts := make([]*Activation, k.tile)
	for i := range acts {
		acts[i] = new(Activation)
		if err := acts[i].quantizeWith(m, typ, randX(rng, cols)); err != nil {
			t.Fatal(err)
		}
	}
	var pk []byte
	if k.pack != nil {
		pk = make([]byte, k.packBytes(cols))
		k.pack(acts, pk)
	}
	ys := rows + 3
	for off := 0; off < 3; off++ {
		w := make([]byte, len(w0)+off)[off:]
		copy(w, w0)
		n := (k.tile-1)*ys + rows
		buf, y := guarded(n)
		k.run(w, rb, rows, acts, pk, y, ys)
		checkGuards(t, buf, n)
		for v, a := range acts {
			for r := 0; r < rows; r++ {
				want := refImpl.dots[typ](w0[r*rb:(r+1)*rb], a)
				if got := y[v*ys+r]; math.Float32bits(got) != math.Float32bits(want) {
					t.Fatalf("offset %d token %d row %d: %g (%#x), reference %g (%#x)", off, v, r, got, math.Float32bits(got), want, math.Float32bits(want))
				}
			}
			for r := rows; r < ys && v < k.tile-1; r++ {
				if math.Float32bits(y[v*ys+r]) != guard {
					t.Fatalf("token %d: wrote element %d past the %d rows", v, r, rows)
				}
			}
		}
	}
}

// TestMatMulGEMMEqualsMatVec runs MatMul and MatMulQ through a Pool with
// every implementation, and with each native kernel set on its own (the
// AVX2 tiles as an AVX2-only machine chains them), for batch sizes 1…n
// (whole tiles and tails), odd row counts, matrices larger than one row
// chunk and 1–3 threads, and demands every output vector equal MatVec's.
func TestMatMulGEMMEqualsMatVec(t *testing.T) {
	rng := rand.New(rand.NewPCG(43, 44))
	saved := impl
	defer func() { impl = saved }()
	pools := []*Pool{NewPool(1), NewPool(2), NewPool(3)}
	defer func() {
		for _, p := range pools {
			p.Close()
		}
	}()
	ns := []int{1, 2, 3, 4, 5, 6, 7, 8, 9, 11, 13, 17}
	if testing.Short() {
		ns = []int{1, 3, 4, 5, 9, 13}
	}
	for _, m := range gemmImpls() {
		impl = m
		for _, typ := range gemmTypes() {
			cs := colsFor(typ)
			for _, sh := range [][2]int{{5, cs[0]}, {37, cs[1]}, {100, cs[len(cs)-1]}} {
				rows, cols := sh[0], sh[1]
				w := randRows(rng, typ, rows, cols)
				for _, n := range ns {
					x := randX(rng, n*cols)
					want := make([]float32, n*rows)
					for v := 0; v < n; v++ {
						if err := pools[0].MatVec(typ, w, rows, cols, x[v*cols:(v+1)*cols], want[v*rows:(v+1)*rows]); err != nil {
							t.Fatal(err)
						}
					}
					acts := make([]*Activation, n)
					for v := range acts {
						var err error
						if acts[v], err = QuantizeActivation(typ, x[v*cols:(v+1)*cols]); err != nil {
							t.Fatal(err)
						}
					}
					for _, p := range pools {
						buf, y := guarded(n * rows)
						if err := p.MatMul(typ, w, rows, cols, x, n, y); err != nil {
							t.Fatal(err)
						}
						checkGuards(t, buf, n*rows)
						if !bitsEqual(y, want) {
							t.Fatalf("%s %v %dx%d n=%d threads=%d: MatMul differs from MatVec", m.name, typ, rows, cols, n, p.Threads())
						}
						yq := make([]float32, n*rows)
						if err := p.MatMulQ(typ, w, rows, cols, acts, yq); err != nil {
							t.Fatal(err)
						}
						if !slices.Equal(yq, y) && !bitsEqual(yq, y) {
							t.Fatalf("%s %v n=%d threads=%d: MatMulQ differs from MatMul", m.name, typ, n, p.Threads())
						}
					}
				}
			}
		}
	}
}

// gemmImpls are the implementations plus, for each native kernel set, the
// best implementation with only that set's multi-token kernels.
func gemmImpls() []*implementation {
	ms := implementations()
	for _, set := range nativeGEMMSets {
		m := *bestImpl()
		m.name += "+" + set.name
		m.gemm = set.kernels
		ms = append(ms, &m)
	}
	return ms
}

// TestNativeGEMMNotReference: an accelerated implementation never runs the
// pure-Go multi-token kernels (slower than its vector kernels).
func TestNativeGEMMNotReference(t *testing.T) {
	for _, m := range implementations() {
		if m == refImpl {
			continue
		}
		for typ, k := range m.gemm {
			if k == refImpl.gemm[typ] {
				t.Errorf("%s uses the pure-Go multi-token kernel for %v", m.name, typ)
			}
		}
	}
}

// TestMatMulQAllocationFree: a multi-token product through each native
// set's GEMM kernels (8 tokens: the 8-token tile) allocates nothing per
// call. The AVX-512 pair kernels once got a 384-byte scratch array from
// their Go wrapper, which escaped to the heap on every call because the
// kernel was called through a func value; it is now the assembly's own
// stack frame.
func TestMatMulQAllocationFree(t *testing.T) {
	const rows, cols, n = 256, 2048, 8
	saved := impl
	defer func() { impl = saved }()
	for _, m := range nativeImpls() {
		for _, typ := range []quant.Type{quant.Q4_K, quant.Q6_K, quant.Q8_0, quant.MXFP4} {
			if m.gemm[typ] == nil {
				continue
			}
			impl = m
			w := randRows(rand.New(rand.NewPCG(1, 2)), typ, rows, cols)
			x := randX(rand.New(rand.NewPCG(3, 4)), n*cols)
			acts := make([]*Activation, n)
			for i := range acts {
				a, err := QuantizeActivation(typ, x[i*cols:(i+1)*cols])
				if err != nil {
					t.Fatal(err)
				}
				acts[i] = a
			}
			y := make([]float32, n*rows)
			p := NewPool(2)
			var err error
			allocs := testing.AllocsPerRun(10, func() { err = p.MatMulQ(typ, w, rows, cols, acts, y) })
			p.Close()
			if err != nil {
				t.Fatal(err)
			}
			if allocs != 0 {
				t.Errorf("%s %v: %.1f allocations per MatMulQ of %d tokens, want 0", m.name, typ, allocs, n)
			}
		}
	}
}
