// Package qwen3moe is the Qwen3-MoE architecture (Qwen3-30B-A3B,
// Qwen3-235B-A22B, Qwen3-Coder-30B-A3B), following llama.cpp's
// src/models/qwen3moe.cpp graph and build_moe_ffn:
//
//	x = embd(tokens)
//	per layer: h = RMSNorm(x)·attn_norm; q,k,v = Wq h, Wk h, Wv h
//	           q,k per head: RMSNorm·{q,k}_norm, NeoX RoPE; causal GQA attention
//	           x = Wo attn + x
//	           h = RMSNorm(x)·ffn_norm; logits = Wgate_inp h
//	           x = x + Σ_rank w_r · down_e(silu(gate_e h) · up_e h)   (the MoE seam)
//	logits = Woutput RMSNorm(x)·output_norm
//
// The routed experts are computed behind model.MoE; this package supplies
// their math (ComputeExpert) and the gating rule (softmax over all experts,
// top-k, renormalise). Every shape comes from GGUF metadata. The package
// registers itself as "qwen3moe" on import.
package qwen3moe

import (
	"context"
	"fmt"
	"math"
	"time"

	"github.com/pipe-engine/pipe/kernels"
	"github.com/pipe-engine/pipe/model"
	"github.com/pipe-engine/pipe/quant"
)

func init() { model.Register("qwen3moe", New) }

type layer struct {
	attnNorm, qNorm, kNorm, ffnNorm []float32
	wq, wk, wv, wo, gateInp         model.Weight
	gateT, upT, downT               quant.Type
}

// Model is a loaded Qwen3-MoE.
type Model struct {
	d                     *model.Desc
	pool                  *kernels.Pool
	nLayer, nEmbd, nHead  int
	nHeadKV, headDim, nFF int
	nExpert, k, nVocab    int
	eps                   float32
	rope                  model.Rope
	tokEmbd, output       model.Weight
	outNorm               []float32
	layers                []layer
	tm                    *model.Timings
}

