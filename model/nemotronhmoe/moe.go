package nemotronhmoe

// moe.go: a MoE block's feed-forward (the router, the routed experts
// through the MoE seam, the shared expert) and the ungated squared-ReLU
// expert math (llama.cpp's build_moe_ffn and build_ffn with
// LLM_FFN_RELU_SQR and no gate).

import (
	"context"
	"fmt"
	"time"

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
	t0 := time.Now()
	h := p.Buf(p.N * p.E)
	p.Norm(h, x, f.norm)
	logits := p.Buf(p.N * f.gate.Rows)
	if err := p.MatMul(&f.gate, h, logits); err != nil {
		return err
	}
	p.Timings.Router += time.Since(t0)
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
