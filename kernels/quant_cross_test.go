package kernels

import (
	"encoding/binary"
	"math"
	"math/rand/v2"
	"testing"

	"github.com/pipe-engine/pipe/quant"
)

// Cross-checks against package quant, whose quantizers and dequantizers are
// tested bit for bit against llama.cpp's golden vectors.

func TestHalfConversionsMatchQuant(t *testing.T) {
	for h := 0; h < 1<<16; h++ {
		a, b := quant.FP16ToFP32(uint16(h)), quant.FP16ToFP32(uint16(h))
		if math.Float32bits(a) != math.Float32bits(b) && !(a != a && b != b) {
			t.Fatalf("quant.FP16ToFP32(%#x) = %#x, quant %#x", h, math.Float32bits(a), math.Float32bits(b))
		}
	}
	rng := rand.New(rand.NewPCG(21, 22))
	for i := 0; i < 200000; i++ {
		f := math.Float32frombits(rng.Uint32())
		if f != f {
			continue
		}
		if a, b := quant.FP32ToFP16(f), quant.FP32ToFP16(f); a != b {
			t.Fatalf("quant.FP32ToFP16(%g) = %#x, quant %#x", f, a, b)
		}
		if a, b := quant.FP32ToBF16(f), quant.FP32ToBF16(f); a != b {
			t.Fatalf("quant.FP32ToBF16(%g) = %#x, quant %#x", f, a, b)
		}
	}
	for e := 0; e < 256; e++ {
		if a, b := e8m0Half(uint8(e)), quant.E8M0ToFP32Half(uint8(e)); a != b {
			t.Fatalf("e8m0Half(%d) = %g, quant %g", e, a, b)
		}
	}
}

// TestActivationMatchesQuantQuantize: the Q8_0 (and Q8_K where quant has
// it) activation of every implementation equals quant.Quantize's bytes.
func TestActivationMatchesQuantQuantize(t *testing.T) {
	rng := rand.New(rand.NewPCG(23, 24))
	x := randX(rng, 2048)
	for _, m := range implementations() {
		a := new(Activation)
		if err := a.quantizeWith(m, quant.Q8_0, x); err != nil {
			t.Fatal(err)
		}
		want := make([]byte, 2048/32*34)
		if err := quant.Quantize(quant.Q8_0, x, want); err != nil {
			t.Fatal(err)
		}
		for b := 0; b < 2048/32; b++ {
			blk := want[b*34:]
			if d := quant.FP16ToFP32(binary.LittleEndian.Uint16(blk)); math.Float32bits(d) != math.Float32bits(a.d[b]) {
				t.Fatalf("%s: Q8_0 block %d scale %g, quant %g", m.name, b, a.d[b], d)
			}
			for j := 0; j < 32; j++ {
				if int8(blk[2+j]) != a.qs[b*32+j] {
					t.Fatalf("%s: Q8_0 block %d quant %d: %d, quant %d", m.name, b, j, a.qs[b*32+j], int8(blk[2+j]))
				}
			}
		}
		if !quant.CanQuantize(quant.Q8_K) {
			continue
		}
		if err := a.quantizeWith(m, quant.Q4_K, x); err != nil {
			t.Fatal(err)
		}
		wantK := make([]byte, 2048/256*292)
		if err := quant.Quantize(quant.Q8_K, x, wantK); err != nil {
			t.Fatal(err)
		}
		for b := 0; b < 2048/256; b++ {
			blk := wantK[b*292:]
			if d := math.Float32frombits(binary.LittleEndian.Uint32(blk)); math.Float32bits(d) != math.Float32bits(a.d[b]) {
				t.Fatalf("%s: Q8_K block %d scale %g, quant %g", m.name, b, a.d[b], d)
			}
			for j := 0; j < 256; j++ {
				if int8(blk[4+j]) != a.qs[b*256+j] {
					t.Fatalf("%s: Q8_K block %d quant %d differs", m.name, b, j)
				}
			}
			for j := 0; j < 16; j++ {
				if int16(binary.LittleEndian.Uint16(blk[260+2*j:])) != a.bsums[b*16+j] {
					t.Fatalf("%s: Q8_K block %d bsum %d differs", m.name, b, j)
				}
			}
		}
	}
}

// TestDotMatchesDequantized: for weights made by quant.Quantize (llama.cpp's
// quantizers), every kernel's dot equals Σ dequant(w)·dequant(x_q) computed
// in float64 from quant.Dequantize, within 1e-5 of Σ|w·x| (the float32
// rounding of the dequantized values and of the block terms). This checks
// the block layouts against an independent decoder.
func TestDotMatchesDequantized(t *testing.T) {
	rng := rand.New(rand.NewPCG(25, 26))
	const rows, cols = 3, 512
	for _, typ := range allTypes {
		if !quant.CanQuantize(typ) || !quant.CanDequantize(typ) {
			t.Logf("%v: quant cannot quantize/dequantize it, skipped", typ)
			continue
		}
		src := make([]float32, rows*cols)
		for i := range src {
			src[i] = float32(rng.NormFloat64()) * 0.05
		}
		rb, _ := typ.RowSize(cols)
		w := make([]byte, int(rb)*rows)
		if err := quant.Quantize(typ, src, w); err != nil {
			t.Fatal(err)
		}
		wf := make([]float32, rows*cols)
		if err := quant.Dequantize(typ, w, wf); err != nil {
			t.Fatal(err)
		}
		x := randX(rng, cols)
		for _, m := range implementations() {
			a := new(Activation)
			if err := a.quantizeWith(m, typ, x); err != nil {
				t.Fatal(err)
			}
			xf := dequantActivation(a)
			for r := 0; r < rows; r++ {
				got := m.dots[typ](w[r*int(rb):(r+1)*int(rb)], a)
				var want, mag float64
				for i := 0; i < cols; i++ {
					p := float64(wf[r*cols+i]) * float64(xf[i])
					want += p
					mag += math.Abs(p)
				}
				tol := 1e-5 * mag
				if a.typ == quant.Q8_1 {
					// llama.cpp stores s = Σq·d rounded to fp16: the
					// minimum term m·s carries up to 2^-11 relative error.
					for b := 0; b < cols/32; b++ {
						m := f16(w[r*int(rb)+b*typ.TypeSize()+2:])
						tol += math.Ldexp(math.Abs(float64(m)*float64(a.s[b])), -11)
					}
				}
				if diff := math.Abs(float64(got) - want); diff > tol {
					t.Errorf("%s %v row %d: dot %g, dequantized %g (diff %g, Σ|w·x| %g)", m.name, typ, r, got, want, diff, mag)
				}
			}
		}
	}
}

// dequantActivation returns the activation values the kernels see.
func dequantActivation(a *Activation) []float32 {
	out := make([]float32, a.cols)
	switch a.typ {
	case quant.Q8_0, quant.Q8_1:
		for i := range out {
			out[i] = a.d[i/32] * float32(a.qs[i])
		}
	case quant.Q8_K:
		for i := range out {
			out[i] = a.d[i/256] * float32(a.qs[i])
		}
	case quant.F16:
		for i := range out {
			out[i] = quant.FP16ToFP32(a.h[i])
		}
	case quant.BF16:
		for i := range out {
			out[i] = quant.BF16ToFP32(a.h[i])
		}
	case quant.F32:
		copy(out, a.f)
	}
	return out
}
