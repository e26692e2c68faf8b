// Package gptoss is OpenAI's gpt-oss architecture (gpt-oss-20b,
// gpt-oss-120b), following llama.cpp's LLM_ARCH_OPENAI_MOE graph
// (src/models/openai-moe-iswa.cpp) and build_moe_ffn:
//
//	x = embd(tokens)
//	per layer: h = RMSNorm(x)·attn_norm; q,k,v = Wq h + bq, Wk h + bk, Wv h + bv
//	           q,k per head: NeoX RoPE with YaRN scaling
//	           GQA attention with one sink logit per head in the softmax
//	           denominator; even layers see only the last SlidingWindow
//	           positions (query p sees key j iff 0 <= p-j < window), odd
//	           layers are causal over the whole context
//	           x = Wo attn + bo + x
//	           h = RMSNorm(x)·post_attention_norm; logits = Wgate_inp h + b
//	           x = x + Σ_rank w_r · expert_e(h)                     (the MoE seam)
//	             expert_e(h) = Wdown_e swiglu_oai(Wgate_e h + bg_e, Wup_e h + bu_e) + bd_e
//	             w = softmax over the top-k raw logits
//	logits = Woutput RMSNorm(x)·output_norm
//
// swiglu_oai(g, u) = min(g, 7)·σ(1.702·min(g, 7)) · (clamp(u, ±7) + 1), with
// llama.cpp's hard-coded alpha and limit. The routed experts are computed
// behind model.MoE; this package describes their math (model.Experts with
// SwiGLU-OAI and the per-expert biases: ComputeExpert, ComputeExperts) and
// the gating rule (model.TopKSoftmax). Every shape comes from
// GGUF metadata.
//
// The package is the whole family (family.Family): Family is below, its
// `pipe gen` presets, tensors, metadata and tokenizer in gen.go. It
// registers itself as "gpt-oss" on import.
//
// Buffers: dense weights are borrowed from the DenseSource for the model's
// lifetime; the per-expert biases are copied into float32 slices at load.
// The expert math only reads the model and writes the caller's buffers, so
// it is safe for concurrent use; Forward on one State is not re-entrant.
package gptoss

import (
	"fmt"
	"math"

	"github.com/pipe-engine/pipe/kernels"
	"github.com/pipe-engine/pipe/model"
	"github.com/pipe-engine/pipe/model/family"
)

func init() { family.Register(Family{}) }

// Family is the gpt-oss family: the model here, the generator side in
// gen.go; the common keys only (its sliding window and YaRN keys are read
// for every file), and a KV cache of the whole context in every layer, the
// sliding-window layers' too (model.AttentionOnly).
type Family struct{ model.AttentionOnly }

// Arch implements family.Family.
func (Family) Arch() string { return "gpt-oss" }

// New implements model.Family.
func (Family) New(d *model.Desc, src model.DenseSource, opt model.Options) (model.Model, error) {
	return New(d, src, opt)
}

// SwiGLU-OAI constants, hard-coded in llama.cpp's build_moe_ffn (no GGUF key).
const (
	swigluAlpha = float32(1.702)
	swigluLimit = float32(7.0)
)

type layer struct {
	sinks, gateB []float32
	swa          bool
}

// Model is a loaded gpt-oss: the shared decoder skeleton (biased
// projections, sinks, sliding windows on alternate layers, a routed FFN
// with a biased router) plus the biased SwiGLU-OAI experts.
type Model struct {
	*model.Decoder
	*model.Experts
	d                   *model.Desc
	nEmbd, headDim, nFF int
	nExpert, k, window  int
	rope                model.YaRN
	layers              []layer
}

// New builds a gpt-oss model from its description and dense weights.
func New(d *model.Desc, src model.DenseSource, opt model.Options) (model.Model, error) {
	hp := d.HParams
	k, err := model.ExpertsUsed(hp, opt)
	if err != nil {
		return nil, err
	}
	m := &Model{d: d, nEmbd: hp.NEmbd, headDim: hp.HeadDim, nFF: hp.NFFExp,
		nExpert: hp.NExpert, k: k, window: hp.SlidingWindow}
	if hp.NLayer <= 0 || m.nEmbd <= 0 || hp.NHead <= 0 || hp.NHeadKV <= 0 || hp.NHead%hp.NHeadKV != 0 ||
		m.nExpert <= 0 || m.k <= 0 || m.nFF <= 0 || m.headDim <= 0 || m.headDim%2 != 0 ||
		hp.HeadDimV != m.headDim || hp.NRot != m.headDim || m.window <= 0 {
		return nil, fmt.Errorf("%w: gpt-oss hyper-parameters %+v", model.ErrBadModel, hp)
	}
	eps := hp.RMSEps
	if eps == 0 {
		eps = 1e-5
	}
	if m.rope, err = model.NewYaRN(d, m.headDim, 0, false); err != nil {
		return nil, err
	}
	m.Decoder = &model.Decoder{Pool: opt.Pool, NEmbd: hp.NEmbd, Eps: eps, Timings: opt.Timings, Clock: opt.Clock}
	m.Experts = &model.Experts{Arch: "gpt-oss", Pool: opt.Pool, NEmbd: m.nEmbd, NFF: m.nFF, NExpert: m.nExpert,
		Act: func(out, gate, up []float32) { SwiGLUOAI(out, gate, up, swigluAlpha, swigluLimit) }}
	ld := model.NewLoader(d, src)
	ld.Embeddings(m.Decoder)
	for l := 0; l < hp.NLayer; l++ {
		L, dl := m.loadLayer(ld, l)
		m.layers = append(m.layers, L)
		m.Layers = append(m.Layers, dl)
	}
	if err := ld.CheckVocab(m.Decoder, hp.NVocab); err != nil {
		return nil, err
	}
	return m, nil
}

