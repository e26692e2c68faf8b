package kernels

import (
	"errors"
	"fmt"
	"math"
	"math/rand/v2"
	"slices"
	"testing"
	"time"

	"github.com/pipe-engine/pipe/quant"
	"go.uber.org/goleak"
)

func TestMain(m *testing.M) {
	parallelMinBytes = 0 // split even the small test matrices over threads
	goleak.VerifyTestMain(m)
}

// colsFor returns test row lengths for t: odd block counts, and for the
// float types lengths that leave a tail after the 32-element chunks.
func colsFor(t quant.Type) []int {
	switch t.BlockSize() {
	case 1:
		return []int{1, 7, 31, 32, 33, 95, 256, 1000}
	case 32:
		return []int{32, 96, 224, 2880}
	}
	return []int{256, 768, 2048}
}

func sameActivation(t *testing.T, name string, got, want *Activation) {
	t.Helper()
	if got.typ != want.typ || got.cols != want.cols {
		t.Fatalf("%s: activation %v×%d, want %v×%d", name, got.typ, got.cols, want.typ, want.cols)
	}
	if !slices.Equal(got.qs, want.qs) || !slices.Equal(got.bsums, want.bsums) || !slices.Equal(got.h, want.h) {
		t.Fatalf("%s: %v activation quants differ from the reference", name, got.typ)
	}
	for _, p := range [][2][]float32{{got.d, want.d}, {got.s, want.s}, {got.f, want.f}} {
		if !bitsEqual(p[0], p[1]) {
			t.Fatalf("%s: %v activation scales differ from the reference", name, got.typ)
		}
	}
}

func bitsEqual(a, b []float32) bool {
	if len(a) != len(b) {
		return false
	}
	for i := range a {
		if math.Float32bits(a[i]) != math.Float32bits(b[i]) {
			return false
		}
	}
	return true
}

// TestImplementationsIdentical runs every implementation available on this
// machine over the same inputs (unaligned weight slices, odd row counts)
// and demands bit-identical activations and dot products.
func TestImplementationsIdentical(t *testing.T) {
	impls := implementations()
	t.Logf("implementations: %d (in use: %s)", len(impls), Implementation())
	rng := rand.New(rand.NewPCG(3, 4))
	for _, typ := range allTypes {
		for _, cols := range colsFor(typ) {
			rows := 9 // the multi-row kernels' groups of four and a tail
			w0 := randRows(rng, typ, rows, cols)
			x := randX(rng, cols)
			want := new(Activation)
			if err := want.quantizeWith(refImpl, typ, x); err != nil {
				t.Fatal(err)
			}
			rb := len(w0) / rows
			ref := make([]float32, rows)
			for r := range ref {
				ref[r] = refImpl.dots[typ](w0[r*rb:(r+1)*rb], want)
			}
			for _, m := range impls {
				a := new(Activation)
				if err := a.quantizeWith(m, typ, x); err != nil {
					t.Fatal(err)
				}
				sameActivation(t, m.name, a, want)
				for off := 0; off < 4; off++ {
					buf := make([]byte, len(w0)+off)
					w := buf[off:]
					copy(w, w0)
					if rf := m.rows[typ]; rf != nil {
						for n := 1; n <= rows; n += 1 + off {
							buf, y := guarded(n)
							rf(w, rb, a, y)
							checkGuards(t, buf, n)
							if !bitsEqual(y, ref[:n]) {
								t.Fatalf("%s %v cols %d offset %d: rows kernel on %d rows differs from the reference", m.name, typ, cols, off, n)
							}
						}
					}
					for r := 0; r < rows; r++ {
						got := m.dots[typ](w[r*rb:(r+1)*rb], a)
						if math.Float32bits(got) != math.Float32bits(ref[r]) {
							t.Fatalf("%s %v cols %d row %d offset %d: %g (%#x), reference %g (%#x)",
								m.name, typ, cols, r, off, got, math.Float32bits(got), ref[r], math.Float32bits(ref[r]))
						}
					}
				}
			}
		}
	}
}