// New builds a Qwen3-MoE from its description and dense weights.
func New(d *model.Desc, src model.DenseSource, opt model.Options) (model.Model, error) {
	hp := d.HParams
	m := &Model{
		d: d, pool: opt.Pool,
		nLayer: hp.NLayer, nEmbd: hp.NEmbd, nHead: hp.NHead, nHeadKV: hp.NHeadKV,
		headDim: hp.HeadDim, nFF: hp.NFFExp, nExpert: hp.NExpert, k: hp.NExpertUsed,
		nVocab: hp.NVocab, eps: hp.RMSEps, tm: opt.Timings,
	}
	if m.tm == nil {
		m.tm = &model.Timings{}
	}
	if m.headDim == 0 && m.nHead > 0 {
		m.headDim = m.nEmbd / m.nHead
	}
	if opt.ExpertsUsed > 0 {
		if opt.ExpertsUsed > m.nExpert {
			return nil, fmt.Errorf("--n-expert-used %d exceeds the model's %d experts", opt.ExpertsUsed, m.nExpert)
		}
		m.k = opt.ExpertsUsed
	}
	if m.nLayer <= 0 || m.nEmbd <= 0 || m.nHead <= 0 || m.nHeadKV <= 0 || m.nHead%m.nHeadKV != 0 || m.nExpert <= 0 || m.k <= 0 || m.k > m.nExpert || m.nFF <= 0 || m.headDim <= 0 || m.headDim%2 != 0 {
		return nil, fmt.Errorf("%w: qwen3moe hyper-parameters %+v", model.ErrBadModel, hp)
	}
	if m.eps == 0 {
		m.eps = 1e-6
	}
	base := hp.RopeFreqBase
	if base == 0 {
		base = 10000
	}
	fs := float32(1)
	if hp.RopeScaleLinear > 0 {
		fs = 1 / hp.RopeScaleLinear
	}
	m.rope = model.Rope{NDims: m.headDim, Base: base, FreqScale: fs, AttnScale: 1}

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
			qNorm:    ld.Vector(p+"attn_q_norm.weight", m.headDim),
			kNorm:    ld.Vector(p+"attn_k_norm.weight", m.headDim),
			ffnNorm:  ld.Vector(p+"ffn_norm.weight", m.nEmbd),
			wq:       ld.Matrix(p+"attn_q.weight", m.nEmbd, qd),
			wk:       ld.Matrix(p+"attn_k.weight", m.nEmbd, kvd),
			wv:       ld.Matrix(p+"attn_v.weight", m.nEmbd, kvd),
			wo:       ld.Matrix(p+"attn_output.weight", qd, m.nEmbd),
			gateInp:  ld.Matrix(p+"ffn_gate_inp.weight", m.nEmbd, m.nExpert),
			gateT:    ld.ExpertType(p+"ffn_gate_exps.weight", m.nEmbd, m.nFF, m.nExpert),
			upT:      ld.ExpertType(p+"ffn_up_exps.weight", m.nEmbd, m.nFF, m.nExpert),
			downT:    ld.ExpertType(p+"ffn_down_exps.weight", m.nFF, m.nEmbd, m.nExpert),
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

// Desc implements model.Model.
func (m *Model) Desc() *model.Desc { return m.d }

// Router implements model.Model.
func (m *Model) Router(int) model.RouterSpec {
	return model.RouterSpec{Gating: model.SoftmaxTopK, NExpert: m.nExpert, K: m.k, Normalize: true}
}

// NewState implements model.Model.
func (m *Model) NewState(nCtx int, kv model.KVType) (*model.State, error) {
	return model.NewKV(m.nLayer, nCtx, m.nHeadKV*m.headDim, kv)
}

// ExpertScratchFloats implements model.Model: gate and up outputs per token.
func (m *Model) ExpertScratchFloats() int { return m.nFF }

// ComputeExpert implements model.ExpertFFN: down(silu(gate x) · up x).
func (m *Model) ComputeExpert(l, e int, parts [][]byte, n int, x, out []float32, s *model.Scratch) error {
	if len(parts) != 3 {
		return fmt.Errorf("qwen3moe: layer %d expert %d: %d parts, want gate, up, down", l, e, len(parts))
	}
	L := &m.layers[l]
	a, b := s.Grow(n * m.nFF)
	if err := m.pool.MatMul(L.gateT, parts[0], m.nFF, m.nEmbd, x[:n*m.nEmbd], n, a); err != nil {
		return fmt.Errorf("layer %d expert %d gate: %w", l, e, err)
	}
	if err := m.pool.MatMul(L.upT, parts[1], m.nFF, m.nEmbd, x[:n*m.nEmbd], n, b); err != nil {
		return fmt.Errorf("layer %d expert %d up: %w", l, e, err)
	}
	model.SwiGLU(a, a, b)
	if err := m.pool.MatMul(L.downT, parts[2], m.nEmbd, m.nFF, a, n, out[:n*m.nEmbd]); err != nil {
		return fmt.Errorf("layer %d expert %d down: %w", l, e, err)
	}
	return nil
}

// ComputeExperts implements model.BatchExpertFFN: the gate and up
// projections of every single-token expert in one pool dispatch (their
// shared input quantized once), then all their down projections in another;
// experts of several tokens go through ComputeExpert (the multi-token
// kernels).
func (m *Model) ComputeExperts(l int, work []model.ExpertWork, s *model.Scratch) error {
	if l < 0 || l >= len(m.layers) {
		return fmt.Errorf("%w: qwen3moe: layer %d out of range", model.ErrBadModel, l)
	}
	L := &m.layers[l]
	F, E := m.nFF, m.nEmbd
	single := 0
	for _, w := range work {
		if len(w.Parts) != 3 {
			return fmt.Errorf("qwen3moe: layer %d expert %d: %d parts, want gate, up, down", l, w.Expert, len(w.Parts))
		}
		if w.N == 1 {
			single++
			continue
		}
		if err := m.ComputeExpert(l, w.Expert, w.Parts, w.N, w.X, w.Out, s); err != nil {
			return err
		}
	}
	if single == 0 {
		return nil
	}
	gate, up := s.Grow(single * F)
	s.ResetInputs()
	ps := s.Products[:0]
	i := 0
	for _, w := range work {
		if w.N != 1 {
			continue
		}
		in := s.Input(w.X[:E])
		ag, err := in.For(L.gateT)
		if err != nil {
			return fmt.Errorf("layer %d expert %d gate: %w", l, w.Expert, err)
		}
		au, err := in.For(L.upT)
		if err != nil {
			return fmt.Errorf("layer %d expert %d up: %w", l, w.Expert, err)
		}
		ps = append(ps,
			kernels.Product{Type: L.gateT, W: w.Parts[0], Rows: F, Cols: E, A: ag, Y: gate[i*F : (i+1)*F]},
			kernels.Product{Type: L.upT, W: w.Parts[1], Rows: F, Cols: E, A: au, Y: up[i*F : (i+1)*F]})
		i++
	}
	if err := m.pool.MatVecs(ps); err != nil {
		return fmt.Errorf("layer %d experts gate/up: %w", l, err)
	}
	model.SwiGLU(gate, gate, up)
	ps = ps[:0]
	i = 0
	for _, w := range work {
		if w.N != 1 {
			continue
		}
		a, err := s.Input(gate[i*F : (i+1)*F]).For(L.downT)
		if err != nil {
			return fmt.Errorf("layer %d expert %d down: %w", l, w.Expert, err)
		}
		ps = append(ps, kernels.Product{Type: L.downT, W: w.Parts[2], Rows: E, Cols: F, A: a, Y: w.Out[:E]})
		i++
	}
	err := m.pool.MatVecs(ps)
	clear(ps)
	s.Products = ps[:0]
	s.ResetInputs()
	if err != nil {
		return fmt.Errorf("layer %d experts down: %w", l, err)
	}
	return nil
}

func (m *Model) matmul(w *model.Weight, x []float32, n int, y []float32) error {
	return model.MatMul(m.pool, w, x, n, y)
}

// qkv projects the normed input h of n tokens to q, k and v: one pool
// dispatch over the three matrices for a single token (h quantized once per
// activation format), the multi-token products otherwise.
func (m *Model) qkv(L *layer, in *model.Inputs, h []float32, n int, q, k, v []float32) error {
	if n == 1 {
		in.Reset(h)
		return model.MatVecs(m.pool, in, []*model.Weight{&L.wq, &L.wk, &L.wv}, [][]float32{q, k, v})
	}
	for _, p := range []struct {
		w *model.Weight
		y []float32
	}{{&L.wq, q}, {&L.wk, k}, {&L.wv, v}} {
		if err := m.matmul(p.w, h, n, p.y); err != nil {
			return err
		}
	}
	return nil
}

// PeekRouter implements model.RouterPeeker: layer's router logits for x.
func (m *Model) PeekRouter(layer int, x []float32, logits []float32) error {
	if layer < 0 || layer >= len(m.layers) || len(x) != m.nEmbd || len(logits) < m.nExpert {
		return fmt.Errorf("qwen3moe: PeekRouter(layer %d, %d inputs, %d outputs)", layer, len(x), len(logits))
	}
	return m.matmul(&m.layers[layer].gateInp, x, 1, logits[:m.nExpert])
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
	var in model.Inputs
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
		if err := m.qkv(L, &in, h, n, q, k, v); err != nil {
			return nil, err
		}
		for t := 0; t < n; t++ {
			for hh := 0; hh < m.nHead; hh++ {
				qh := q[t*qd+hh*hd : t*qd+(hh+1)*hd]
				model.RMSNorm(qh, qh, m.eps, L.qNorm)
				m.rope.ApplyNeoX(qh, pos0+t)
			}
			for hh := 0; hh < m.nHeadKV; hh++ {
				kh := k[t*kvd+hh*hd : t*kvd+(hh+1)*hd]
				model.RMSNorm(kh, kh, m.eps, L.kNorm)
				m.rope.ApplyNeoX(kh, pos0+t)
			}
			st.Store(l, pos0+t, k[t*kvd:(t+1)*kvd], v[t*kvd:(t+1)*kvd])
		}
		// Heads are independent: each runs on one pool thread with its
		// own scores window, so results do not depend on -t.
		if err := m.pool.Parallel(m.nHead, func(hh int) {
			sc := scores[hh*(pos0+n) : (hh+1)*(pos0+n)]
			for t := 0; t < n; t++ {
				st.Attend(l, q[t*qd+hh*hd:], (hh/group)*hd, hd, 0, pos0+t, scale, sc, att[t*qd+hh*hd:t*qd+(hh+1)*hd])
			}
		}); err != nil {
			return nil, err
		}
		if err := m.matmul(&L.wo, att, n, o); err != nil {
			return nil, err
		}
		for i := range x { // x becomes ffn_inp
			x[i] = o[i] + x[i]
		}
		tm.Attention += time.Since(t0)
		t0 = time.Now()
		for t := 0; t < n; t++ {
			model.RMSNorm(h[t*E:(t+1)*E], x[t*E:(t+1)*E], m.eps, L.ffnNorm)
		}
		if err := m.matmul(&L.gateInp, h, n, rl); err != nil {
			return nil, err
		}
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
