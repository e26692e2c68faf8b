package gen

import (
	"math"
	"strings"
)

// Weight distributions. The projections follow the golden tiny models'
// generator (N(0, 0.02), router N(0, 0.1), output N(0, 0.05), norms
// 1 + 0.1·N(0, 1)); the residual-stream scale is chosen so that a forward pass
// stays finite and varied over hundreds of tokens at the real widths and depths
// (see TestForwardRouting):
//
//   - token_embd is N(0, 1) so that the embedding, not the sum of 48 random
//     layer outputs, carries most of the residual stream; layer outputs are
//     kept at a fraction of it (attn_output N(0, 0.004), expert down
//     N(0, 0.02)), so hidden states stay token-specific and of similar size at
//     every depth.
//   - Routing realism uses "anchor" dimensions: the last AnchorDims dimensions
//     of the residual stream hold a constant value for every token (like the
//     massive activations of real LLMs). Nothing reads them but the router and
//     nothing writes them (the matching columns of every projection that reads
//     the residual, and the matching rows of every projection that writes it,
//     are zero), so after RMSNorm they are a token-independent input whose
//     router weights act as a per-expert bias: the popularity of each expert.
//     gpt-oss has a real router bias (ffn_gate_inp.bias) and uses it instead.
const (
	embedStd     = 1.0
	projStd      = 0.02
	projOutStd   = 0.004
	expertStd    = 0.02
	expertOutStd = 0.02
	routerStd    = 0.1
	outputStd    = 0.05
	biasStd      = 0.02
	sinkStd      = 1.0
	normJitter   = 0.1
	anchorValue  = 8.0
	nAnchorDims  = 4
	layerVarGain = 0.01 // per-layer growth of the residual's per-element variance (calibrated, see TestForwardRouting)
)

// Pool sizing (variables so tests can exercise the pooled path on tiny models).
var (
	freshLimit uint64 = 1 << 19 // tensors up to this many elements are quantized from fresh floats
	poolBlocks        = 1 << 13 // quantized blocks per pool
)

// DefaultRoutingSkew is the --routing-skew default: the standard deviation of
// the per-expert popularity offsets in units of the router logits' token-to-token
// standard deviation. Calibrated so the generated routing's popular-set hit rate
// is close to Qwen3-30B-A3B's in the real traces (see RoutingStats).
const DefaultRoutingSkew = 1.0

// anchorDims returns how many anchor dimensions preset p's residual stream has.
func anchorDims(p *Preset) int {
	if p.Arch == ArchGPTOSS || p.NEmbd < 16*nAnchorDims {
		return 0
	}
	return nAnchorDims
}

// stdOf is the standard deviation of a tensor's random part.
func stdOf(t *TensorSpec) float64 {
	switch t.Role {
	case RoleEmbed:
		return embedStd
	case RoleOutput:
		return outputStd
	case RoleProj:
		return projStd
	case RoleProjOut:
		return projOutStd
	case RoleExpert:
		return expertStd
	case RoleExpertOut:
		return expertOutStd
	case RoleRouter:
		return routerStd
	case RoleBias:
		return biasStd
	case RoleSink:
		return sinkStd
	}
	return 0
}

// readsResidual reports whether t's rows are dot products with the normalized
// residual stream (its last anchor columns are zero).
func readsResidual(p *Preset, t *TensorSpec) bool {
	switch t.Role {
	case RoleProj, RoleExpert, RoleOutput:
		return int(t.Dims[0]) == p.NEmbd
	}
	return false
}

// writesResidual reports whether t's rows are residual-stream dimensions (its
// anchor rows are zero).
func writesResidual(p *Preset, t *TensorSpec) bool {
	switch t.Role {
	case RoleProjOut, RoleExpertOut:
		return len(t.Dims) >= 2 && int(t.Dims[1]) == p.NEmbd
	}
	return false
}

// weightGen fills rows of one tensor. It is immutable and shared by the
// workers of that tensor.
type weightGen struct {
	p       *Preset
	t       *TensorSpec
	anchors int
	seed    uint64
	skew    float64
	pop     []float64 // per-expert popularity offsets (routers and gpt-oss router biases)
}

func newWeightGen(p *Preset, t *TensorSpec, seed uint64, skew float64) *weightGen {
	g := &weightGen{p: p, t: t, anchors: anchorDims(p), seed: seed, skew: skew}
	isRouterBias := t.Role == RoleBias && strings.HasSuffix(t.Name, "ffn_gate_inp.bias")
	if t.Role == RoleRouter || isRouterBias {
		g.pop = popularity(seed, p.NExpert, t.Layer)
	}
	return g
}

// popularity draws the per-expert popularity z-scores of a layer. Router and
// router bias of one layer share them.
func popularity(seed uint64, nExpert, layer int) []float64 {
	r := newRNG(seed, "popularity", uint64(layer))
	z := make([]float64, nExpert)
	for i := range z {
		z[i] = r.norm()
	}
	return z
}

// zeroRow reports whether row r is entirely zero (an anchor row of a tensor
// that writes the residual stream).
func (g *weightGen) zeroRow(r uint64) bool {
	if g.anchors == 0 || !writesResidual(g.p, g.t) {
		return false
	}
	d := int(r % g.t.Dims[1])
	return d >= g.p.NEmbd-g.anchors
}

// row fills dst (one ne0-long row, row index r) with floats.
func (g *weightGen) row(r uint64, rg *rng, dst []float32) {
	t, p := g.t, g.p
	n := len(dst)
	std := stdOf(t)
	switch t.Role {
	case RoleNorm:
		for i := range dst {
			dst[i] = float32(1 + normJitter*rg.norm())
		}
		if n == p.NEmbd {
			for i := n - g.anchors; i < n; i++ {
				dst[i] = 1
			}
		}
		return
	case RoleRopeFreqs, RoleScale:
		for i := range dst {
			dst[i] = 1
		}
		return
	case RoleRouter:
		for i := range dst {
			dst[i] = float32(std * rg.norm())
		}
		if g.anchors > 0 {
			// Each anchor input is x̂_a = M/rms; the logit noise is
			// σ_r·|x̂_rest| = σ_r·sqrt((E-A)·v_l)/rms: the rms cancels.
			E, A := float64(p.NEmbd), float64(g.anchors)
			v := embedStd*embedStd + layerVarGain*float64(t.Layer)
			w := g.skew * routerStd * math.Sqrt((E-A)*v) * g.pop[r] / (A * anchorValue)
			for i := n - g.anchors; i < n; i++ {
				dst[i] = float32(w)
			}
		}
		return
	}
	if g.zeroRow(r) {
		clear(dst)
		return
	}
	for i := range dst {
		dst[i] = float32(std * rg.norm())
	}
	if g.pop != nil && t.Role == RoleBias { // gpt-oss router bias: popularity offsets
		noise := routerStd * math.Sqrt(float64(p.NEmbd))
		for i := range dst {
			dst[i] += float32(g.skew * noise * g.pop[i])
		}
	}
	if g.anchors > 0 {
		switch {
		case t.Role == RoleEmbed:
			for i := n - g.anchors; i < n; i++ {
				dst[i] = anchorValue
			}
		case readsResidual(p, t):
			clear(dst[n-g.anchors:])
		}
	}
}
