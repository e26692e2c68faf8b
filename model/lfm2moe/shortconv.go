package lfm2moe

// shortconv.go: LFM2's short-convolution block (llama.cpp's
// build_shortconv_block): a gated causal convolution whose state is the
// last L-1 gated inputs per channel.

import (
	"fmt"

	"github.com/pipe-engine/pipe/model"
)

// shortConv is one convolution layer: y = out·(c ⊙ conv(b ⊙ x)) with b, c,
// x the three n_embd-wide parts of in·h, h = RMSNorm(x)·operator_norm.
type shortConv struct {
	norm    []float32    // attn_norm (the operator norm)
	in, out model.Weight // shortconv.in_proj (3·E rows), shortconv.out_proj (E rows)
	taps    []float32    // shortconv.conv: E rows of L taps
	L       int          // shortconv.l_cache
}

func loadShortConv(ld *model.Loader, l, E, L int) *shortConv {
	p := fmt.Sprintf("blk.%d.", l)
	return &shortConv{L: L,
		norm: ld.Vector(p+"attn_norm.weight", E),
		in:   ld.Matrix(p+"shortconv.in_proj.weight", E, 3*E),
		out:  ld.Matrix(p+"shortconv.out_proj.weight", E, E),
		taps: ld.Vector(p+"shortconv.conv.weight", L*E),
	}
}

// StateFloats implements model.Mixer: L-1 inputs per channel.
func (s *shortConv) StateFloats() int { return (s.L - 1) * len(s.norm) }

// Mix implements model.Mixer.
func (s *shortConv) Mix(p *model.Pass, st *model.State, l int, x []float32) error {
	n, E := p.N, p.E
	rec := st.Recurrent(l)
	if len(rec) != s.StateFloats() {
		return fmt.Errorf("%w: layer %d: recurrent state of %d floats, want %d", model.ErrBadModel, l, len(rec), s.StateFloats())
	}
	h := p.Buf(n * E)
	p.Norm(h, x, s.norm)
	bcx := p.Buf(n * 3 * E)
	if err := p.MatMul(&s.in, h, bcx); err != nil {
		return err
	}
	bx := p.Buf(n * E)
	for t := 0; t < n; t++ {
		row := bcx[t*3*E : (t+1)*3*E]
		for i := 0; i < E; i++ {
			bx[t*E+i] = row[i] * row[2*E+i]
		}
	}
	model.CausalConv(rec, bx, s.taps, n, E, s.L, p.Buf(s.L-1+n))
	for t := 0; t < n; t++ {
		c := bcx[t*3*E+E : t*3*E+2*E]
		for i := 0; i < E; i++ {
			bx[t*E+i] = c[i] * bx[t*E+i]
		}
	}
	y := p.Buf(n * E)
	if err := p.MatMul(&s.out, bx, y); err != nil {
		return err
	}
	for i := range x {
		x[i] += y[i]
	}
	return nil
}
