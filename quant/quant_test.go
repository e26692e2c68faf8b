package quant

import (
	"encoding/binary"
	"errors"
	"math"
	"math/rand"
	"testing"
)

var allDequantTypes = []Type{F32, F16, BF16, Q4_0, Q4_1, Q5_0, Q5_1, Q8_0, Q2_K, Q3_K, Q4_K, Q5_K, Q6_K, Q8_K, MXFP4}

func gaussian(rng *rand.Rand, n int, sigma float64) []float32 {
	x := make([]float32, n)
	for i := range x {
		x[i] = float32(rng.NormFloat64() * sigma)
	}
	return x
}

func TestCanQuantizeDequantize(t *testing.T) {
	for _, typ := range allDequantTypes {
		if !CanDequantize(typ) || !CanQuantize(typ) {
			t.Errorf("%s: CanDequantize=%v CanQuantize=%v, want both", typ, CanDequantize(typ), CanQuantize(typ))
		}
	}
	for _, typ := range []Type{Q8_1, IQ2_XXS, IQ4_NL, TQ1_0, I8, F64, Type(4), Type(1000)} {
		if CanDequantize(typ) || CanQuantize(typ) {
			t.Errorf("%s: unexpectedly supported", typ)
		}
	}
}

func TestErrors(t *testing.T) {
	cases := []struct {
		name     string
		typ      Type
		nBytes   int
		nFloats  int
		sentinel error
	}{
		{"unknown type", Type(1000), 0, 0, ErrUnknownType},
		{"removed type number", Type(4), 18, 32, ErrUnknownType},
		{"unsupported IQ2_XXS", IQ2_XXS, 66, 256, ErrUnsupported},
		{"unsupported Q8_1", Q8_1, 36, 32, ErrUnsupported},
		{"Q4_0 partial block", Q4_0, 18, 31, ErrLength},
		{"Q4_0 short src", Q4_0, 17, 32, ErrLength},
		{"Q4_0 long src", Q4_0, 19, 32, ErrLength},
		{"Q4_K two blocks one buffer", Q4_K, 144, 512, ErrLength},
		{"Q6_K not a multiple of 256", Q6_K, 210, 128, ErrLength},
		{"F16 odd bytes", F16, 3, 2, ErrLength},
		{"F32 mismatch", F32, 8, 3, ErrLength},
		{"MXFP4 extra byte", MXFP4, 18, 32, ErrLength},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			src, dst := make([]byte, c.nBytes), make([]float32, c.nFloats)
			if err := Dequantize(c.typ, src, dst); !errors.Is(err, c.sentinel) {
				t.Errorf("Dequantize: got %v, want %v", err, c.sentinel)
			}
			if err := Quantize(c.typ, dst, src); !errors.Is(err, c.sentinel) {
				t.Errorf("Quantize: got %v, want %v", err, c.sentinel)
			}
		})
	}
	// Empty buffers are a valid zero-block row.
	for _, typ := range allDequantTypes {
		if err := Dequantize(typ, nil, nil); err != nil {
			t.Errorf("Dequantize(%s, empty): %v", typ, err)
		}
		if err := Quantize(typ, nil, nil); err != nil {
			t.Errorf("Quantize(%s, empty): %v", typ, err)
		}
	}
}

