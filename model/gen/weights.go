package gen

import (
	"math"
	"slices"
	"strings"
)

// Weight distributions. The projections follow the golden tiny models'
// generator (N(0, 0.02), router N(0, 0.1), output N(0, 0.05), norms
// 1 + 0.1·N(0, 1)); the residual-stream scale is chosen so that a forward pass
// stays finite and varied over hundreds of tokens at the real widths and depths
// (measured with pipe run --route-trace; see the package notes):
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
//   - Token-to-token reuse (qwen3moe): in real models consecutive tokens share
//     context, so the previous token's experts are often right again beyond
//     what popularity explains. Layer 0's first KV group is a "previous-token
//     head" (as real models have): its q and k read only the anchor inputs, so
//     they are constant vectors, placed on the fastest RoPE frequency pairs with
//     k's phase one position ahead, so each query attends ≈ 90 % to the previous
//     token; its v copies the routing dimensions (the first routeDims of the
//     residual) and attn_output writes them back with gain copyGain. Routers
//     read only the routing dimensions, which then hold e_t + α·e_{t-1}: the
//     router noise of consecutive tokens is correlated, as in real traces.
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
	layerVarGain = 0.01 // per-layer growth of the residual's per-element variance (calibrated with pipe run --route-trace)
	copyGain     = 1.0  // α: layer 0\'s copy heads add α·x̂_{t-1} on the routing dimensions
	copyPairs    = 4    // RoPE frequency pairs the copy heads\' q and k use (the fastest ones)
)

// Pool sizing (variables so tests can exercise the pooled path on tiny models).
var (
	freshLimit uint64 = 1 << 19 // tensors up to this many elements are quantized from fresh floats
	poolBlocks        = 1 << 13 // quantized blocks per pool
)

// DefaultRoutingSkew is the --routing-skew default: the standard deviation of
// the per-expert popularity offsets in units of the router logits' token-to-token
// standard deviation. Calibrated with `pipe run --route-trace` (seed 1, decode
// phase, replay's Trace.Locality) against the real Qwen3-30B-A3B trace:
//
//	                                             prev-token hit  popular-set hit
//	real Qwen3-30B-A3B-Q4_K_M (top-6, 128 tok)        0.380           0.375
//	qwen3-30b-a3b 6 layers, skew 1.0, no copy head    0.252           0.420
//	qwen3-30b-a3b 6 layers, skew 1.0, copy head       0.468           0.449
//	qwen3-30b-a3b 6 layers, skew 0.75                 0.397           0.366
//	qwen3-30b-a3b 48 layers, skew 0.8 (64 tok)        0.313           0.357
//	qwen3-30b-a3b 48 layers, skew 0.9 (64 tok)        0.362           0.396
//	uniform routing (top-8 of 128)                    0.062           0.062
//
// 0.85 sits between the two full-depth runs. Per layer the real model is
// near-uniform at layer 0 (0.07 / 0.17) and ≈ 0.35 elsewhere; the generated
// one is highest at layer 0 (≈ 0.45) and ≈ 0.3–0.45 elsewhere.
const DefaultRoutingSkew = 0.85

// anchorDims returns how many anchor dimensions preset p's residual stream has.
func anchorDims(p *Preset) int {
	if p.NoAnchors || p.NEmbd < 16*nAnchorDims {
		return 0
	}
	return nAnchorDims
}

// embedScale multiplies token_embd (its random part and its anchors): for
// gemma4, which multiplies the embeddings by √n_embd, 1/√n_embd, so that the
// residual stream after that factor is N(0, 1) with anchors at anchorValue,
// as for the other architectures (at scale 1 every logit of the tied output
// would saturate the soft-cap); 1 otherwise.
func embedScale(p *Preset) float64 {
	if p.ScaledEmbed {
		return 1 / math.Sqrt(float64(p.NEmbd))
	}
	return 1
}

// embedAnchor is the anchor value of a token_embd whose random part has
// standard deviation std (anchorValue scaled as the embedding is).
func embedAnchor(std float64) float32 { return float32(anchorValue * (std / embedStd)) }

