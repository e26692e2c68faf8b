package kernels

import (
	"fmt"
	"math"
	"math/rand/v2"
	"slices"
	"testing"

	"github.com/pipe-engine/pipe/quant"
)

// TestAttendGroupIdentical: the grouped attention equals the single-head
// attention of each of its heads bit for bit, for F16 and F32 caches, with
// and without sinks, head widths the assembly takes and ones it leaves to
// the loops, 1–9, 17 and 300 rows, strides wider than the heads, slices
// starting off alignment, and guard words after every output.
func TestAttendGroupIdentical(t *testing.T) {
	rng := rand.New(rand.NewPCG(61, 62))
	for _, dim := range []int{4, 8, 12, 64, 128, 256, 512, 520} {
		for _, n := range []int{1, 2, 3, 4, 5, 6, 7, 8, 9, 17, 300} {
			for _, sink := range []bool{false, true} {
				t.Run(fmt.Sprintf("dim%d/rows%d/sink%v", dim, n, sink), func(t *testing.T) {
					checkGroup(t, rng, dim, n, sink)
				})
			}
		}
	}
}

func checkGroup(t *testing.T, rng *rand.Rand, dim, n int, sink bool) {
	stride := dim * (1 + rng.IntN(3))
	size := (n-1)*stride + dim
	mag := []float64{0.1, 1, 30}[rng.IntN(3)] // 30: scores far apart, exp underflows
	q := unaligned(GroupSlots * dim)
	for i := range q {
		q[i] = float32(rng.NormFloat64() * mag)
	}
	kf, vf := unaligned(size), unaligned(size)
	kh, vh := make([]uint16, size+1)[1:], make([]uint16, size+1)[1:]
	for i := range kf {
		kf[i], vf[i] = float32(rng.NormFloat64()*mag), float32(rng.NormFloat64())
		kh[i], vh[i] = quant.FP32ToFP16(kf[i]), quant.FP32ToFP16(vf[i])
	}
	var sinks []float32
	if sink {
		sinks = make([]float32, GroupSlots)
		for i := range sinks {
			sinks[i] = float32(rng.NormFloat64() * mag * 10)
		}
	}
	scale := float32(1 / math.Sqrt(float64(dim)))
	for _, f16 := range []bool{true, false} {
		gbuf, got := guarded(GroupSlots * dim)
		_, want := guarded(GroupSlots * dim)
		sbuf, sg := guarded(GroupSlots * n)
		_, sw := guarded(GroupSlots * n)
		if f16 {
			AttendGroupF16(q, kh, vh, stride, n, scale, sinks, sg, got)
			refAttendGroupF16(q, kh, vh, stride, n, scale, sinks, sw, want)
		} else {
			AttendGroupF32(q, kf, vf, stride, n, scale, sinks, sg, got)
			refAttendGroupF32(q, kf, vf, stride, n, scale, sinks, sw, want)
		}
		if !bitsEqual(got, want) {
			for i := range got {
				if math.Float32bits(got[i]) != math.Float32bits(want[i]) {
					t.Fatalf("f16=%v: out[%d] (head %d) = %g, head by head %g", f16, i, i/dim, got[i], want[i])
				}
			}
		}
		checkGuards(t, gbuf, GroupSlots*dim)
		checkGuards(t, sbuf, GroupSlots*n)
	}
}

// unaligned returns n floats whose first is 4 bytes past an allocation's
// start.
func unaligned(n int) []float32 { return make([]float32, n+1)[1:] }

// TestSoftmaxSpecialValues: softmax of rows with ties, infinities, huge
// spreads and a NaN keeps the scalar results (the grouped softmax is
// compared with them in TestAttendGroupExtremes).
func TestSoftmaxSpecialValues(t *testing.T) {
	x := []float32{1, 1, 1}
	Softmax(x)
	if x[0] != x[1] || x[1] != x[2] || math.Abs(float64(x[0])-1.0/3) > 1e-7 {
		t.Fatalf("softmax of ties %v", x)
	}
	y := []float32{0, -1e30, float32(math.Inf(-1))}
	Softmax(y)
	if !slices.Equal(y, []float32{1, 0, 0}) {
		t.Fatalf("softmax with a huge spread %v", y)
	}
	z := []float32{2, 2}
	SoftmaxSink(z, 1000)
	if z[0] != 0 || z[1] != 0 {
		t.Fatalf("a dominating sink leaves %v", z)
	}
}