// loadLayer loads layer l: the expert biases and types, and the decoder
// layer (attention with biases and sinks, the biased router).
func (m *Model) loadLayer(ld *model.Loader, l int) (layer, model.Layer) {
	hp := m.d.HParams
	p := fmt.Sprintf("blk.%d.", l)
	g := model.Geom{NHead: hp.NHead, NHeadKV: hp.NHeadKV, HeadDim: m.headDim, Rope: &m.rope,
		Scale: float32(1 / math.Sqrt(float64(m.headDim)))}
	L := layer{
		sinks: ld.Vector(p+"attn_sinks.weight", hp.NHead),
		gateB: ld.Vector(p+"ffn_gate_inp.bias", m.nExpert),
		swa:   isSWA(hp, l),
	}
	x := m.AddLayer(ld, l)
	x.GateB = ld.Vector(p+"ffn_gate_exps.bias", m.nFF*m.nExpert)
	x.UpB = ld.Vector(p+"ffn_up_exps.bias", m.nFF*m.nExpert)
	x.DownB = ld.Vector(p+"ffn_down_exps.bias", m.nEmbd*m.nExpert)
	if L.swa {
		g.Window = m.window
	}
	a := ld.Attention(l, m.nEmbd, g)
	a.Bq = ld.Vector(p+"attn_q.bias", g.QDim())
	a.Bk = ld.Vector(p+"attn_k.bias", g.KVDim())
	a.Bv = ld.Vector(p+"attn_v.bias", g.KVDim())
	a.Bo = ld.Vector(p+"attn_output.bias", m.nEmbd)
	a.Sinks = L.sinks
	ffn := &model.RoutedFFN{
		Norm:     ld.Vector(p+"post_attention_norm.weight", m.nEmbd),
		Gate:     ld.Matrix(p+"ffn_gate_inp.weight", m.nEmbd, m.nExpert),
		GateBias: L.gateB,
	}
	return L, model.Layer{Attn: a, FFN: ffn}
}

// isSWA reports whether layer l uses the sliding window: the file's
// per-layer pattern when it has one, else llama.cpp's gpt-oss default
// (set_swa_pattern(2): even layers slide, odd layers are full attention).
func isSWA(hp model.HParams, l int) bool {
	if l < len(hp.SlidingWindowPattern) {
		return hp.SlidingWindowPattern[l]
	}
	return l%2 == 0
}

// Desc implements model.Model.
func (m *Model) Desc() *model.Desc { return m.d }

// Router implements model.Model: top-k over the biased logits, softmax over
// the k selected (llama.cpp's SOFTMAX_WEIGHT gating).
func (m *Model) Router(int) model.RouterSpec {
	return model.RouterSpec{Gating: model.TopKSoftmax, NExpert: m.nExpert, K: m.k}
}

// SwiGLUOAI writes llama.cpp's swiglu_oai(gate, up) into out (out may alias
// gate): x = min(gate, limit), y = clamp(up, -limit, limit),
// out = x/(1+exp(-alpha·x)) · (y+1), in float32 as ggml computes it. The
// exponentials run oaiChunk at a time through kernels.Exp (math.Exp's
// values, vectorized where the assembly runs).
func SwiGLUOAI(out, gate, up []float32, alpha, limit float32) {
	var e [oaiChunk]float32
	for i0 := 0; i0 < len(out); i0 += oaiChunk {
		n := min(oaiChunk, len(out)-i0)
		for j := 0; j < n; j++ {
			e[j] = alpha * -oaiGate(gate[i0+j], limit)
		}
		kernels.Exp(e[:n])
		for j := 0; j < n; j++ {
			i := i0 + j
			y := up[i]
			if y < -limit {
				y = -limit
			} else if y > limit {
				y = limit
			}
			glu := oaiGate(gate[i], limit) / (1 + e[j])
			out[i] = glu * (y + 1)
		}
	}
}

// oaiChunk is how many exponentials SwiGLUOAI computes at once.
const oaiChunk = 256

// oaiGate is std::min(x, limit), which keeps a NaN x.
func oaiGate(x, limit float32) float32 {
	if !(x < limit) && !math.IsNaN(float64(x)) {
		return limit
	}
	return x
}