// TestRoundTrip quantizes data of several shapes, dequantizes it, and bounds
// the error per block relative to the block's largest magnitude (maxRel) and
// the whole row's relative RMS error (rmsRel). It also checks the quality
// order Q2_K > Q3_K > Q4_K > Q5_K > Q6_K > Q8_0 on Gaussian data.
func TestRoundTrip(t *testing.T) {
	// Bounds: the observed worst case over the inputs below with ~25 % margin
	// (Q8_K's 0.004 is its exact half step 1/254: d is a float32 there).
	bounds := []struct {
		typ            Type
		maxRel, rmsRel float64
	}{
		{F32, 0, 0},
		{F16, 7e-4, 3e-4},
		{BF16, 4.5e-3, 2.5e-3},
		{Q8_0, 0.007, 0.013},
		{Q8_K, 0.004, 0.022},
		{Q6_K, 0.045, 0.025},
		{Q5_0, 0.075, 0.055},
		{Q5_1, 0.04, 0.048},
		{Q5_K, 0.08, 0.047},
		{Q4_0, 0.15, 0.11},
		{Q4_1, 0.08, 0.10},
		{Q4_K, 0.09, 0.09},
		{Q3_K, 0.20, 0.19},
		{MXFP4, 0.26, 0.25},
		{Q2_K, 0.40, 0.38},
	}
	const n = 4096
	inputs := roundTripInputs(rand.New(rand.NewSource(42)), n)
	rms := map[Type]float64{}
	for _, b := range bounds {
		for name, x := range inputs {
			t.Run(b.typ.String()+"/"+name, func(t *testing.T) {
				if rel, ok := checkRoundTrip(t, b.typ, b.maxRel, b.rmsRel, x); ok && name == "gaussian" {
					rms[b.typ] = rel
				}
			})
		}
	}
	order := []Type{Q2_K, Q3_K, Q4_K, Q5_K, Q6_K, Q8_0}
	for i := 1; i < len(order); i++ {
		if !(rms[order[i]] < rms[order[i-1]]) {
			t.Errorf("quality order broken: %s rms %g not below %s rms %g", order[i], rms[order[i]], order[i-1], rms[order[i-1]])
		}
	}
	t.Logf("relative RMS error on Gaussian data: %v", rms)
}

// checkRoundTrip quantizes x as typ and back, failing on an element off by
// more than maxRel of its block's largest magnitude or a relative RMS error
// above rmsRel; it returns that RMS error (false for all-zero x).
func checkRoundTrip(t *testing.T, typ Type, maxRel, rmsRel float64, x []float32) (float64, bool) {
	t.Helper()
	n := len(x)
	rs, _ := typ.RowSize(int64(n))
	q := make([]byte, rs)
	if err := Quantize(typ, x, q); err != nil {
		t.Fatal(err)
	}
	y := make([]float32, n)
	if err := Dequantize(typ, q, y); err != nil {
		t.Fatal(err)
	}
	bs := typ.BlockSize()
	if bs == 1 {
		bs = 32
	}
	var se, sx float64
	for blk := 0; blk < n; blk += bs {
		var amax float64
		for _, v := range x[blk : blk+bs] {
			amax = math.Max(amax, math.Abs(float64(v)))
		}
		for i := blk; i < blk+bs; i++ {
			e := math.Abs(float64(y[i]) - float64(x[i]))
			if e > maxRel*amax {
				t.Fatalf("element %d: %g -> %g, error %g > %g × block max %g", i, x[i], y[i], e, maxRel, amax)
			}
			se += e * e
			sx += float64(x[i]) * float64(x[i])
		}
	}
	if sx == 0 {
		return 0, false
	}
	rel := math.Sqrt(se / sx)
	if rel > rmsRel {
		t.Fatalf("relative RMS error %g > %g", rel, rmsRel)
	}
	return rel, true
}

// roundTripInputs are TestRoundTrip's rows of n values, drawn from rng in
// a fixed order.
func roundTripInputs(rng *rand.Rand, n int) map[string][]float32 {
	return map[string][]float32{
		"gaussian": gaussian(rng, n, 1),
		"small":    gaussian(rng, n, 1e-3),
		"large":    gaussian(rng, n, 1e3),
		"uniform-pos": func() []float32 {
			x := make([]float32, n)
			for i := range x {
				x[i] = rng.Float32()
			}
			return x
		}(),
		"zeros": make([]float32, n),
		"constant": func() []float32 {
			x := make([]float32, n)
			for i := range x {
				x[i] = 0.75
			}
			return x
		}(),
		"spikes": func() []float32 {
			x := gaussian(rng, n, 0.01)
			for i := 0; i < n; i += 97 {
				x[i] = 5
			}
			return x
		}(),
		"neg-constant": func() []float32 {
			x := make([]float32, n)
			for i := range x {
				x[i] = -2
			}
			return x
		}(),
	}
}

