package model

import (
	"fmt"
	"math"
)

// YaRN is rotary embedding with optional YaRN scaling, computed as ggml's
// CPU rope (ggml_rope_cache_init / rope_yarn / ggml_rope_yarn_corr_dims)
// with the parameters llama.cpp's context derives for the file (no scaling,
// linear or "yarn"). Every step is float32, in ggml's order, so the rotated
// vectors match llama.cpp's to the ulp of the transcendental functions.
type YaRN struct {
	NDims      int
	Base       float32 // freq_base
	FreqScale  float32 // 1 / rope.scaling.factor (1 without scaling)
	ExtFactor  float32 // YaRN extrapolation mix: 1 for yarn, 0 otherwise
	AttnFactor float32 // llama.cpp's cparams.yarn_attn_factor
	Corr       [2]float32
	thetaScale float32
}

// YaRN defaults llama.cpp applies when the file does not set them.
const (
	defaultBetaFast = float32(32)
	defaultBetaSlow = float32(1)
)

func logf32(x float32) float32 { return float32(math.Log(float64(x))) }

// yarnCorrDim is ggml_rope_yarn_corr_dim: the dimension at which nRot
// rotations fit into the original context.
func yarnCorrDim(nDims, nCtxOrig int, nRot, base float32) float32 {
	arg := float32(nCtxOrig) / float32(float32(nRot*2)*float32(math.Pi))
	return float32(float32(nDims)*logf32(arg)) / float32(2*logf32(base))
}

// YarnCorrDims is ggml_rope_yarn_corr_dims: the [start, end] dimensions of
// the ramp between interpolation and extrapolation.
func YarnCorrDims(nDims, nCtxOrig int, base, betaFast, betaSlow float32) [2]float32 {
	start := float32(math.Floor(float64(yarnCorrDim(nDims, nCtxOrig, betaFast, base))))
	end := float32(math.Ceil(float64(yarnCorrDim(nDims, nCtxOrig, betaSlow, base))))
	return [2]float32{max(0, start), min(float32(nDims-1), end)}
}

// fileFloat reads an optional float key of the architecture.
func fileFloat(d *Desc, key string, def float32) (float32, error) {
	v, ok := d.File.Get(d.Arch + "." + key)
	if !ok {
		return def, nil
	}
	f, ok := v.Float()
	if !ok || math.IsNaN(f) || math.Abs(f) > math.MaxFloat32 {
		return 0, fmt.Errorf("%w: %s.%s = %v is not a finite number", ErrBadModel, d.Arch, key, v)
	}
	return float32(f), nil
}

// NewYaRN derives the rotation of nDims dimensions from the file's
// metadata as llama.cpp's llama_context does with default context
// parameters. logMul is the architecture's YaRN log multiplier
// (hparams.rope_yarn_log_mul, 0 when it has none); mscaleIsLogMul is
// llama_context's deepseek2 case, where it is also the mscale.
func NewYaRN(d *Desc, nDims int, logMul float32, mscaleIsLogMul bool) (YaRN, error) {
	hp := d.HParams
	r := YaRN{NDims: nDims, Base: hp.RopeFreqBase, FreqScale: 1, AttnFactor: 1}
	if r.Base == 0 {
		r.Base = 10000
	}
	if hp.RopeScaleLinear > 0 {
		r.FreqScale = 1 / hp.RopeScaleLinear
	}
	ropeAttn, err := fileFloat(d, "rope.scaling.attn_factor", 1)
	if err != nil {
		return YaRN{}, err
	}
	switch hp.RopeScalingType {
	case "yarn":
		r.ExtFactor = 1
		betaFast, err := fileFloat(d, "rope.scaling.yarn_beta_fast", defaultBetaFast)
		if err != nil {
			return YaRN{}, err
		}
		betaSlow, err := fileFloat(d, "rope.scaling.yarn_beta_slow", defaultBetaSlow)
		if err != nil {
			return YaRN{}, err
		}
		if ext, err := fileFloat(d, "rope.scaling.yarn_ext_factor", -1); err != nil {
			return YaRN{}, err
		} else if ext >= 0 {
			r.ExtFactor = ext
		}
		nCtxOrig := hp.RopeScalingOrigCtx
		if nCtxOrig == 0 {
			nCtxOrig = hp.NCtxTrain
		}
		if nCtxOrig <= 0 {
			return YaRN{}, fmt.Errorf("%w: yarn scaling without rope.scaling.original_context_length", ErrBadModel)
		}
		r.Corr = YarnCorrDims(nDims, nCtxOrig, r.Base, betaFast, betaSlow)
		if r.ExtFactor != 0 {
			// llama_context: attn_factor = get_mscale(factor, 1), or with a
			// log multiplier get_mscale(factor, mscale) / get_mscale(factor,
			// logMul); then the factor ggml's rope_yarn re-applies is
			// cancelled.
			factor := 1 / r.FreqScale
			if logMul != 0 {
				ms := float32(1)
				if mscaleIsLogMul && logMul != 1 {
					ms = logMul
				}
				r.AttnFactor = getMscale(factor, ms) / getMscale(factor, logMul)
			} else {
				r.AttnFactor = getMscale(factor, 1)
			}
			r.AttnFactor *= 1 / (1 + float32(float32(0.1)*logf32(factor)))
		}
	case "", "none", "linear":
	default:
		return YaRN{}, fmt.Errorf("%w: rope scaling %q is not supported", ErrUnsupportedArch, hp.RopeScalingType)
	}
	r.AttnFactor *= ropeAttn
	r.thetaScale = float32(math.Pow(float64(r.Base), float64(float32(-2.0)/float32(nDims))))
	return r, nil
}

