package gemma4

import (
	"context"
	"fmt"
	"math"

	"github.com/pipe-engine/pipe/kernels"
	"github.com/pipe-engine/pipe/model"
)

func sqrtf(x float32) float32 { return float32(math.Sqrt(float64(x))) }

// layerGeoms derives every layer's attention geometry from the metadata as
// llama.cpp's hparams do: the sliding-window pattern picks, per layer, the
// head width (key_length_swa, default key_length), the rotated dims
// (rope.dimension_count_swa, default rope.dimension_count) and the RoPE base
// (rope.freq_base_swa, default 10000; full layers rope.freq_base) and
// frequency scale (1 on sliding layers); head counts may be per layer.
func layerGeoms(hp model.HParams) ([]model.Geom, error) {
	bad := func(format string, args ...any) error {
		return fmt.Errorf("%w: gemma4: "+format, append([]any{model.ErrBadModel}, args...)...)
	}
	n := hp.NLayer
	if n <= 0 || len(hp.SlidingWindowPattern) != n {
		return nil, bad("gemma4.attention.sliding_window_pattern has %d entries, want one per layer (block_count %d)", len(hp.SlidingWindowPattern), n)
	}
	switch hp.RopeScalingType {
	case "", "none", "linear":
	default:
		return nil, fmt.Errorf("%w: gemma4: rope scaling %q is not supported", model.ErrUnsupportedArch, hp.RopeScalingType)
	}
	full := side{hd: hp.HeadDim, hdV: hp.HeadDimV, rot: hp.NRot, base: hp.RopeFreqBase, scale: 1}
	if hp.RopeScaleLinear > 0 {
		full.scale = 1 / hp.RopeScaleLinear
	}
	swa := side{hd: or(hp.SWA.HeadDim, full.hd), hdV: or(hp.SWA.HeadDimV, full.hdV), rot: or(hp.SWA.NRot, full.rot),
		base: hp.SWA.RopeFreqBase, scale: 1}
	if swa.base == 0 {
		swa.base = 10000
	}
	if full.hd != full.hdV || swa.hd != swa.hdV {
		return nil, bad("key_length %d / value_length %d and key_length_swa %d / value_length_swa %d must match", full.hd, full.hdV, swa.hd, swa.hdV)
	}
	geoms := make([]model.Geom, n)
	for l := range geoms {
		s, key := full, "rope.dimension_count"
		if hp.SlidingWindowPattern[l] {
			s, key = swa, "rope.dimension_count_swa"
		}
		g := model.Geom{NHead: perLayer(hp.HeadCountLayers, l, hp.NHead), NHeadKV: perLayer(hp.HeadCountKVLayers, l, hp.NHeadKV),
			HeadDim: s.hd, Scale: 1, Rope: model.Rope{NDims: s.rot, Base: s.base, FreqScale: s.scale, AttnScale: 1}}
		if hp.SlidingWindowPattern[l] {
			if hp.SlidingWindow <= 0 {
				return nil, bad("gemma4.attention.sliding_window is missing or 0")
			}
			g.Window = hp.SlidingWindow
		}
		switch {
		case g.NHead <= 0 || g.NHeadKV <= 0 || g.NHead%g.NHeadKV != 0:
			return nil, bad("layer %d: %d heads, %d KV heads", l, g.NHead, g.NHeadKV)
		case s.hd <= 0 || s.rot <= 0 || s.rot%2 != 0 || s.rot > s.hd:
			// llama.cpp aborts on a rotation wider than the head (e.g. a
			// file without rope.dimension_count_swa rotating 128 dims of a
			// 64-dim sliding-window head).
			return nil, bad("layer %d: %s %d for a head of %d", l, key, s.rot, s.hd)
		}
		geoms[l] = g
	}
	return geoms, nil
}

// side is one layer type's geometry.
type side struct {
	hd, hdV, rot int
	base, scale  float32
}

func or(v, def int) int {
	if v == 0 {
		return def
	}
	return v
}

func perLayer(arr []int, l, def int) int {
	if l < len(arr) {
		return arr[l]
	}
	return def
}

// ffn is a gemma4 layer's feed-forward half: the dense GELU MLP and, on
// MoE layers, the routed experts beside it, each with its own norms.
type ffn struct {
	norm1, postNorm []float32 // ffn_norm, post_ffw_norm
	mlp             model.GLU
	moe             bool
	postNorm1       []float32 // post_ffw_norm_1
	preNorm2        []float32 // pre_ffw_norm_2
	postNorm2       []float32 // post_ffw_norm_2
	router          model.Weight
	routerScale     []float32 // ffn_gate_inp.scale
	invSqrtE, eps   float32
	outScale        float32 // layer_output_scale (1 without it)
	hasOutScale     bool
	nExpert         int
	peekTmp         []float32 // Peek's normalised inputs, kept between calls
}