// TestAttendGroupExtremes: rows whose scores overflow the float32 range,
// differ by more than the exponential's range, are NaN, or tie, give the
// grouped and head-by-head results bit for bit, except that a NaN's sign
// and payload are not specified (with two NaN operands x86 keeps the
// first, and the Go compiler may order a commutative addition either way).
func TestAttendGroupExtremes(t *testing.T) {
	const dim, n = 8, 6
	inf, nan := float32(math.Inf(1)), float32(math.NaN())
	for ci, kv := range [][]float32{
		{1e30, -1e30, 0, 1, 1, 1},         // scores ±huge: exp underflows to 0
		{1e38, 1e38, -1e38, 0, 0, 0},      // scores overflow to ±Inf
		{nan, 0, 1, 2, 3, 4},              // one NaN score
		{0, 0, 0, 0, 0, 0},                // all ties
		{inf, 1, 2, 3, -inf, 5},           // infinite K
		{700, 699, -701, 650, 0.5, -1000}, // around the exp bounds
	} {
		q := make([]float32, GroupSlots*dim)
		for s := 0; s < GroupSlots; s++ {
			q[s*dim] = float32(s) - 3 // one slot with q = 0
		}
		k, v := make([]float32, n*dim), make([]float32, n*dim)
		for j := 0; j < n; j++ {
			k[j*dim] = kv[j]
			for i := 0; i < dim; i++ {
				v[j*dim+i] = float32(j + i)
			}
		}
		for _, sinks := range [][]float32{nil, {0, 1e30, -1e30, nan, 5, inf, -inf, 2}} {
			got, want := make([]float32, GroupSlots*dim), make([]float32, GroupSlots*dim)
			sg, sw := make([]float32, GroupSlots*n), make([]float32, GroupSlots*n)
			AttendGroupF32(q, k, v, dim, n, 1, sinks, sg, got)
			refAttendGroupF32(q, k, v, dim, n, 1, sinks, sw, want)
			if !bitsEqualNaN(got, want) {
				t.Fatalf("case %d sinks %v: grouped %v, head by head %v", ci, sinks, got, want)
			}
		}
	}
}

// bitsEqualNaN is bitsEqual with every NaN equal to every NaN.
func bitsEqualNaN(a, b []float32) bool {
	for i := range a {
		if math.Float32bits(a[i]) != math.Float32bits(b[i]) && !(a[i] != a[i] && b[i] != b[i]) {
			return false
		}
	}
	return len(a) == len(b)
}

// TestExpShiftAndRoundF16sIdentical: the vectorized softmax exponentials
// and F16 roundings equal the scalar loops bit for bit (values and the
// in-order float64 sum) for lengths around the vector width, values
// spanning the exponential's range and the F16 range (subnormals,
// overflow to Inf, ties), infinities and NaN.
func TestExpShiftAndRoundF16sIdentical(t *testing.T) {
	rng := rand.New(rand.NewPCG(81, 82))
	special := []float32{0, float32(math.Copysign(0, -1)), 1, -1, 65504, 65519.99, 65520, 1e-8, 6e-8, -3e-5,
		2049, 2051, float32(math.Inf(1)), float32(math.Inf(-1)), float32(math.NaN()), -700, -701, -1e30}
	for _, n := range []int{0, 1, 7, 8, 9, 15, 16, 17, 31, 300} {
		x := make([]float32, n)
		for i := range x {
			if rng.IntN(4) == 0 {
				x[i] = special[rng.IntN(len(special))]
			} else {
				x[i] = float32(rng.NormFloat64() * []float64{1e-6, 1, 100, 1e5}[rng.IntN(4)])
			}
		}
		a, b := slices.Clone(x), slices.Clone(x)
		roundF16s(a)
		refRoundF16s(b)
		if !bitsEqual(a, b) {
			t.Fatalf("n=%d: roundF16s %v, scalar %v", n, a, b)
		}
		// NaNs with payloads (quiet and signalling, both signs): hardware
		// conversions keep the payload, the reference does not.
		a = slices.Clone(x)
		for i := range a {
			if rng.IntN(3) == 0 {
				a[i] = math.Float32frombits([]uint32{0x7fc12345, 0xffc00001, 0x7f800001, 0xff8fffff}[rng.IntN(4)])
			}
		}
		b = slices.Clone(a)
		roundF16s(a)
		refRoundF16s(b)
		if !bitsEqual(a, b) {
			t.Fatalf("n=%d, NaN payloads: roundF16s %v, scalar %v", n, a, b)
		}
		for _, m := range []float32{0, 3, -2, 1e4} {
			a, b = slices.Clone(x), slices.Clone(x)
			for i := range a { // inputs of a softmax: at most m
				a[i], b[i] = min(a[i], m), min(b[i], m)
			}
			sa, sb := expShift(a, m), refExpShift(b, m)
			if !bitsEqual(a, b) || (math.Float64bits(sa) != math.Float64bits(sb) && !(sa != sa && sb != sb)) {
				t.Fatalf("n=%d m=%g: expShift %v sum %g, scalar %v sum %g", n, m, a, sa, b, sb)
			}
		}
	}
}

// TestAttendTileIdentical: heads ending at different rows (a prompt's
// consecutive tokens under the causal mask, and arbitrary row counts) give
// each head's single-head result bit for bit, F16 and F32, with and
// without sinks, widths the assembly takes and ones it leaves to the loops.
func TestAttendTileIdentical(t *testing.T) {
	rng := rand.New(rand.NewPCG(91, 92))
	for _, dim := range []int{8, 12, 64, 256} {
		for _, n := range []int{1, 2, 5, 9, 70, 131} {
			for _, sink := range []bool{false, true} {
				t.Run(fmt.Sprintf("dim%d/rows%d/sink%v", dim, n, sink), func(t *testing.T) {
					var rows [GroupSlots]int
					for s := range rows {
						if rng.IntN(2) == 0 {
							rows[s] = max(1, n-GroupSlots+1+s/2) // 4 tokens × 2 heads, causal
						} else {
							rows[s] = 1 + rng.IntN(n)
						}
					}
					checkTile(t, rng, dim, n, &rows, sink)
				})
			}
		}
	}
}