// TestQuantizersIdentical hammers the activation quantizers with rounding
// ties, zero blocks and sign ties.
func TestQuantizersIdentical(t *testing.T) {
	rng := rand.New(rand.NewPCG(5, 6))
	for iter := 0; iter < 50; iter++ {
		x := randX(rng, 256*(1+rng.IntN(12)))
		for b := 0; b+256 <= len(x); b += 256 {
			switch rng.IntN(4) {
			case 0: // an all-zero Q8_K block
				clear(x[b : b+256])
			case 1: // the largest magnitude twice, negative first
				i, j := rng.IntN(128), 128+rng.IntN(128)
				x[b+i], x[b+j] = -50, 50
			case 2: // positive first
				i, j := rng.IntN(128), 128+rng.IntN(128)
				x[b+i], x[b+j] = 50, -50
			}
		}
		for _, m := range implementations() {
			for _, wt := range []quant.Type{quant.Q8_0, quant.Q4_K} {
				var got, want Activation
				if err := got.quantizeWith(m, wt, x); err != nil {
					t.Fatal(err)
				}
				if err := want.quantizeWith(refImpl, wt, x); err != nil {
					t.Fatal(err)
				}
				sameActivation(t, m.name, &got, &want)
			}
		}
	}
}

// TestRoundingHelpers pins the scalar helpers to llama.cpp's definitions.
func TestRoundingHelpers(t *testing.T) {
	cases := []struct {
		v    float32
		rf   int8  // roundf: ties away from zero
		near int32 // nearest_int: ties to even
	}{{0.5, 1, 0}, {1.5, 2, 2}, {2.5, 3, 2}, {-0.5, -1, 0}, {-2.5, -3, -2}, {126.5, 127, 126}, {0.49999997, 0, 0}}
	for _, c := range cases {
		if g := roundf(c.v); g != c.rf {
			t.Errorf("roundf(%v) = %d, want %d", c.v, g, c.rf)
		}
		if g := nearestInt(c.v); g != c.near {
			t.Errorf("nearestInt(%v) = %d, want %d", c.v, g, c.near)
		}
	}
	// fp16 round trip of every half value (NaNs aside) and RNE at a tie.
	for h := 0; h < 1<<16; h++ {
		if h&0x7c00 == 0x7c00 && h&0x3ff != 0 {
			continue
		}
		if g := quant.FP32ToFP16(quant.FP16ToFP32(uint16(h))); g != uint16(h) {
			t.Fatalf("fp16 round trip of %#x gave %#x", h, g)
		}
	}
	if g := quant.FP32ToFP16(1 + 1.0/2048); g != 0x3c00 { // tie between 1 and 1+2^-10 → even
		t.Errorf("quant.FP32ToFP16(1+2^-11) = %#x, want 0x3c00", g)
	}
	if g := quant.FP32ToFP16(1 + 3.0/2048); g != 0x3c02 {
		t.Errorf("quant.FP32ToFP16(1+3·2^-11) = %#x, want 0x3c02", g)
	}
	if g := quant.FP32ToBF16(math.Float32frombits(0x3f808000)); g != 0x3f80 {
		t.Errorf("quant.FP32ToBF16 tie = %#x, want 0x3f80", g)
	}
	if g := e8m0Half(127); g != 0.5 {
		t.Errorf("e8m0Half(127) = %v, want 0.5", g)
	}
}

const guard = 0x7fc0dead // a NaN pattern no kernel writes

// guarded returns y of n elements inside a buffer with guard words around.
func guarded(n int) (buf, y []float32) {
	buf = make([]float32, n+16)
	for i := range buf {
		buf[i] = math.Float32frombits(guard)
	}
	return buf, buf[8 : 8+n]
}

func checkGuards(t *testing.T, buf []float32, n int) {
	t.Helper()
	for i := range buf {
		if (i < 8 || i >= 8+n) && math.Float32bits(buf[i]) != guard {
			t.Fatalf("guard word %d overwritten", i)
		}
	}
}