// getMscale is llama_context's get_mscale.
func getMscale(scale, mscale float32) float32 {
	if scale <= 1 {
		return 1
	}
	return float32(float32(float32(0.1)*mscale)*logf32(scale)) + 1
}

// rampYarn is ggml's rope_yarn_ramp for the pair starting at dimension i0.
func rampYarn(low, high float32, i0 int) float32 {
	y := (float32(i0/2) - low) / max(0.001, high-low)
	return 1 - min(1, max(0, y))
}

// cosSin is ggml's rope_yarn for one pair.
func (r *YaRN) cosSin(thetaExtrap float32, i0 int) (float32, float32) {
	thetaInterp := float32(r.FreqScale * thetaExtrap)
	theta := thetaInterp
	mscale := r.AttnFactor
	if r.ExtFactor != 0 {
		rampMix := float32(rampYarn(r.Corr[0], r.Corr[1], i0) * r.ExtFactor)
		theta = float32(thetaInterp*(1-rampMix)) + float32(thetaExtrap*rampMix)
		mscale *= 1 + float32(float32(0.1)*logf32(1/r.FreqScale))
	}
	c := float32(math.Cos(float64(theta))) * mscale
	s := float32(math.Sin(float64(theta))) * mscale
	return c, s
}

// ApplyNeoX rotates one head vector x (len ≥ NDims) for position pos: pairs
// are (i, i+NDims/2).
func (r *YaRN) ApplyNeoX(x []float32, pos int) {
	half := r.NDims / 2
	theta := float32(pos)
	for i := 0; i < half; i++ {
		c, s := r.cosSin(theta, 2*i)
		x0, x1 := x[i], x[i+half]
		x[i] = float32(x0*c) - float32(x1*s)
		x[i+half] = float32(x0*s) + float32(x1*c)
		theta *= r.thetaScale
	}
}

// ApplyNorm rotates x in ggml's "normal" mode: pairs (2i, 2i+1), at the
// angles ApplyNeoX gives pair i.
func (r *YaRN) ApplyNorm(x []float32, pos int) {
	theta := float32(pos)
	for i := 0; i+1 < r.NDims; i += 2 {
		c, s := r.cosSin(theta, i)
		x0, x1 := x[i], x[i+1]
		x[i] = float32(x0*c) - float32(x1*s)
		x[i+1] = float32(x0*s) + float32(x1*c)
		theta *= r.thetaScale
	}
}

// TableLen implements TableRotation: cos and sin of NDims/2 pairs.
func (r *YaRN) TableLen() int { return r.NDims / 2 * 2 }

// Angles implements TableRotation with ApplyNeoX's angles.
func (r *YaRN) Angles(pos int, cs []float32) {
	half := r.NDims / 2
	cs = cs[:2*half]
	theta := float32(pos)
	for i := 0; i < half; i++ {
		cs[2*i], cs[2*i+1] = r.cosSin(theta, 2*i)
		theta *= r.thetaScale
	}
}

// RotateNeoX implements TableRotation.
func (r *YaRN) RotateNeoX(x, cs []float32) { rotateNeoX(x, cs) }

// RotateNorm implements TableNormRotation.
func (r *YaRN) RotateNorm(x, cs []float32) { rotateNorm(x, cs) }