func checkTile(t *testing.T, rng *rand.Rand, dim, n int, rows *[GroupSlots]int, sink bool) {
	stride := dim * (1 + rng.IntN(2))
	size := (n-1)*stride + dim
	q := unaligned(GroupSlots * dim)
	for i := range q {
		q[i] = float32(rng.NormFloat64() * 3)
	}
	kf, vf := unaligned(size), unaligned(size)
	kh, vh := make([]uint16, size+1)[1:], make([]uint16, size+1)[1:]
	for i := range kf {
		kf[i], vf[i] = float32(rng.NormFloat64()), float32(rng.NormFloat64())
		kh[i], vh[i] = quant.FP32ToFP16(kf[i]), quant.FP32ToFP16(vf[i])
	}
	var sinks []float32
	if sink {
		sinks = make([]float32, GroupSlots)
		for i := range sinks {
			sinks[i] = float32(rng.NormFloat64() * 5)
		}
	}
	for _, f16 := range []bool{true, false} {
		gbuf, got := guarded(GroupSlots * dim)
		_, want := guarded(GroupSlots * dim)
		sbuf, sg := guarded(GroupSlots * n)
		_, sw := guarded(GroupSlots * n)
		if f16 {
			AttendTileF16(q, kh, vh, stride, rows, 0.3, sinks, sg, got)
			refAttendTileF16(q, kh, vh, stride, rows, 0.3, sinks, sw, want)
		} else {
			AttendTileF32(q, kf, vf, stride, rows, 0.3, sinks, sg, got)
			refAttendTileF32(q, kf, vf, stride, rows, 0.3, sinks, sw, want)
		}
		for i := range got {
			if math.Float32bits(got[i]) != math.Float32bits(want[i]) {
				t.Fatalf("f16=%v rows %v: out[%d] (head %d) = %g, head alone %g", f16, *rows, i, i/dim, got[i], want[i])
			}
		}
		checkGuards(t, gbuf, GroupSlots*dim)
		checkGuards(t, sbuf, GroupSlots*n)
	}
}

// TestAttendShortOut: an out shorter than q receives the first columns of
// the full output bit for bit (latent attention: 576-wide keys whose first
// 512 columns are the values), for both cache types.
func TestAttendShortOut(t *testing.T) {
	rng := rand.New(rand.NewPCG(5, 76))
	const dim, vdim, n = 576, 512, 9
	q := make([]float32, dim)
	k32 := make([]float32, n*dim)
	for i := range q {
		q[i] = float32(rng.NormFloat64())
	}
	for i := range k32 {
		k32[i] = float32(rng.NormFloat64())
	}
	k16 := make([]uint16, len(k32))
	for i, x := range k32 {
		k16[i] = quant.FP32ToFP16(x)
	}
	h := Head{Scale: 0.07}
	full, short := make([]float32, dim), make([]float32, vdim)
	sc := make([]float32, n)
	AttendF32(q, k32, k32, dim, n, h, sc, full)
	AttendF32(q, k32, k32, dim, n, h, sc, short)
	if !slices.Equal(full[:vdim], short) {
		t.Fatal("F32: the short output differs from the full one's first columns")
	}
	AttendF16(q, k16, k16, dim, n, h, sc, full)
	AttendF16(q, k16, k16, dim, n, h, sc, short)
	if !slices.Equal(full[:vdim], short) {
		t.Fatal("F16: the short output differs from the full one's first columns")
	}
}

// BenchmarkAttendGroup: the 8 query heads of one KV head (dim 128) over
// 1024 F16 rows, grouped (AttendGroupF16) against head by head on the
// single-head helpers (the reference the grouped form equals bit for bit).
func BenchmarkAttendGroup(b *testing.B) {
	const dim, rows = 128, 1024
	rng := rand.New(rand.NewPCG(5, 6))
	q, out, sc := make([]float32, GroupSlots*dim), make([]float32, GroupSlots*dim), make([]float32, GroupSlots*rows)
	k, v := make([]uint16, dim*rows), make([]uint16, dim*rows)
	for i := range q {
		q[i] = float32(rng.NormFloat64())
	}
	for i := range k {
		k[i], v[i] = quant.FP32ToFP16(float32(rng.NormFloat64())), quant.FP32ToFP16(float32(rng.NormFloat64()))
	}
	scale := float32(1 / math.Sqrt(dim))
	for _, bc := range []struct {
		name string
		f    func(q []float32, k, v []uint16, stride, n int, scale float32, sinks, scores, out []float32)
	}{{"F16/group", AttendGroupF16}, {"F16/heads", refAttendGroupF16}} {
		b.Run(bc.name, func(b *testing.B) {
			for range b.N {
				bc.f(q, k, v, dim, rows, scale, nil, sc, out)
			}
		})
	}
}