// loadFFN loads layer l's FFN hook and its expert description (a layer
// without ffn_gate_inp has no experts).
func (m *Model) loadFFN(ld *model.Loader, l int) *ffn {
	E := m.nEmbd
	p := fmt.Sprintf("blk.%d.", l)
	f := &ffn{norm1: ld.Vector(p+"ffn_norm.weight", E), postNorm: ld.Vector(p+"post_ffw_norm.weight", E),
		mlp: model.LoadGLU(ld, p+"ffn_", ".weight", E, -1, model.GEGLU), invSqrtE: 1 / sqrtf(float32(E)), eps: m.Eps, nExpert: m.nExpert, outScale: 1}
	if s, ok := ld.OptionalVector(p+"layer_output_scale.weight", 1); ok {
		f.outScale, f.hasOutScale = s[0], true
	}
	f.router, f.moe = ld.OptionalMatrix(p+"ffn_gate_inp.weight", E, m.nExpert)
	if !f.moe {
		m.SkipLayer()
		return f
	}
	f.routerScale = ld.Vector(p+"ffn_gate_inp.scale", E)
	f.preNorm2 = ld.Vector(p+"pre_ffw_norm_2.weight", E)
	f.postNorm1 = ld.Vector(p+"post_ffw_norm_1.weight", E)
	f.postNorm2 = ld.Vector(p+"post_ffw_norm_2.weight", E)
	x := m.AddLayer(ld, l)
	x.DownScale, _ = ld.OptionalVector(p+"ffn_down_exps.scale", m.nExpert)
	return f
}

// Run implements model.FFN on the attention output x (in place).
func (f *ffn) Run(ctx context.Context, p *model.Pass, layer int, x []float32) error {
	n, E := p.N, p.E
	h := p.Buf(n * E)
	p.Norm(h, x, f.norm1)
	var mlp []float32
	if !f.moe {
		var err error
		if mlp, err = f.mlp.Run(p, h); err != nil {
			return err
		}
	} else {
		t0 := p.Clock.Now()
		in := p.Buf(n * E)
		p.Norm(in, x, f.preNorm2)
		logits := p.Buf(n * f.nExpert)
		if err := f.logits(p.Pool, x, n, logits, p.Buf(n*E), f.eps); err != nil {
			return err
		}
		p.Timings.Router += p.Clock.Since(t0)
		out := p.Buf(n * E)
		// the dense MLP runs while the routed experts' bytes are read
		var err error
		if mlp, err = p.RunMoEWith(ctx, layer, in, logits, x, out, f, h); err != nil {
			return err
		}
		p.Norm(out, out, f.postNorm2)
		for i := range mlp {
			mlp[i] += out[i]
		}
	}
	p.Norm(mlp, mlp, f.postNorm)
	for i := range x {
		x[i] = mlp[i] + x[i]
	}
	if f.hasOutScale {
		for i := range x {
			x[i] *= f.outScale
		}
	}
	return nil
}

// Side implements model.SideWork for a layer with experts: the dense MLP
// beside them, post-normed, for the N rows h.
func (f *ffn) Side(p *model.Pass, h []float32) ([]float32, error) {
	mlp, err := f.mlp.Run(p, h)
	if err != nil {
		return nil, err
	}
	p.Norm(mlp, mlp, f.postNorm1)
	return mlp, nil
}

// logits writes the router logits of the n attention outputs x:
// Wgate_inp (RMSNorm(x) · 1/√n_embd · ffn_gate_inp.scale); tmp is n×n_embd scratch.
func (f *ffn) logits(pool *kernels.Pool, x []float32, n int, logits, tmp []float32, eps float32) error {
	model.NormRows(tmp, x, n, eps, nil)
	E := len(f.routerScale)
	for i := range tmp {
		tmp[i] = (tmp[i] * f.invSqrtE) * f.routerScale[i%E]
	}
	return model.MatMul(pool, &f.router, tmp, n, logits)
}

// Peek implements model.Peeker: the layer's whole router applied to n
// attention outputs (the router input this hook hands to the MoE).
func (f *ffn) Peek(pool *kernels.Pool, x []float32, n int, logits []float32) error {
	if !f.moe {
		return fmt.Errorf("gemma4: layer without experts has no router")
	}
	if len(logits) < n*f.nExpert {
		return fmt.Errorf("gemma4: peek into %d logits, router has %d for %d rows", len(logits), f.nExpert, n)
	}
	if cap(f.peekTmp) < len(x) {
		f.peekTmp = make([]float32, len(x))
	}
	return f.logits(pool, x, n, logits[:n*f.nExpert], f.peekTmp[:len(x)], f.eps)
}