// stdOf is the standard deviation of tensor t's random part.
func stdOf(p *Preset, t *TensorSpec) float64 {
	switch t.Role {
	case RoleEmbed:
		return embedStd * embedScale(p)
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
	copy    bool      // layer 0 tensor of a model with the previous-token copy head
}

// hasCopyHead reports whether preset p gets the previous-token copy head and
// routers restricted to the routing dimensions.
func hasCopyHead(p *Preset) bool {
	return p.CopyHead && anchorDims(p) > 0 && p.HeadDim >= 2*copyPairs && p.NEmbd >= routeDimsOf(p)+nAnchorDims
}

// routeDimsOf is the number of routing dimensions: one attention head's width.
func routeDimsOf(p *Preset) int { return p.HeadDim }

// copyRows returns the row range of t that belongs to the copy head (q rows of
// the first KV group's query heads, k and v rows of KV head 0), or ok=false.
func (g *weightGen) copyRows() (lo, hi uint64, ok bool) {
	if !g.copy {
		return 0, 0, false
	}
	hd := uint64(g.p.HeadDim)
	switch {
	case strings.HasSuffix(g.t.Name, "attn_q.weight"):
		return 0, hd * uint64(g.p.NHead/g.p.NHeadKV), true
	case strings.HasSuffix(g.t.Name, "attn_k.weight"), strings.HasSuffix(g.t.Name, "attn_v.weight"):
		return 0, hd, true
	case strings.HasSuffix(g.t.Name, "attn_output.weight"):
		return 0, g.t.Rows(), true
	}
	return 0, 0, false
}

// special reports whether row r is generated from floats even when the
// tensor is assembled from pools (copy-head rows).
func (g *weightGen) special(r uint64) bool {
	lo, hi, ok := g.copyRows()
	return ok && r >= lo && r < hi
}

func newWeightGen(p *Preset, t *TensorSpec, seed uint64, skew float64) *weightGen {
	g := &weightGen{p: p, t: t, anchors: anchorDims(p), seed: seed, skew: skew}
	g.copy = t.Layer == 0 && hasCopyHead(p)
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
	switch g.t.Role {
	case RoleNorm:
		g.normRow(rg, dst)
	case RoleConv:
		convRow(rg, dst)
	case RoleSSMA:
		ssmARow(rg, dst)
	case RoleExpertIDs:
		g.expertIDsRow(rg, dst)
	case RoleRopeFreqs:
		ropeFreqsRow(g.p, dst)
	case RoleScale:
		g.scaleRow(dst)
	case RoleRouter:
		g.routerRow(r, rg, dst)
	default:
		g.matrixRow(r, rg, dst)
	}
}

// normRow fills a norm weight: 1 with a small jitter, exactly 1 on the
// anchor dimensions of an n_embd-long norm.
func (g *weightGen) normRow(rg *rng, dst []float32) {
	n := len(dst)
	for i := range dst {
		dst[i] = float32(1 + float64(normJitter*rg.norm())) // no FMA on arm64
	}
	if n == g.p.NEmbd {
		for i := n - g.anchors; i < n; i++ {
			dst[i] = 1
		}
	}
}

// convRow fills a convolution kernel row with N(0, 1/n).
func convRow(rg *rng, dst []float32) {
	n := len(dst)
	for i := range dst {
		dst[i] = float32(rg.norm() / math.Sqrt(float64(n)))
	}
}

// expertIDsRow fills one token's hash-routing row: len(dst) distinct expert
// ids, uniform over the preset's experts, as floats (exact below 2^24) that
// encodeRow stores as I32.
func (g *weightGen) expertIDsRow(rg *rng, dst []float32) {
	for i := 0; i < len(dst); {
		if e := float32(rg.intn(g.p.NExpert)); !slices.Contains(dst[:i], e) {
			dst[i] = e
			i++
		}
	}
}

// ssmARow fills an SSM A row with negative log-normal decay rates.
func ssmARow(rg *rng, dst []float32) {
	for i := range dst {
		dst[i] = -float32(math.Exp(0.5 * rg.norm()))
	}
}

// ropeFreqsRow fills rope frequency factors as llama.cpp's converter does:
// 1 for the rotated pairs, 1e30 (no rotation) for the rest of a
// "proportional" full-attention head.
func ropeFreqsRow(p *Preset, dst []float32) {
	for i := range dst {
		dst[i] = 1
		if i >= ropePairsFull(p) {
			dst[i] = 1e30
		}
	}
}

// scaleRow fills a scale vector: 1, or √n_embd for gemma4's router scale.
func (g *weightGen) scaleRow(dst []float32) {
	for i := range dst {
		dst[i] = 1
	}
	if strings.HasSuffix(g.t.Name, "ffn_gate_inp.scale") {
		// gemma4's router reads RMSNorm(x)/√n_embd·scale: √n_embd
		// gives the router the unit-RMS input the logit noise and
		// popularity weights are calibrated for
		for i := range dst {
			dst[i] = float32(math.Sqrt(float64(g.p.NEmbd)))
		}
	}
}

// routerRow fills row r (expert r) of a router: noise over the dimensions
// the router reads and, on the anchor dimensions, the weight that shifts
// the expert's logit by its popularity.
func (g *weightGen) routerRow(r uint64, rg *rng, dst []float32) {
	t, p := g.t, g.p
	n := len(dst)
	std := stdOf(p, t)
	read := n - g.anchors // dimensions the router reads
	// explicit roundings: no FMA on arm64
	rstd, v := std, float64(embedStd*embedStd)+float64(layerVarGain*float64(t.Layer))
	if hasCopyHead(p) {
		// same logit noise as reading every dimension, from the routing
		// dimensions only; those hold e_t + α·e_{t-1}
		read = routeDimsOf(p)
		rstd = std * math.Sqrt(float64(n-g.anchors)/float64(read))
		v += copyGain * copyGain * embedStd * embedStd
	}
	for i := range dst {
		if i < read {
			dst[i] = float32(rstd * rg.norm())
		} else {
			dst[i] = 0
		}
	}
	if g.anchors > 0 {
		// Each anchor input is x̂_a = M/rms; the logit noise is
		// σ·|x̂_read| = σ·sqrt(read·v_l)/rms: the rms cancels.
		A := float64(g.anchors)
		w := g.skew * rstd * math.Sqrt(float64(read)*v) * g.pop[r] / (A * anchorValue)
		for i := n - g.anchors; i < n; i++ {
			dst[i] = float32(w)
		}
	}
}

// matrixRow fills row r of any other tensor: a copy-head row, an all-zero
// anchor row, or N(0, std²) noise with the router bias's popularity
// offsets and the anchor columns set.
func (g *weightGen) matrixRow(r uint64, rg *rng, dst []float32) {
	t, p := g.t, g.p
	n := len(dst)
	std := stdOf(p, t)
	if g.special(r) {
		g.copyRow(r, rg, dst)
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
				dst[i] = embedAnchor(std)
			}
		case readsResidual(p, t):
			clear(dst[n-g.anchors:])
		}
	}
}