// TestQ8_K checks quantize_row_q8_K_ref's contract on hand-made blocks: d =
// 1/(-127/max) with max the first element of largest magnitude, qs =
// nearest_int(x·(-127/max)) capped at 127, bsums = sums of 16, all-zero
// blocks all zero; and that Dequantize(Q8_K) is d·qs.
func TestQ8_K(t *testing.T) {
	x := make([]float32, 3*QK_K)
	// Block 0: ramp with its largest magnitude +15.5 at the end -> d < 0.
	for j := 0; j < QK_K; j++ {
		x[j] = float32(j-100) / 10
	}
	// Block 1: -5 first, then +5: the first wins, max = -5 -> d > 0.
	b1 := x[QK_K : 2*QK_K]
	for j := range b1 {
		b1[j] = float32(j%7) - 3
	}
	b1[3], b1[200] = -5, 5
	// Block 2 stays all zero.
	q := make([]byte, 3*292)
	for i := range q {
		q[i] = 0xAA // garbage that must be overwritten
	}
	if err := Quantize(Q8_K, x, q); err != nil {
		t.Fatal(err)
	}
	type want struct {
		max float32
	}
	for blk, w := range []want{{15.5}, {-5}, {0}} {
		b := q[blk*292 : (blk+1)*292]
		d := math.Float32frombits(binary.LittleEndian.Uint32(b))
		xs := x[blk*QK_K : (blk+1)*QK_K]
		if w.max == 0 {
			for i, v := range b {
				if v != 0 {
					t.Fatalf("zero block: byte %d = %#x", i, v)
				}
			}
			continue
		}
		iscale := -127 / w.max
		if d != 1/iscale {
			t.Fatalf("block %d: d = %g, want 1/(-127/%g) = %g", blk, d, w.max, 1/iscale)
		}
		if (w.max > 0) != (d < 0) {
			t.Fatalf("block %d: sign convention broken, d = %g for max %g", blk, d, w.max)
		}
		for j, v := range xs {
			wantQ := nearestInt(float32(iscale * v))
			if wantQ > 127 {
				wantQ = 127
			}
			if got := int(int8(b[4+j])); got != wantQ {
				t.Fatalf("block %d qs[%d] = %d, want %d", blk, j, got, wantQ)
			}
			if r := math.Round(float64(v) * float64(iscale)); math.Abs(float64(int8(b[4+j]))-r) > 1 {
				t.Fatalf("block %d qs[%d] = %d far from %g", blk, j, int8(b[4+j]), r)
			}
		}
		for g := 0; g < 16; g++ {
			sum := 0
			for _, v := range b[4+16*g : 4+16*g+16] {
				sum += int(int8(v))
			}
			if got := int(int16(binary.LittleEndian.Uint16(b[260+2*g:]))); got != sum {
				t.Fatalf("block %d bsums[%d] = %d, want %d", blk, g, got, sum)
			}
		}
	}
	if int8(q[4+255]) != -127 || int8(q[292+4+3]) != -127 || int8(q[292+4+200]) != 127 {
		t.Fatalf("extreme elements: %d, %d, %d; want -127, -127, 127", int8(q[4+255]), int8(q[292+4+3]), int8(q[292+4+200]))
	}
	y := make([]float32, len(x))
	if err := Dequantize(Q8_K, q, y); err != nil {
		t.Fatal(err)
	}
	for i := range y {
		blk := i / QK_K
		d := math.Float32frombits(binary.LittleEndian.Uint32(q[blk*292:]))
		if y[i] != d*float32(int8(q[blk*292+4+i%QK_K])) {
			t.Fatalf("dequantized %d = %g, want d*q", i, y[i])
		}
		if e := math.Abs(float64(y[i] - x[i])); e > math.Abs(float64(d))/2*1.0001 {
			t.Fatalf("element %d: %g -> %g, error above half a step %g", i, x[i], y[i], d)
		}
	}
}

// TestNearestInt checks ggml's magic-number rounding against RoundToEven.
func TestNearestInt(t *testing.T) {
	for _, f := range []float32{0, 0.5, 1.5, 2.5, -0.5, -1.5, -2.5, 0.49999997, 3.7, -3.7, 4194303, -4194303, 127.5, -128.5} {
		if got, want := nearestInt(f), int(math.RoundToEven(float64(f))); got != want {
			t.Errorf("nearestInt(%g) = %d, want %d", f, got, want)
		}
	}
}

// TestQuantizeNonFinite: NaN and Inf inputs must not panic any quantizer.
func TestQuantizeNonFinite(t *testing.T) {
	x := make([]float32, QK_K)
	for i := range x {
		switch i % 4 {
		case 0:
			x[i] = float32(math.NaN())
		case 1:
			x[i] = float32(math.Inf(1))
		case 2:
			x[i] = float32(math.Inf(-1))
		default:
			x[i] = 1e38
		}
	}
	for _, typ := range allDequantTypes {
		rs, _ := typ.RowSize(QK_K)
		q := make([]byte, rs)
		if err := Quantize(typ, x, q); err != nil {
			t.Errorf("%s: %v", typ, err)
		}
		if err := Dequantize(typ, q, make([]float32, QK_K)); err != nil {
			t.Errorf("%s: %v", typ, err)
		}
	}
}

