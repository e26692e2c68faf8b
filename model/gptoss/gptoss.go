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
// behind model.MoE; this package supplies their math (ComputeExpert, biases
// included) and the gating rule (model.TopKSoftmax). Every shape comes from
// GGUF metadata. The package registers itself as "gpt-oss" on import.
//
// Buffers: dense weights are borrowed from the DenseSource for the model's
// lifetime; the per-expert biases are copied into float32 slices at load.
// ComputeExpert only reads the model and writes the caller's buffers, so it
// is safe for concurrent use; Forward on one State is not re-entrant.
package gptoss

import (
	"context"
	"fmt"
	"math"
	"time"

	"github.com/pipe-engine/pipe/kernels"
	"github.com/pipe-engine/pipe/model"
	"github.com/pipe-engine/pipe/quant"
)

func init() { model.Register("gpt-oss", New) }

// SwiGLU-OAI constants, hard-coded in llama.cpp's build_moe_ffn (no GGUF key).
const (
	swigluAlpha = float32(1.702)
	swigluLimit = float32(7.0)
)

type layer struct {
	attnNorm, postNorm           []float32
	bq, bk, bv, bo, sinks, gateB []float32
	expGateB, expUpB, expDownB   []float32 // [expert][n_ff] / [expert][n_embd]
	wq, wk, wv, wo, gateInp      model.Weight
	gateT, upT, downT            quant.Type
	swa                          bool
}

// Model is a loaded gpt-oss.
type Model struct {
	d                     *model.Desc
	pool                  *kernels.Pool
	nLayer, nEmbd, nHead  int
	nHeadKV, headDim, nFF int
	nExpert, k, nVocab    int
	window                int
	eps                   float32
	rope                  Rope
	tokEmbd, output       model.Weight
	outNorm               []float32
	layers                []layer
	tm                    *model.Timings
}

