package model

import (
	"math"
	"sync"

	"github.com/pipe-engine/pipe/kernels"
	"github.com/pipe-engine/pipe/quant"
)

// The element-wise operations below follow ggml's CPU order of operations
// (float32 storage, float64 accumulation where ggml uses ggml_float), so that
// the F32 golden models agree with llama.cpp to within a few ulps.

// RMSNorm writes x / sqrt(mean(x²) + eps) * w into out (out may alias x).
// w may be nil (no weight multiply).
func RMSNorm(out, x []float32, eps float32, w []float32) {
	var sum float64
	for _, v := range x {
		sum += float64(v * v)
	}
	rmsScale(out, x, sum, eps, w)
}

// RMSNormHeads is RMSNorm of every hd-wide row of x in place: four rows'
// sums of squares at a time, each in its own order, so that the four
// addition chains overlap; the results are RMSNorm's bit for bit.
func RMSNormHeads(x []float32, hd int, eps float32, w []float32) {
	r := 0
	for ; r+4*hd <= len(x); r += 4 * hd {
		x0, x1, x2, x3 := x[r:r+hd], x[r+hd:r+2*hd], x[r+2*hd:r+3*hd], x[r+3*hd:r+4*hd]
		var s0, s1, s2, s3 float64
		for i, v := range x0 {
			v1, v2, v3 := x1[i], x2[i], x3[i]
			s0 += float64(v * v)
			s1 += float64(v1 * v1)
			s2 += float64(v2 * v2)
			s3 += float64(v3 * v3)
		}
		rmsScale(x0, x0, s0, eps, w)
		rmsScale(x1, x1, s1, eps, w)
		rmsScale(x2, x2, s2, eps, w)
		rmsScale(x3, x3, s3, eps, w)
	}
	for ; r+hd <= len(x); r += hd {
		RMSNorm(x[r:r+hd], x[r:r+hd], eps, w)
	}
}

// rmsScale writes x / sqrt(sum/len(x) + eps) * w into out, sum being x's
// sum of squares.
func rmsScale(out, x []float32, sum float64, eps float32, w []float32) {
	mean := float32(sum / float64(len(x)))
	scale := float32(1.0) / float32(math.Sqrt(float64(mean+eps)))
	if w == nil {
		for i, v := range x {
			out[i] = v * scale
		}
		return
	}
	for i, v := range x {
		out[i] = (v * scale) * w[i]
	}
}

// Softmax replaces x with softmax(x) in kernels.Softmax's float order
// (float64 sum of the float32 exponentials, in order).
func Softmax(x []float32) { kernels.Softmax(x) }

// SiLU returns x·σ(x) as ggml computes it.
func SiLU(x float32) float32 {
	return x / (1 + float32(math.Exp(float64(-x))))
}

// Sigmoid returns 1/(1+e^-x) as ggml computes it.
func Sigmoid(x float32) float32 {
	return 1 / (1 + float32(math.Exp(float64(-x))))
}

// SwiGLU writes silu(gate)·up into out: SiLU(gate[i])·up[i] bit for bit
// (kernels.SwiGLU, vectorized where the assembly runs).
func SwiGLU(out, gate, up []float32) { kernels.SwiGLU(out, gate, up) }

// geluTab is ggml's GELU table: for every F16 bit pattern h,
// F16(gelu_f32(F32(h))) (ggml_table_gelu_f16, 128 KiB), built on first use.
var geluTab = sync.OnceValue(func() *[1 << 16]uint16 {
	var t [1 << 16]uint16
	for i := range t {
		t[i] = quant.FP32ToFP16(geluF32(quant.FP16ToFP32(uint16(i))))
	}
	return &t
})

// geluF32 is ggml_gelu_f32, the tanh approximation in float32 (explicit
// roundings: never fused into FMA, which Go does on arm64).
func geluF32(x float32) float32 {
	const (
		coefA       = float32(0.044715)
		sqrt2OverPi = float32(0.79788456080286535587989211986876)
	)
	inner := float32(sqrt2OverPi*x) * (1 + float32(float32(coefA*x)*x))
	return 0.5 * x * (1 + float32(math.Tanh(float64(inner))))
}

// GEGLU writes gelu(gate)·up into out (out may alias gate or up), as
// ggml_vec_geglu_f32 computes it with GGML_GELU_FP16: 0 where gate ≤ -10,
// gate·up where gate ≥ 10, else ggml's GELU table at gate rounded to F16,
// times up.
func GEGLU(out, gate, up []float32) {
	tab := geluTab()
	for i := range out {
		g := gate[i]
		switch {
		case g <= -10:
			out[i] = 0
		case g >= 10:
			out[i] = g * up[i]
		default:
			out[i] = quant.FP16ToFP32(tab[quant.FP32ToFP16(g)]) * up[i]
		}
	}
}

// Rotation rotates one head vector for a position: the rotary embedding of
// an attention layer (Rope here, YaRN variants in the architectures).
type Rotation interface {
	ApplyNeoX(x []float32, pos int)
}

// NormRotation rotates in ggml's "normal" rope mode: adjacent pairs
// (2i, 2i+1) (latent attention's rotated part).
type NormRotation interface {
	ApplyNorm(x []float32, pos int)
}

