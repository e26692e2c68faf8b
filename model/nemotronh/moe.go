package nemotronh

// moe.go: a MoE block's feed-forward (the router, the routed experts
// through the MoE seam, the shared expert) and the ungated squared-ReLU
// expert math (llama.cpp's build_moe_ffn and build_ffn with
// LLM_FFN_RELU_SQR and no gate).

import (
	"context"
	"fmt"

	"github.com/pipe-engine/pipe/kernels"
	"github.com/pipe-engine/pipe/model"
	"github.com/pipe-engine/pipe/quant"
)

// moeFFN is one MoE block: h = RMSNorm(x)·attn_norm, logits = Wgate_inp h,
// x += MoE(h) + down_shexp(relu(up_shexp h)²).
type moeFFN struct {
	norm     []float32    // attn_norm
	gate     model.Weight // ffn_gate_inp: n_expert rows
	up, down model.Weight // ffn_up_shexp, ffn_down_shexp
}

func loadMoE(ld *model.Loader, l int, hp *model.HParams) *moeFFN {
	E, S := hp.NEmbd, hp.NFFShExp
	return &moeFFN{
		norm: ld.Vector(blk(l, "attn_norm.weight"), E),
		gate: ld.Matrix(blk(l, "ffn_gate_inp.weight"), E, hp.NExpert),
		up:   ld.Matrix(blk(l, "ffn_up_shexp.weight"), E, S),
		down: ld.Matrix(blk(l, "ffn_down_shexp.weight"), S, E),
	}
}

// Run implements model.FFN.
func (f *moeFFN) Run(ctx context.Context, p *model.Pass, layer int, x []float32) error {
	t0 := p.Clock.Now()
	h := p.Buf(p.N * p.E)
	p.Norm(h, x, f.norm)
	logits := p.Buf(p.N * f.gate.Rows)
	if err := p.MatMul(&f.gate, h, logits); err != nil {
		return err
	}
	p.Timings.Router += p.Clock.Since(t0)
	out := p.Buf(p.N * p.E)
	if err := p.RunMoE(ctx, layer, h, logits, h, out); err != nil {
		return err
	}
	u, y := p.Buf(p.N*f.up.Rows), p.Buf(p.N*p.E)
	if err := p.MatMul(&f.up, h, u); err != nil {
		return err
	}
	reluSqr(u)
	if err := p.MatMul(&f.down, u, y); err != nil {
		return err
	}
	for i := range x {
		x[i] = (out[i] + y[i]) + x[i]
	}
	return nil
}

// Peek implements model.Peeker: the router applied to n normalised inputs.
func (f *moeFFN) Peek(pool *kernels.Pool, x []float32, n int, logits []float32) error {
	if len(logits) < n*f.gate.Rows {
		return fmt.Errorf("%s: peek into %d logits, router has %d for %d rows", arch, len(logits), f.gate.Rows, n)
	}
	return model.MatMul(pool, &f.gate, x, n, logits[:n*f.gate.Rows])
}

// reluSqr replaces every v with relu(v)², as ggml_relu then ggml_sqr.
func reluSqr(v []float32) {
	for i, x := range v {
		if !(x > 0) {
			x = 0
		}
		v[i] = x * x
	}
}

// experts are the routed experts: per expert up (F rows of E) and down
// (E rows of F), no gate. They implement model.ExpertFFN.
type experts struct {
	pool    *kernels.Pool
	E, F, n int // n_embd, expert width, experts per layer
	byLayer []expertLayer
}

// expertLayer is one block's expert tensor types (has: a MoE block).
type expertLayer struct {
	upT, downT quant.Type
	has        bool
}

// addLayer appends block l's expert types (none unless has).
func (x *experts) addLayer(ld *model.Loader, l int, has bool) {
	L := expertLayer{has: has}
	if has {
		L.upT = ld.ExpertType(blk(l, "ffn_up_exps.weight"), x.E, x.F, x.n)
		L.downT = ld.ExpertType(blk(l, "ffn_down_exps.weight"), x.F, x.E, x.n)
	}
	x.byLayer = append(x.byLayer, L)
}