// copyRow fills row r of one of layer 0's copy-head tensors.
func (g *weightGen) copyRow(r uint64, rg *rng, dst []float32) {
	p, t := g.p, g.t
	n := len(dst)
	hd := p.HeadDim
	half := hd / 2
	clear(dst)
	switch {
	case strings.HasSuffix(t.Name, "attn_q.weight"), strings.HasSuffix(t.Name, "attn_k.weight"):
		// q = (1, 0) and k = (cos θ_i, sin θ_i) on NEOX pairs (i, i+hd/2) for
		// the copyPairs fastest frequencies θ_i = base^(-2i/hd): q·k peaks at
		// the previous position. Written through the anchor inputs only.
		j := int(r) % hd
		i := j % half
		if i >= copyPairs {
			return
		}
		var val float64
		isK := strings.HasSuffix(t.Name, "attn_k.weight")
		theta := math.Pow(float64(p.RopeBase), -2*float64(i)/float64(hd))
		switch {
		case !isK && j < half:
			val = 1
		case isK && j < half:
			val = math.Cos(theta)
		case isK:
			val = math.Sin(theta)
		}
		for a := n - g.anchors; a < n; a++ {
			dst[a] = float32(val / float64(g.anchors))
		}
	case strings.HasSuffix(t.Name, "attn_v.weight"):
		dst[int(r)%hd] = 1 // v_j = x̂[j], j < routeDims
	case strings.HasSuffix(t.Name, "attn_output.weight"):
		// row r is residual dimension r; columns are (head, j). The copy heads
		// (the first NHead/NHeadKV heads) write dimension j of v back to
		// residual dimension j; other heads' columns are random as usual.
		group := hd * (p.NHead / p.NHeadKV)
		for i := group; i < n; i++ {
			dst[i] = float32(projOutStd * rg.norm())
		}
		if int(r) < routeDimsOf(p) {
			nh := p.NHead / p.NHeadKV
			for h := 0; h < nh; h++ {
				dst[h*hd+int(r)] = float32(copyGain / float64(nh))
			}
		}
		if g.zeroRow(r) {
			clear(dst)
		}
	}
}

// ropePairsFull is the number of rotated pairs of a full-attention head
// (llama.cpp's converter: head_dim_full · partial_rotary_factor / 2).
func ropePairsFull(p *Preset) int {
	f := p.RopePartialFull
	if f == 0 {
		f = 1
	}
	return int(float64(p.HeadDimFull) * f / 2)
}