// TableRotation is a Rotation whose angles depend only on the position:
// Angles writes one position's table (cos and sin of every pair) once, and
// RotateNeoX rotates any number of head vectors from it, bit for bit as
// ApplyNeoX at that position.
type TableRotation interface {
	Rotation
	TableLen() int                // floats Angles writes
	Angles(pos int, cs []float32) // cs[2i], cs[2i+1]: pair i's cos and sin at pos
	RotateNeoX(x, cs []float32)   // ApplyNeoX from Angles' table cs (len TableLen)
}

// TableNormRotation is TableRotation for NormRotation: RotateNorm rotates
// from the table bit for bit as ApplyNorm at that position.
type TableNormRotation interface {
	NormRotation
	TableLen() int
	Angles(pos int, cs []float32)
	RotateNorm(x, cs []float32)
}

// rotateNeoX rotates pairs (i, i+len(cs)/2) of x by the table cs.
func rotateNeoX(x, cs []float32) {
	half := len(cs) / 2
	lo, hi := x[:half], x[half:2*half]
	for i := range lo {
		c, s := cs[2*i], cs[2*i+1]
		x0, x1 := lo[i], hi[i]
		// explicit roundings: never fused into FMA (Go fuses on arm64)
		lo[i] = float32(x0*c) - float32(x1*s)
		hi[i] = float32(x0*s) + float32(x1*c)
	}
}

// rotateNorm rotates pairs (2i, 2i+1) of x by the table cs.
func rotateNorm(x, cs []float32) {
	x = x[:len(cs)]
	for i := 0; i+1 < len(x); i += 2 {
		c, s := cs[i], cs[i+1]
		x0, x1 := x[i], x[i+1]
		x[i] = float32(x0*c) - float32(x1*s)
		x[i+1] = float32(x0*s) + float32(x1*c)
	}
}

// Rope is NeoX rotary embedding without YaRN extrapolation, as ggml_rope_ext
// computes it: pairs (i, i+NDims/2) of the first NDims dimensions rotate by
// pos·Base^(-2i/NDims)·FreqScale / FreqFactors[i]; dimensions past NDims
// pass through unchanged.
type Rope struct {
	NDims     int     // rotated dimensions (pairs are i and i+NDims/2: NeoX)
	Base      float32 // freq_base
	FreqScale float32 // 1/scaling factor (linear); 1 when unscaled
	AttnScale float32 // multiplies cos and sin (YaRN mscale); 1 when unscaled
	// FreqFactors, when not nil, divides each pair's angle (NDims/2 values,
	// ggml's rope "freq_factors": gemma4's proportional rope on full layers).
	FreqFactors []float32
}

// ApplyNeoX rotates one head vector x (len ≥ NDims) for position pos.
func (r Rope) ApplyNeoX(x []float32, pos int) { r.apply(x, pos, r.NDims/2) }

// ApplyNorm rotates x as ggml's "normal" rope mode: pairs (2i, 2i+1) of the
// first NDims dimensions at the angles ApplyNeoX gives pair i.
func (r Rope) ApplyNorm(x []float32, pos int) { r.apply(x, pos, 1) }

// apply rotates pair i — dimensions (i, i+off) when off > 1 (NeoX), else
// (2i, 2i+1) — for every i < NDims/2.
func (r Rope) apply(x []float32, pos, off int) {
	half := r.NDims / 2
	thetaScale := float32(math.Pow(float64(r.Base), -2.0/float64(r.NDims)))
	theta := float32(pos)
	for i := 0; i < half; i++ {
		t := r.FreqScale * theta
		if r.FreqFactors != nil {
			t = r.FreqScale * (theta / r.FreqFactors[i])
		}
		c := float32(math.Cos(float64(t))) * r.AttnScale
		s := float32(math.Sin(float64(t))) * r.AttnScale
		a := i
		if off == 1 {
			a = 2 * i
		}
		x0 := x[a]
		x1 := x[a+off]
		// explicit roundings: never fused into FMA (Go fuses on arm64)
		x[a] = float32(x0*c) - float32(x1*s)
		x[a+off] = float32(x0*s) + float32(x1*c)
		theta *= thetaScale
	}
}

// TableLen implements TableRotation: cos and sin of NDims/2 pairs.
func (r Rope) TableLen() int { return r.NDims / 2 * 2 }

// Angles implements TableRotation with apply's angles.
func (r Rope) Angles(pos int, cs []float32) {
	half := r.NDims / 2
	cs = cs[:2*half]
	thetaScale := float32(math.Pow(float64(r.Base), -2.0/float64(r.NDims)))
	theta := float32(pos)
	for i := 0; i < half; i++ {
		t := r.FreqScale * theta
		if r.FreqFactors != nil {
			t = r.FreqScale * (theta / r.FreqFactors[i])
		}
		cs[2*i] = float32(math.Cos(float64(t))) * r.AttnScale
		cs[2*i+1] = float32(math.Sin(float64(t))) * r.AttnScale
		theta *= thetaScale
	}
}

// RotateNeoX implements TableRotation.
func (r Rope) RotateNeoX(x, cs []float32) { rotateNeoX(x, cs) }

// RotateNorm implements TableNormRotation.
func (r Rope) RotateNorm(x, cs []float32) { rotateNorm(x, cs) }

// DequantizeRow writes row r of a matrix of cols columns stored as t into dst.
func DequantizeRow(t quant.Type, data []byte, cols, r int, dst []float32) error {
	rs, err := t.RowSize(int64(cols))
	if err != nil {
		return err
	}
	off := int64(r) * rs
	if off+rs > int64(len(data)) {
		return ErrBadModel
	}
	return quant.Dequantize(t, data[off:off+rs], dst[:cols])
}
