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
	"fmt"
	"math"

	"github.com/pipe-engine/pipe/kernels"
	"github.com/pipe-engine/pipe/model"
	"github.com/pipe-engine/pipe/quant"
)

func init() { model.Register("qwen3moe", New) }

// Model is a loaded Qwen3-MoE: the shared decoder skeleton with a routed
// FFN per layer, plus the expert math.
type Model struct {
	*model.Decoder
	d                 *model.Desc
	pool              *kernels.Pool
	nEmbd, nFF        int
	nExpert, k        int
	gateT, upT, downT []quant.Type // per layer
}

// New builds a Qwen3-MoE from its description and dense weights.
func New(d *model.Desc, src model.DenseSource, opt model.Options) (model.Model, error) {
	hp := d.HParams
	k, err := model.ExpertsUsed(hp, opt)
	if err != nil {
		return nil, err
	}
	m := &Model{d: d, pool: opt.Pool, nEmbd: hp.NEmbd, nFF: hp.NFFExp, nExpert: hp.NExpert, k: k}
	hd := hp.HeadDim
	if hd == 0 && hp.NHead > 0 {
		hd = hp.NEmbd / hp.NHead
	}
	if hp.NLayer <= 0 || m.nEmbd <= 0 || hp.NHead <= 0 || hp.NHeadKV <= 0 || hp.NHead%hp.NHeadKV != 0 || m.nExpert <= 0 || m.k <= 0 || m.nFF <= 0 || hd <= 0 || hd%2 != 0 {
		return nil, fmt.Errorf("%w: qwen3moe hyper-parameters %+v", model.ErrBadModel, hp)
	}
	eps := hp.RMSEps
	if eps == 0 {
		eps = 1e-6
	}
	base := hp.RopeFreqBase
	if base == 0 {
		base = 10000
	}
	fs := float32(1)
	if hp.RopeScaleLinear > 0 {
		fs = 1 / hp.RopeScaleLinear
	}
	geom := model.Geom{NHead: hp.NHead, NHeadKV: hp.NHeadKV, HeadDim: hd,
		Rope: model.Rope{NDims: hd, Base: base, FreqScale: fs, AttnScale: 1}, Scale: float32(1 / math.Sqrt(float64(hd)))}
	m.Decoder = &model.Decoder{Pool: opt.Pool, NEmbd: hp.NEmbd, Eps: eps, Timings: opt.Timings}
	ld := model.NewLoader(d, src)
	ld.Embeddings(m.Decoder)
	for l := 0; l < hp.NLayer; l++ {
		p := fmt.Sprintf("blk.%d.", l)
		a := ld.Attention(l, m.nEmbd, geom)
		a.QNorm = ld.Vector(p+"attn_q_norm.weight", hd)
		a.KNorm = ld.Vector(p+"attn_k_norm.weight", hd)
		ffn := &model.RoutedFFN{
			Norm: ld.Vector(p+"ffn_norm.weight", m.nEmbd),
			Gate: ld.Matrix(p+"ffn_gate_inp.weight", m.nEmbd, m.nExpert),
		}
		m.Layers = append(m.Layers, model.Layer{Attn: a, FFN: ffn})
		m.gateT = append(m.gateT, ld.ExpertType(p+"ffn_gate_exps.weight", m.nEmbd, m.nFF, m.nExpert))
		m.upT = append(m.upT, ld.ExpertType(p+"ffn_up_exps.weight", m.nEmbd, m.nFF, m.nExpert))
		m.downT = append(m.downT, ld.ExpertType(p+"ffn_down_exps.weight", m.nFF, m.nEmbd, m.nExpert))
	}
	if err := ld.CheckVocab(m.Decoder, hp.NVocab); err != nil {
		return nil, err
	}
	return m, nil
}

// Desc implements model.Model.
func (m *Model) Desc() *model.Desc { return m.d }

// Router implements model.Model.
func (m *Model) Router(int) model.RouterSpec {
	return model.RouterSpec{Gating: model.SoftmaxTopK, NExpert: m.nExpert, K: m.k, Normalize: true}
}

// ComputeExpert implements model.ExpertFFN: down(silu(gate x) · up x).
func (m *Model) ComputeExpert(l, e int, parts [][]byte, n int, x, out []float32, s *model.Scratch) error {
	if len(parts) != 3 {
		return fmt.Errorf("qwen3moe: layer %d expert %d: %d parts, want gate, up, down", l, e, len(parts))
	}
	a, b := s.Grow(n * m.nFF)
	mm := s.On(m.pool)
	if err := mm.MatMul(m.gateT[l], parts[0], m.nFF, m.nEmbd, x[:n*m.nEmbd], n, a); err != nil {
		return fmt.Errorf("layer %d expert %d gate: %w", l, e, err)
	}
	if err := mm.MatMul(m.upT[l], parts[1], m.nFF, m.nEmbd, x[:n*m.nEmbd], n, b); err != nil {
		return fmt.Errorf("layer %d expert %d up: %w", l, e, err)
	}
	model.SwiGLU(a, a, b)
	if err := mm.MatMul(m.downT[l], parts[2], m.nEmbd, m.nFF, a, n, out[:n*m.nEmbd]); err != nil {
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
	if l < 0 || l >= len(m.Layers) {
		return fmt.Errorf("%w: qwen3moe: layer %d out of range", model.ErrBadModel, l)
	}
	gateT, upT, downT := m.gateT[l], m.upT[l], m.downT[l]
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
		ag, err := in.For(gateT)
		if err != nil {
			return fmt.Errorf("layer %d expert %d gate: %w", l, w.Expert, err)
		}
		au, err := in.For(upT)
		if err != nil {
			return fmt.Errorf("layer %d expert %d up: %w", l, w.Expert, err)
		}
		ps = append(ps,
			kernels.Product{Type: gateT, W: w.Parts[0], Rows: F, Cols: E, A: ag, Y: gate[i*F : (i+1)*F]},
			kernels.Product{Type: upT, W: w.Parts[1], Rows: F, Cols: E, A: au, Y: up[i*F : (i+1)*F]})
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
		a, err := s.Input(gate[i*F : (i+1)*F]).For(downT)
		if err != nil {
			return fmt.Errorf("layer %d expert %d down: %w", l, w.Expert, err)
		}
		ps = append(ps, kernels.Product{Type: downT, W: w.Parts[2], Rows: E, Cols: F, A: a, Y: w.Out[:E]})
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