// ComputeExpert implements model.ExpertFFN: parts are the expert's up and
// down projections; out = down·relu(up·x)².
func (x *experts) ComputeExpert(l, e int, parts [][]byte, n int, in, out []float32, s *model.Scratch) error {
	if l < 0 || l >= len(x.byLayer) || !x.byLayer[l].has || e < 0 || e >= x.n {
		return fmt.Errorf("%w: %s: layer %d expert %d out of range", model.ErrBadModel, arch, l, e)
	}
	if len(parts) != 2 {
		return fmt.Errorf("%s: layer %d expert %d: %d parts, want up, down", arch, l, e, len(parts))
	}
	L, E, F := &x.byLayer[l], x.E, x.F
	a, _ := s.Grow(n * F)
	mm := s.On(x.pool)
	if err := mm.MatMul(L.upT, parts[0], F, E, in[:n*E], n, a[:n*F]); err != nil {
		return fmt.Errorf("layer %d expert %d up: %w", l, e, err)
	}
	reluSqr(a[:n*F])
	if err := mm.MatMul(L.downT, parts[1], E, F, a[:n*F], n, out[:n*E]); err != nil {
		return fmt.Errorf("layer %d expert %d down: %w", l, e, err)
	}
	return nil
}

// ComputeExperts implements model.BatchExpertFFN: the up projections of
// every single-token expert in one pool dispatch (their shared input
// quantized once), then all their down projections in another, the same
// bits as ComputeExpert; experts of several tokens go through
// ComputeExpert (the multi-token kernels).
func (x *experts) ComputeExperts(l int, work []model.ExpertWork, s *model.Scratch) error {
	single := 0
	for _, w := range work {
		if w.N == 1 {
			single++
			continue
		}
		if err := x.ComputeExpert(l, w.Expert, w.Parts, w.N, w.X, w.Out, s); err != nil {
			return err
		}
	}
	if single == 0 {
		return nil
	}
	if l < 0 || l >= len(x.byLayer) || !x.byLayer[l].has {
		return fmt.Errorf("%w: %s: layer %d has no experts", model.ErrBadModel, arch, l)
	}
	L, E, F := &x.byLayer[l], x.E, x.F
	a, _ := s.Grow(single * F)
	a = a[:single*F]
	s.ResetInputs()
	defer s.ResetInputs()
	ps, err := x.products(work, F, E, func(i int, w model.ExpertWork) (kernels.Product, error) {
		in, err := s.Input(w.X[:E]).For(L.upT)
		return kernels.Product{Type: L.upT, W: w.Parts[0], Rows: F, Cols: E, A: in, Y: a[i*F : (i+1)*F]}, err
	}, s.Products[:0])
	if err == nil {
		err = x.pool.MatVecs(ps)
	}
	if err != nil {
		return fmt.Errorf("layer %d experts up: %w", l, err)
	}
	reluSqr(a)
	ps, err = x.products(work, F, E, func(i int, w model.ExpertWork) (kernels.Product, error) {
		in, err := s.Input(a[i*F : (i+1)*F]).For(L.downT)
		return kernels.Product{Type: L.downT, W: w.Parts[1], Rows: E, Cols: F, A: in, Y: w.Out[:E]}, err
	}, ps[:0])
	if err == nil {
		err = x.pool.MatVecs(ps)
	}
	clear(ps)
	s.Products = ps[:0]
	if err != nil {
		return fmt.Errorf("layer %d experts down: %w", l, err)
	}
	return nil
}

// products appends product(i, w) for the i-th single-token work w (after
// checking its expert and parts), to ps.
func (x *experts) products(work []model.ExpertWork, F, E int, product func(int, model.ExpertWork) (kernels.Product, error), ps []kernels.Product) ([]kernels.Product, error) {
	i := 0
	for _, w := range work {
		if w.N != 1 {
			continue
		}
		if w.Expert < 0 || w.Expert >= x.n || len(w.Parts) != 2 {
			return ps, fmt.Errorf("%w: expert %d with %d parts (want up, down)", model.ErrBadModel, w.Expert, len(w.Parts))
		}
		p, err := product(i, w)
		if err != nil {
			return ps, fmt.Errorf("expert %d: %w", w.Expert, err)
		}
		ps = append(ps, p)
		i++
	}
	return ps, nil
}