// TestPoolThreadsIdentical: MatVec gives identical bits for 1..4 threads
// and equals the single-row kernel.
func TestPoolThreadsIdentical(t *testing.T) {
	rng := rand.New(rand.NewPCG(7, 8))
	pools := []*Pool{NewPool(1), NewPool(2), NewPool(3), NewPool(4)}
	defer func() {
		for _, p := range pools {
			p.Close()
		}
	}()
	for _, typ := range allTypes {
		cols := colsFor(typ)[1]
		for _, rows := range []int{1, 3, 97} {
			w := randRows(rng, typ, rows, cols)
			x := randX(rng, cols)
			a, err := QuantizeActivation(typ, x)
			if err != nil {
				t.Fatal(err)
			}
			rb := len(w) / rows
			var first []float32
			for _, p := range pools {
				buf, y := guarded(rows)
				if err := p.MatVec(typ, w, rows, cols, x, y); err != nil {
					t.Fatal(err)
				}
				checkGuards(t, buf, rows)
				if first == nil {
					first = slices.Clone(y)
					for r := 0; r < rows; r++ {
						d, err := Dot(typ, w[r*rb:(r+1)*rb], a)
						if err != nil {
							t.Fatal(err)
						}
						if math.Float32bits(d) != math.Float32bits(y[r]) {
							t.Fatalf("%v: MatVec row %d = %g, Dot = %g", typ, r, y[r], d)
						}
					}
					continue
				}
				if !bitsEqual(first, y) {
					t.Fatalf("%v rows %d: %d threads differ from 1 thread", typ, rows, p.Threads())
				}
				buf2, y2 := guarded(rows)
				if err := p.MatVecQ(typ, w, rows, cols, a, y2); err != nil {
					t.Fatal(err)
				}
				checkGuards(t, buf2, rows)
				if !bitsEqual(first, y2) {
					t.Fatalf("%v rows %d: MatVecQ differs from MatVec", typ, rows)
				}
			}
		}
	}
}

// TestMatMulEqualsMatVec: each output vector of MatMul is MatVec's.
func TestMatMulEqualsMatVec(t *testing.T) {
	rng := rand.New(rand.NewPCG(9, 10))
	p1, p2 := NewPool(1), NewPool(2)
	defer p1.Close()
	defer p2.Close()
	for _, typ := range allTypes {
		cols := colsFor(typ)[1]
		rows := 37
		w := randRows(rng, typ, rows, cols)
		for _, n := range []int{1, 2, 5} {
			x := randX(rng, n*cols)
			for _, p := range []*Pool{p1, p2} {
				buf, y := guarded(n * rows)
				if err := p.MatMul(typ, w, rows, cols, x, n, y); err != nil {
					t.Fatal(err)
				}
				checkGuards(t, buf, n*rows)
				for v := 0; v < n; v++ {
					yv := make([]float32, rows)
					if err := p1.MatVec(typ, w, rows, cols, x[v*cols:(v+1)*cols], yv); err != nil {
						t.Fatal(err)
					}
					if !bitsEqual(yv, y[v*rows:(v+1)*rows]) {
						t.Fatalf("%v n=%d threads=%d: MatMul vector %d differs from MatVec", typ, n, p.Threads(), v)
					}
				}
				acts := make([]*Activation, n)
				for v := range acts {
					var err error
					if acts[v], err = QuantizeActivation(typ, x[v*cols:(v+1)*cols]); err != nil {
						t.Fatal(err)
					}
				}
				yq := make([]float32, n*rows)
				if err := p.MatMulQ(typ, w, rows, cols, acts, yq); err != nil {
					t.Fatal(err)
				}
				if !bitsEqual(yq, y) {
					t.Fatalf("%v n=%d: MatMulQ differs from MatMul", typ, n)
				}
			}
		}
	}
}

// TestSharedQ8_0Activation: a Q8_0 activation prepared for one weight type
// serves every type whose rows take Q8_0 activations, with the same result
// as one prepared for that type.
func TestSharedQ8_0Activation(t *testing.T) {
	rng := rand.New(rand.NewPCG(27, 28))
	const rows, cols = 9, 320
	x := randX(rng, cols)
	types := []quant.Type{quant.Q8_0, quant.Q4_0, quant.Q5_0, quant.MXFP4}
	p := NewPool(2)
	defer p.Close()
	for _, prep := range types {
		a, err := QuantizeActivation(prep, x)
		if err != nil {
			t.Fatal(err)
		}
		for _, typ := range types {
			w := randRows(rng, typ, rows, cols)
			got, want := make([]float32, rows), make([]float32, rows)
			if err := p.MatVecQ(typ, w, rows, cols, a, got); err != nil {
				t.Fatal(err)
			}
			if err := p.MatVec(typ, w, rows, cols, x, want); err != nil {
				t.Fatal(err)
			}
			if !bitsEqual(got, want) {
				t.Fatalf("%v rows with an activation prepared for %v differ", typ, prep)
			}
		}
	}
}

