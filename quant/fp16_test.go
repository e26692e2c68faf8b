package quant

import (
	"math"
	"math/rand"
	"testing"
)

// ggmlFP16ToFP32 is a literal port of ggml_compute_fp16_to_fp32 (float ops).
func ggmlFP16ToFP32(h uint16) float32 {
	w := uint32(h) << 16
	sign := w & 0x80000000
	twoW := w + w
	const expOffset = uint32(0xE0) << 23
	expScale := float32(0x1.0p-112)
	normalized := math.Float32frombits(twoW>>4+expOffset) * expScale
	const magicMask = uint32(126) << 23
	denormalized := math.Float32frombits(twoW>>17|magicMask) - 0.5
	var r uint32
	if twoW < 1<<27 {
		r = sign | math.Float32bits(denormalized)
	} else {
		r = sign | math.Float32bits(normalized)
	}
	return math.Float32frombits(r)
}

// refFP32ToFP16 is an independent round-to-nearest-even conversion done with
// float64 arithmetic, used to check FP32ToFP16.
func refFP32ToFP16(f float32) uint16 {
	sign := uint16(math.Float32bits(f)>>16) & 0x8000
	a := math.Abs(float64(f))
	switch {
	case math.IsNaN(a):
		return sign | 0x7e00
	case a >= 65520: // halfway between 65504 and 2^16 rounds (to even) up to Inf
		return sign | 0x7c00
	case a < 0x1p-14: // subnormal range: units of 2^-24
		return sign | uint16(math.RoundToEven(a*0x1p24))
	}
	fr, e := math.Frexp(a) // a = fr * 2^e, fr in [0.5, 1)
	e--                    // a = (2fr) * 2^e
	q := math.RoundToEven(math.Ldexp(a, 10-e))
	if q == 2048 {
		q, e = 1024, e+1
	}
	_ = fr
	return sign | uint16(e+15)<<10 | uint16(q-1024)
}

func TestFP16ToFP32Exhaustive(t *testing.T) {
	for h := 0; h < 1<<16; h++ {
		got := FP16ToFP32(uint16(h))
		want := ggmlFP16ToFP32(uint16(h))
		gb, wb := math.Float32bits(got), math.Float32bits(want)
		if math.IsNaN(float64(want)) {
			// ggml's multiply quiets a signalling NaN; we do the same explicitly.
			wb |= 0x00400000
		}
		if gb != wb {
			t.Fatalf("FP16ToFP32(%#04x) = %#08x, ggml %#08x", h, gb, wb)
		}
		if !math.IsNaN(float64(got)) {
			if back := FP32ToFP16(got); back != uint16(h) {
				t.Fatalf("FP32ToFP16(FP16ToFP32(%#04x)) = %#04x", h, back)
			}
		} else if back := FP32ToFP16(got); back != uint16(h)&0x8000|0x7e00 {
			t.Fatalf("NaN %#04x converts back to %#04x, want canonical 0x7e00", h, back)
		}
	}
}

func TestFP32ToFP16(t *testing.T) {
	check := func(f float32) {
		t.Helper()
		if got, want := FP32ToFP16(f), refFP32ToFP16(f); got != want {
			t.Fatalf("FP32ToFP16(%g = %#08x) = %#04x, want %#04x", f, math.Float32bits(f), got, want)
		}
	}
	special := []float32{0, float32(math.Copysign(0, -1)), 1, -1, 65504, 65519.996, 65520, 65536, 1e10,
		float32(math.Inf(1)), float32(math.Inf(-1)), float32(math.NaN()), 0x1p-24, 0x1p-25, 0x1.8p-25, 0x1p-26,
		0x1p-14, 0x1.ffcp-15, 1e-30, math.SmallestNonzeroFloat32, math.MaxFloat32, 0.1, 1.0 / 3}
	for _, f := range special {
		check(f)
		check(-f)
	}
	// Every fp16 value, the midpoints between neighbours (ties go to even)
	// and one float32 ulp either side of each midpoint.
	for h := uint16(0); h < 0x7c00; h++ {
		lo, hi := float64(FP16ToFP32(h)), float64(FP16ToFP32(h+1))
		mid := float32((lo + hi) / 2)
		for _, f := range []float32{float32(lo), mid, math.Nextafter32(mid, 0), math.Nextafter32(mid, 1e9)} {
			check(f)
			check(-f)
		}
	}
	rng := rand.New(rand.NewSource(1))
	nRandom := 1 << 20
	if testing.Short() || raceEnabled {
		nRandom = 1 << 14
	}
	for i := 0; i < nRandom; i++ {
		check(math.Float32frombits(rng.Uint32()))
	}
	// Signed NaNs with payloads become 0x7e00 with the sign.
	if got := FP32ToFP16(math.Float32frombits(0xffc12345)); got != 0xfe00 {
		t.Fatalf("negative NaN -> %#04x", got)
	}
}

func TestBF16(t *testing.T) {
	for h := 0; h < 1<<16; h++ {
		f := BF16ToFP32(uint16(h))
		if math.Float32bits(f) != uint32(h)<<16 {
			t.Fatalf("BF16ToFP32(%#04x) = %#08x", h, math.Float32bits(f))
		}
		if !math.IsNaN(float64(f)) && FP32ToBF16(f) != uint16(h) {
			t.Fatalf("BF16 round trip of %#04x gave %#04x", h, FP32ToBF16(f))
		}
	}
	cases := []struct {
		in   uint32
		want uint16
	}{
		{0x3f800000, 0x3f80}, // 1
		{0x3f808000, 0x3f80}, // tie, even stays
		{0x3f818000, 0x3f82}, // tie, odd rounds up
		{0x3f808001, 0x3f81}, // above tie
		{0x3f807fff, 0x3f80}, // below tie
		{0x7f7fffff, 0x7f80}, // max float rounds to Inf
		{0x7f800000, 0x7f80}, // Inf
		{0xff800000, 0xff80}, // -Inf
		{0x7f800001, 0x7fc0}, // signalling NaN: truncated, forced quiet
		{0xffc00000, 0xffc0}, // negative quiet NaN
		{0x00000001, 0x0000}, // tiny subnormal rounds to zero
		{0x80008000, 0x8000}, // negative subnormal tie to even
	}
	for _, c := range cases {
		if got := FP32ToBF16(math.Float32frombits(c.in)); got != c.want {
			t.Errorf("FP32ToBF16(%#08x) = %#04x, want %#04x", c.in, got, c.want)
		}
	}
}

func TestE8M0ToFP32Half(t *testing.T) {
	for e := 0; e < 256; e++ {
		want := math.Ldexp(1, e-128)
		got := E8M0ToFP32Half(uint8(e))
		if e == 255 {
			want = math.Ldexp(1, 127)
		}
		if float64(got) != want {
			t.Fatalf("E8M0ToFP32Half(%d) = %g, want %g", e, got, want)
		}
	}
}