// New builds a gpt-oss model from its description and dense weights.
func New(d *model.Desc, src model.DenseSource, opt model.Options) (model.Model, error) {
	hp := d.HParams
	m := &Model{
		d: d, pool: opt.Pool,
		nLayer: hp.NLayer, nEmbd: hp.NEmbd, nHead: hp.NHead, nHeadKV: hp.NHeadKV,
		headDim: hp.HeadDim, nFF: hp.NFFExp, nExpert: hp.NExpert, k: hp.NExpertUsed,
		nVocab: hp.NVocab, eps: hp.RMSEps, window: hp.SlidingWindow, tm: opt.Timings,
	}
	if m.tm == nil {
		m.tm = &model.Timings{}
	}
	if opt.ExpertsUsed > 0 {
		if opt.ExpertsUsed > m.nExpert {
			return nil, fmt.Errorf("--n-expert-used %d exceeds the model's %d experts", opt.ExpertsUsed, m.nExpert)
		}
		m.k = opt.ExpertsUsed
	}
	if m.nLayer <= 0 || m.nEmbd <= 0 || m.nHead <= 0 || m.nHeadKV <= 0 || m.nHead%m.nHeadKV != 0 ||
		m.nExpert <= 0 || m.k <= 0 || m.k > m.nExpert || m.nFF <= 0 || m.headDim <= 0 || m.headDim%2 != 0 ||
		hp.HeadDimV != m.headDim || hp.NRot != m.headDim || m.window <= 0 {
		return nil, fmt.Errorf("%w: gpt-oss hyper-parameters %+v", model.ErrBadModel, hp)
	}
	if m.eps == 0 {
		m.eps = 1e-5
	}
	rope, err := newRope(d, m.headDim)
	if err != nil {
		return nil, err
	}
	m.rope = rope

	ld := model.NewLoader(d, src)
	m.tokEmbd = ld.Matrix("token_embd.weight", m.nEmbd, -1)
	m.output = ld.Matrix("output.weight", m.nEmbd, -1)
	if ld.Err() == nil && m.output.Data == nil {
		m.output = m.tokEmbd // tied embeddings
	}
	m.outNorm = ld.Vector("output_norm.weight", m.nEmbd)
	qd, kvd := m.nHead*m.headDim, m.nHeadKV*m.headDim
	for l := 0; l < m.nLayer; l++ {
		p := fmt.Sprintf("blk.%d.", l)
		L := layer{
			attnNorm: ld.Vector(p+"attn_norm.weight", m.nEmbd),
			postNorm: ld.Vector(p+"post_attention_norm.weight", m.nEmbd),
			wq:       ld.Matrix(p+"attn_q.weight", m.nEmbd, qd),
			wk:       ld.Matrix(p+"attn_k.weight", m.nEmbd, kvd),
			wv:       ld.Matrix(p+"attn_v.weight", m.nEmbd, kvd),
			wo:       ld.Matrix(p+"attn_output.weight", qd, m.nEmbd),
			bq:       ld.Vector(p+"attn_q.bias", qd),
			bk:       ld.Vector(p+"attn_k.bias", kvd),
			bv:       ld.Vector(p+"attn_v.bias", kvd),
			bo:       ld.Vector(p+"attn_output.bias", m.nEmbd),
			sinks:    ld.Vector(p+"attn_sinks.weight", m.nHead),
			gateInp:  ld.Matrix(p+"ffn_gate_inp.weight", m.nEmbd, m.nExpert),
			gateB:    ld.Vector(p+"ffn_gate_inp.bias", m.nExpert),
			gateT:    ld.ExpertType(p+"ffn_gate_exps.weight", m.nEmbd, m.nFF, m.nExpert),
			upT:      ld.ExpertType(p+"ffn_up_exps.weight", m.nEmbd, m.nFF, m.nExpert),
			downT:    ld.ExpertType(p+"ffn_down_exps.weight", m.nFF, m.nEmbd, m.nExpert),
			expGateB: ld.Vector(p+"ffn_gate_exps.bias", m.nFF*m.nExpert),
			expUpB:   ld.Vector(p+"ffn_up_exps.bias", m.nFF*m.nExpert),
			expDownB: ld.Vector(p+"ffn_down_exps.bias", m.nEmbd*m.nExpert),
			swa:      isSWA(hp, l),
		}
		m.layers = append(m.layers, L)
	}
	if err := ld.Err(); err != nil {
		return nil, err
	}
	if m.tokEmbd.Rows != m.nVocab && m.nVocab > 0 {
		return nil, fmt.Errorf("%w: token_embd has %d rows, vocabulary %d", model.ErrBadModel, m.tokEmbd.Rows, m.nVocab)
	}
	m.nVocab = m.output.Rows
	return m, nil
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

// NewState implements model.Model.
func (m *Model) NewState(nCtx int, kv model.KVType) (*model.State, error) {
	return model.NewKV(m.nLayer, nCtx, m.nHeadKV*m.headDim, kv)
}

// ExpertScratchFloats implements model.Model: gate and up outputs per token.
func (m *Model) ExpertScratchFloats() int { return m.nFF }

// SwiGLUOAI writes llama.cpp's swiglu_oai(gate, up) into out (out may alias
// gate): x = min(gate, limit), y = clamp(up, -limit, limit),
// out = x/(1+exp(-alpha·x)) · (y+1), in float32 as ggml computes it.
func SwiGLUOAI(out, gate, up []float32, alpha, limit float32) {
	for i := range out {
		x := gate[i]
		if !(x < limit) && !math.IsNaN(float64(x)) { // std::min(x, limit) keeps NaN
			x = limit
		}
		y := up[i]
		if y < -limit {
			y = -limit
		} else if y > limit {
			y = limit
		}
		e := float32(math.Exp(float64(float32(alpha * -x))))
		glu := x / (1 + e)
		out[i] = glu * (y + 1)
	}
}

// addBias adds bias to each of the n rows of y (row length len(bias)).
func addBias(y []float32, n int, bias []float32) {
	w := len(bias)
	for t := 0; t < n; t++ {
		row := y[t*w : (t+1)*w]
		for i, b := range bias {
			row[i] += b
		}
	}
}

// ComputeExpert implements model.ExpertFFN:
// down(swiglu_oai(gate x + bg, up x + bu)) + bd, biases of expert e.
func (m *Model) ComputeExpert(l, e int, parts [][]byte, n int, x, out []float32, s *model.Scratch) error {
	if len(parts) != 3 {
		return fmt.Errorf("gpt-oss: layer %d expert %d: %d parts, want gate, up, down", l, e, len(parts))
	}
	if l < 0 || l >= len(m.layers) || e < 0 || e >= m.nExpert {
		return fmt.Errorf("%w: gpt-oss: layer %d expert %d out of range", model.ErrBadModel, l, e)
	}
	L := &m.layers[l]
	F, E := m.nFF, m.nEmbd
	a, b := s.Grow(n * F)
	if err := m.pool.MatMul(L.gateT, parts[0], F, E, x[:n*E], n, a); err != nil {
		return fmt.Errorf("layer %d expert %d gate: %w", l, e, err)
	}
	if err := m.pool.MatMul(L.upT, parts[1], F, E, x[:n*E], n, b); err != nil {
		return fmt.Errorf("layer %d expert %d up: %w", l, e, err)
	}
	addBias(a, n, L.expGateB[e*F:(e+1)*F])
	addBias(b, n, L.expUpB[e*F:(e+1)*F])
	SwiGLUOAI(a, a, b, swigluAlpha, swigluLimit)
	if err := m.pool.MatMul(L.downT, parts[2], E, F, a, n, out[:n*E]); err != nil {
		return fmt.Errorf("layer %d expert %d down: %w", l, e, err)
	}
	addBias(out, n, L.expDownB[e*E:(e+1)*E])
	return nil
}

func (m *Model) matmul(w *model.Weight, x []float32, n int, y []float32) error {
	return model.MatMul(m.pool, w, x, n, y)
}

// PeekRouter implements model.RouterPeeker: layer's biased router logits
// for x (speculative prefetch applies layer ℓ+1's router to layer ℓ's
// normalised FFN input; the guess decides only what is read early).
func (m *Model) PeekRouter(layer int, x []float32, logits []float32) error {
	if layer < 0 || layer >= len(m.layers) || len(x) != m.nEmbd || len(logits) < m.nExpert {
		return fmt.Errorf("gpt-oss: PeekRouter(layer %d, %d inputs, %d outputs)", layer, len(x), len(logits))
	}
	L := &m.layers[layer]
	if err := m.matmul(&L.gateInp, x, 1, logits[:m.nExpert]); err != nil {
		return err
	}
	addBias(logits[:m.nExpert], 1, L.gateB)
	return nil
}

// Forward implements model.Model.
func (m *Model) Forward(ctx context.Context, st *model.State, tokens []int32, moe model.MoE, all bool) ([][]float32, error) {
	n := len(tokens)
	if n == 0 {
		return nil, nil
	}
	pos0, err := model.Reserve(st, n)
	if err != nil {
		return nil, err
	}
	E, hd := m.nEmbd, m.headDim
	qd, kvd := m.nHead*hd, m.nHeadKV*hd
	tm := m.tm
	t0 := time.Now()
	x, err := model.Embed(&m.tokEmbd, tokens)
	if err != nil {
		return nil, err
	}
	tm.Embed += time.Since(t0)
	acts := model.NewActs(n, E, qd, kvd, m.nExpert, m.nHead, pos0+n)
	h, q, k, v, att, o, rl, moeOut, scores := acts.H, acts.Q, acts.K, acts.V, acts.Att, acts.O, acts.RL, acts.Out, acts.Scores
	scale := float32(1 / math.Sqrt(float64(hd)))
	group := m.nHead / m.nHeadKV
	for l := range m.layers {
		if err := ctx.Err(); err != nil {
			return nil, err
		}
		L := &m.layers[l]
		t0 = time.Now()
		for t := 0; t < n; t++ {
			model.RMSNorm(h[t*E:(t+1)*E], x[t*E:(t+1)*E], m.eps, L.attnNorm)
		}
		if err := m.matmul(&L.wq, h, n, q); err != nil {
			return nil, err
		}
		if err := m.matmul(&L.wk, h, n, k); err != nil {
			return nil, err
		}
		if err := m.matmul(&L.wv, h, n, v); err != nil {
			return nil, err
		}
		addBias(q, n, L.bq)
		addBias(k, n, L.bk)
		addBias(v, n, L.bv)
		for t := 0; t < n; t++ {
			for hh := 0; hh < m.nHead; hh++ {
				m.rope.ApplyNeoX(q[t*qd+hh*hd:t*qd+(hh+1)*hd], pos0+t)
			}
			for hh := 0; hh < m.nHeadKV; hh++ {
				m.rope.ApplyNeoX(k[t*kvd+hh*hd:t*kvd+(hh+1)*hd], pos0+t)
			}
			st.Store(l, pos0+t, k[t*kvd:(t+1)*kvd], v[t*kvd:(t+1)*kvd])
		}
		// Heads are independent: each runs on one pool thread with its
		// own scores window, so results do not depend on -t.
		if err := m.pool.Parallel(m.nHead, func(hh int) {
			sc := scores[hh*(pos0+n) : (hh+1)*(pos0+n)]
			for t := 0; t < n; t++ {
				p := pos0 + t
				lo := 0
				if L.swa && p-m.window+1 > 0 {
					lo = p - m.window + 1
				}
				st.AttendSinks(l, q[t*qd+hh*hd:], (hh/group)*hd, hd, lo, p, scale, L.sinks[hh], sc, att[t*qd+hh*hd:t*qd+(hh+1)*hd])
			}
		}); err != nil {
			return nil, err
		}
		if err := m.matmul(&L.wo, att, n, o); err != nil {
			return nil, err
		}
		addBias(o, n, L.bo)
		for i := range x { // x becomes ffn_inp
			x[i] = o[i] + x[i]
		}
		tm.Attention += time.Since(t0)
		t0 = time.Now()
		for t := 0; t < n; t++ {
			model.RMSNorm(h[t*E:(t+1)*E], x[t*E:(t+1)*E], m.eps, L.postNorm)
		}
		if err := m.matmul(&L.gateInp, h, n, rl); err != nil {
			return nil, err
		}
		addBias(rl, n, L.gateB)
		tm.Router += time.Since(t0)
		if err := acts.RunMoE(ctx, moe, l); err != nil {
			return nil, err
		}
		for i := range x {
			x[i] = moeOut[i] + x[i]
		}
	}
	st.Pos = pos0 + n
	t0 = time.Now()
	defer func() { tm.LMHead += time.Since(t0) }()
	return model.Head(m.pool, m.outNorm, m.eps, &m.output, x, n, all)
}