func TestErrors(t *testing.T) {
	p := NewPool(2)
	w := make([]byte, 144*4)
	x := make([]float32, 256)
	y := make([]float32, 4)
	aK, _ := QuantizeActivation(quant.Q4_K, x)
	a0, _ := QuantizeActivation(quant.Q8_0, x)
	cases := []struct {
		name string
		err  error
		want error
	}{
		{"unsupported type", p.MatVec(quant.IQ2_XXS, w, 1, 256, x, y), ErrUnsupported},
		{"unknown type", p.MatVec(quant.Type(99), w, 1, 256, x, y), ErrUnsupported},
		{"short weights", p.MatVec(quant.Q4_K, w, 5, 256, x, y), ErrShape},
		{"cols not whole blocks", p.MatVec(quant.Q4_K, w, 1, 100, x[:100], y), ErrShape},
		{"x length", p.MatVec(quant.Q4_K, w, 4, 256, x[:255], y), ErrShape},
		{"short y", p.MatVec(quant.Q4_K, w, 4, 256, x, y[:3]), ErrShape},
		{"negative rows", p.MatVec(quant.Q4_K, w, -1, 256, x, y), ErrShape},
		{"activation type", p.MatVecQ(quant.Q4_K, w, 4, 256, a0, y), ErrShape},
		{"activation nil", p.MatVecQ(quant.Q4_K, w, 4, 256, nil, y), ErrShape},
		{"matmul x", p.MatMul(quant.Q4_K, w, 4, 256, x, 2, y), ErrShape},
		{"matmul y", p.MatMul(quant.Q4_K, w, 4, 256, append(x, x...), 2, y), ErrShape},
		{"matmulq y", p.MatMulQ(quant.Q4_K, w, 4, 256, []*Activation{aK, aK}, y), ErrShape},
	}
	_, err := QuantizeActivation(quant.Q8_0, x[:33])
	cases = append(cases, struct {
		name string
		err  error
		want error
	}{"activation length", err, ErrShape})
	_, err = Dot(quant.Q4_K, w[:143], aK)
	cases = append(cases, struct {
		name string
		err  error
		want error
	}{"dot row length", err, ErrShape})
	for _, c := range cases {
		if !errors.Is(c.err, c.want) {
			t.Errorf("%s: error %v, want %v", c.name, c.err, c.want)
		}
	}
	if err := p.MatVec(quant.Q4_K, w, 4, 256, x, y); err != nil {
		t.Fatalf("valid call: %v", err)
	}
	p.Close()
	p.Close()
	if err := p.MatVec(quant.Q4_K, w, 4, 256, x, y); !errors.Is(err, ErrClosed) {
		t.Errorf("after Close: %v, want ErrClosed", err)
	}
}

// TestPoolStress: back-to-back calls (helpers still spinning), calls after
// pauses longer than spinWait (helpers parked) and concurrent callers all
// give the single-thread result.
func TestPoolStress(t *testing.T) {
	rng := rand.New(rand.NewPCG(29, 30))
	const rows, cols = 64, 256
	w := randRows(rng, quant.Q4_K, rows, cols)
	x := randX(rng, cols)
	want := make([]float32, rows)
	p1 := NewPool(1)
	if err := p1.MatVec(quant.Q4_K, w, rows, cols, x, want); err != nil {
		t.Fatal(err)
	}
	p1.Close()
	p := NewPool(3)
	defer p.Close()
	iters := 200
	if testing.Short() {
		iters = 50
	}
	errc := make(chan error, 3)
	for g := 0; g < 3; g++ {
		go func(g int) {
			y := make([]float32, rows)
			for i := 0; i < iters; i++ {
				if (i+g)%7 == 0 {
					time.Sleep(2 * spinWait)
				}
				if err := p.MatVec(quant.Q4_K, w, rows, cols, x, y); err != nil {
					errc <- err
					return
				}
				if !bitsEqual(y, want) {
					errc <- errors.New("concurrent MatVec result differs")
					return
				}
			}
			errc <- nil
		}(g)
	}
	for g := 0; g < 3; g++ {
		if err := <-errc; err != nil {
			t.Fatal(err)
		}
	}
}

