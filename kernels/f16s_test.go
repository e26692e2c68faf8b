package kernels

import (
	"math"
	"math/rand/v2"
	"slices"
	"testing"
)

// TestFP32ToFP16sIdentical: FP32ToFP16s equals quant.FP32ToFP16 on every
// value, over float32 bit patterns spread across the whole range (NaNs of
// both signs and any payload, infinities, F16 subnormals and overflow,
// ties) at lengths around the vector width.
func TestFP32ToFP16sIdentical(t *testing.T) {
	var src []float32
	for b := uint64(0); b < 1<<32; b += 1021 {
		src = append(src, math.Float32frombits(uint32(b)))
	}
	for _, b := range []uint32{0x7fc00000, 0xffc00001, 0x7f800001, 0x477ff000, 0x477fefff, 0x33000000, 0x33000001, 0x387fe000} {
		src = append(src, math.Float32frombits(b))
	}
	rng := rand.New(rand.NewPCG(27, 16))
	rng.Shuffle(len(src), func(i, j int) { src[i], src[j] = src[j], src[i] })
	want := make([]uint16, len(src))
	refFP32ToFP16s(want, src)
	for _, n := range []int{0, 1, 7, 8, 9, 24, 1000, len(src)} {
		got := make([]uint16, n)
		FP32ToFP16s(got, src)
		if !slices.Equal(got, want[:n]) {
			for i := range got {
				if got[i] != want[i] {
					t.Fatalf("n=%d: %g (%#x): FP32ToFP16s %#x, FP32ToFP16 %#x", n, src[i], math.Float32bits(src[i]), got[i], want[i])
				}
			}
		}
	}
}

// BenchmarkFP32ToFP16s: one decode token's K and V rows of a Qwen3-30B-A3B
// layer (2 × 4 heads of 128).
func BenchmarkFP32ToFP16s(b *testing.B) {
	src, dst := make([]float32, 1024), make([]uint16, 1024)
	for i := range src {
		src[i] = float32(i%97) * 0.37
	}
	for _, bc := range []struct {
		name string
		f    func([]uint16, []float32)
	}{{"kernel", FP32ToFP16s}, {"scalar", refFP32ToFP16s}} {
		b.Run(bc.name, func(b *testing.B) {
			for range b.N {
				bc.f(dst, src)
			}
		})
	}
}