// ggmlBestIndexMXFP4 is a literal port of ggml's best_index_mxfp4 (all 16
// codes scanned) used to check the pruned scan in bestIndexMXFP4.
func ggmlBestIndexMXFP4(x, e float32) uint8 {
	best := 0
	bestErr := abs32(float32(float32(KValuesMXFP4[0])*e) - x)
	for i := 1; i < 16; i++ {
		err := abs32(float32(float32(KValuesMXFP4[i])*e) - x)
		if err < bestErr {
			best, bestErr = i, err
		}
	}
	return uint8(best)
}

func TestBestIndexMXFP4MatchesGGML(t *testing.T) {
	rng := rand.New(rand.NewSource(3))
	for e := 0; e < 256; e++ {
		d := E8M0ToFP32Half(uint8(e))
		var pos [8]float32
		for k := range pos {
			pos[k] = float32(KValuesMXFP4[k]) * d
		}
		xs := []float32{0, float32(math.Copysign(0, -1)), float32(math.NaN()), float32(math.Inf(1)), float32(math.Inf(-1)), math.MaxFloat32, -math.MaxFloat32}
		// Exact code values, midpoints between neighbours (ties) and their
		// float32 neighbours, on both signs.
		vals := []float32{0, 1, 2, 3, 4, 6, 8, 12}
		for i, v := range vals {
			xs = append(xs, v*d, math.Nextafter32(v*d, 0), math.Nextafter32(v*d, float32(math.Inf(1))))
			if i+1 < len(vals) {
				mid := float32((float64(v) + float64(vals[i+1])) / 2 * float64(d))
				xs = append(xs, mid, math.Nextafter32(mid, 0), math.Nextafter32(mid, float32(math.Inf(1))))
			}
		}
		for i := 0; i < 200; i++ {
			xs = append(xs, float32(rng.NormFloat64()*8*float64(d)), math.Float32frombits(rng.Uint32()))
		}
		for _, x := range xs {
			for _, s := range []float32{x, -x} {
				if got, want := bestIndexMXFP4(s, &pos), ggmlBestIndexMXFP4(s, d); got != want {
					t.Fatalf("e=%d x=%g: got code %d, ggml %d", e, s, got, want)
				}
			}
		}
	}
}

func TestRowSize(t *testing.T) {
	cases := []struct {
		typ      Type
		n        int64
		want     int64
		sentinel error
	}{
		{F32, 7, 28, nil},
		{Q4_K, 512, 288, nil},
		{MXFP4, 64, 34, nil},
		{Q8_K, 256, 292, nil},
		{Q4_0, 0, 0, nil},
		{Q4_0, 33, 0, ErrLength},
		{Q6_K, -256, 0, ErrLength},
		{F64, math.MaxInt64/8 + 1, 0, ErrLength},
		{Type(5), 32, 0, ErrUnknownType},
	}
	for _, c := range cases {
		got, err := c.typ.RowSize(c.n)
		if !errors.Is(err, c.sentinel) || (c.sentinel == nil) != (err == nil) || got != c.want {
			t.Errorf("%s.RowSize(%d) = %d, %v; want %d, %v", c.typ, c.n, got, err, c.want, c.sentinel)
		}
	}
	for name, want := range map[string]Type{"Q4_K": Q4_K, "MXFP4": MXFP4, "BF16": BF16, "F32": F32} {
		if got, ok := ParseType(name); !ok || got != want {
			t.Errorf("ParseType(%q) = %v, %v", name, got, ok)
		}
	}
	if _, ok := ParseType("q4_k"); ok {
		t.Error("ParseType is case-sensitive")
	}
	if s := Type(99).String(); s != "type(99)" {
		t.Errorf("unknown type String() = %q", s)
	}
}

// ParseType returns the type named name (ggml's spelling, case-sensitive).
func ParseType(name string) (Type, bool) {
	for t, tr := range traits {
		if tr.Name == name {
			return t, true
		}
	}
	return 0, false
}