// TestMXFP4EveryExponent: every MXFP4 block exponent (0-255, block scales
// 2^-128 to 2^127) in every block position of a three-block row (a pair
// and a single block for the multi-row kernels), the row's other blocks
// zero, against activation blocks of very different magnitudes: the
// products d·2^(e-128) run from zero through subnormal to infinite. Each
// implementation's single-row and multi-row kernels equal the reference
// bit for bit (two NaNs count as equal).
func TestMXFP4EveryExponent(t *testing.T) {
	const cols, nb = 96, 3
	const rows = 256 * nb
	rng := rand.New(rand.NewPCG(5, 6))
	w := randRows(rng, quant.MXFP4, rows, cols)
	rb := len(w) / rows
	for r := 0; r < rows; r++ {
		for b := 0; b < nb; b++ {
			blk := w[r*rb+b*17 : r*rb+(b+1)*17]
			if b == r/256 {
				blk[0] = byte(r)
				continue
			}
			blk[0] = 127
			clear(blk[1:])
		}
	}
	x := make([]float32, cols)
	for i := range x {
		x[i] = float32(rng.NormFloat64()) * []float32{1e-5, 1, 1e4}[i/32]
	}
	ref := new(Activation)
	if err := ref.quantizeWith(refImpl, quant.MXFP4, x); err != nil {
		t.Fatal(err)
	}
	want := make([]float32, rows)
	var sub, inf int
	for r := range want {
		want[r] = refImpl.dots[quant.MXFP4](w[r*rb:(r+1)*rb], ref)
		v := math.Abs(float64(want[r]))
		sub += b2i(v > 0 && v < 0x1p-126)
		inf += b2i(math.IsInf(v, 0) || v != v)
	}
	if sub == 0 || inf == 0 {
		t.Fatalf("the rows reach %d subnormal and %d infinite results: the test no longer covers the scale's range", sub, inf)
	}
	for _, m := range implementations() {
		a := new(Activation)
		if err := a.quantizeWith(m, quant.MXFP4, x); err != nil {
			t.Fatal(err)
		}
		got := make([]float32, rows)
		for r := range got {
			got[r] = m.dots[quant.MXFP4](w[r*rb:(r+1)*rb], a)
		}
		if !bitsEqualNaN(got, want) {
			t.Fatalf("%s: the single-row dot differs from the reference", m.name)
		}
		if rf := m.rows[quant.MXFP4]; rf != nil {
			rf(w, rb, a, got)
			if !bitsEqualNaN(got, want) {
				t.Fatalf("%s: the rows kernel differs from the reference", m.name)
			}
		}
	}
}

func b2i(b bool) int {
	if b {
		return 1
	}
	return 0
}

// implementations lists every implementation usable on this machine, the
// reference first (for tests and benchmarks).
func implementations() []*implementation {
	return append([]*implementation{refImpl}, nativeImpls()...)
}

// Dot returns row · a for one row of type t (len(row) must be exactly one
// row of a.Cols() elements).
func Dot(t quant.Type, row []byte, a *Activation) (float32, error) {
	if a == nil {
		return 0, fmt.Errorf("%w: nil activation", ErrShape)
	}
	rb, err := rowBytes(t, row, 1, a.cols)
	if err != nil {
		return 0, err
	}
	if err := checkAct(t, a.cols, a); err != nil {
		return 0, err
	}
	if len(row) != rb {
		return 0, fmt.Errorf("%w: row has %d bytes, want %d", ErrShape, len(row), rb)
	}
	return impl.dots[t](row, a), nil
}
