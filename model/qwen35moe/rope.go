package qwen35moe

import (
	"fmt"

	"github.com/pipe-engine/pipe/model"
)

// imrope is ggml's interleaved multi-section RoPE (GGML_ROPE_TYPE_IMROPE)
// for text: pair i of the rotated dims belongs to sector i mod Σsections;
// sectors of the first three sections (t, h, w interleaved) rotate by the
// token's position, as llama.cpp gives text tokens the same position in
// all three, and the others by the fourth position, which is 0 for text:
// they are not rotated.
type imrope struct {
	model.Rope
	still []bool // per pair: not rotated
}

// newIMRope builds the rotation of hp's attention layers.
func newIMRope(hp model.HParams) (imrope, error) {
	nRot := hp.NRot
	if nRot <= 0 || nRot > hp.HeadDim || nRot%2 != 0 || nRot > 512 {
		return imrope{}, fmt.Errorf("%w: qwen35moe rope.dimension_count %d for heads of %d", model.ErrBadModel, nRot, hp.HeadDim)
	}
	s := hp.RopeSections
	if len(s) < 3 {
		return imrope{}, fmt.Errorf("%w: qwen35moe rope.dimension_sections %v: want 4 sections", model.ErrBadModel, s)
	}
	s = append(append([]int(nil), s...), 0, 0, 0, 0)[:4]
	dims := s[0] + s[1] + s[2] + s[3]
	if dims <= 0 || dims > nRot {
		return imrope{}, fmt.Errorf("%w: qwen35moe rope.dimension_sections %v: %d pairs for %d rotated dims", model.ErrBadModel, s, dims, nRot)
	}
	fs := float32(1)
	if hp.RopeScaleLinear > 0 {
		fs = 1 / hp.RopeScaleLinear
	}
	r := imrope{Rope: model.Rope{NDims: nRot, Base: hp.RopeFreqBase, FreqScale: fs, AttnScale: 1}, still: make([]bool, nRot/2)}
	for i := range r.still {
		sec := i % dims
		moving := (sec%3 == 0 && sec < 3*s[0]) || (sec%3 == 1 && sec < 3*s[1]) || (sec%3 == 2 && sec < 3*s[2])
		r.still[i] = !moving
	}
	return r, nil
}

// ApplyNeoX implements model.Rotation: the NeoX rotation of the moving
// pairs; a still pair rotates by angle 0, which leaves it as it is.
func (r imrope) ApplyNeoX(x []float32, pos int) {
	half := r.NDims / 2
	var keep [512]float32 // newIMRope: at most 256 pairs
	n := 0
	for i, s := range r.still {
		if s {
			keep[n], keep[n+1] = x[i], x[i+half]
			n += 2
		}
	}
	r.Rope.ApplyNeoX(x, pos)
	n = 0
	for i, s := range r.still {
		if s {
			x[i], x[i+half] = keep[n], keep[n+1]
			n += 2
		}
	}
}

// RotateNeoX implements model.TableRotation (Angles and TableLen are
// Rope's): the moving pairs rotate from the table, the still ones are left
// as they are, bit for bit as ApplyNeoX.
func (r imrope) RotateNeoX(x, cs []float32) {
	half := r.NDims / 2
	lo, hi := x[:half], x[half:2*half]
	for i, s := range r.still[:half] {
		if s {
			continue
		}
		c, sn := cs[2*i], cs[2*i+1]
		x0, x1 := lo[i], hi[i]
		// explicit roundings: never fused into FMA (Go fuses on arm64)
		lo[i] = float32(x0*c) - float32(x1*sn)
		hi[i] = float32(x0*sn) + float32(x1*c)
	}
}
