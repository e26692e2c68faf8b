package bailingmoe3

// kda.go: the KDA layer (Kimi delta attention as Ling 3.0 runs it: full-rank
// forget and output gates, the safe gate bounded below by
// kda.gate_lower_bound), llama.cpp's recurrent branch of
// src/models/bailingmoe3.cpp with the fused ggml_gated_delta_net its CPU
// backend runs (a per-channel gate: "kda" in ops.cpp).

import (
	"fmt"
	"math"

	"github.com/pipe-engine/pipe/kernels"
	"github.com/pipe-engine/pipe/model"
)

// kda is one KDA layer. Its state (model.State.Recurrent) is the q, k and
// v convolutions' last K-1 inputs (each channel-major, d_inner channels),
// then one S×S matrix per head, row j holding column j of the delta rule's
// state (ggml's layout).
type kda struct {
	norm       []float32    // attn_norm
	wq, wk, wv model.Weight // attn_{q,k,v}: d_inner rows each
	wf, wg     model.Weight // ssm_f_a (forget gate), ssm_g_a (output gate): d_inner rows
	wbeta      model.Weight // ssm_beta: one row per head
	conv       [3][]float32 // ssm_conv1d_{q,k,v}: d_inner rows of K taps
	a          []float32    // ssm_a: one per head (exp(A_log))
	dt         []float32    // ssm_dt.bias: d_inner
	oNorm      []float32    // ssm_norm: S
	out        model.Weight // attn_output
	lower, eps float32      // kda.gate_lower_bound, the RMS epsilon (also the L2 norm's)
	K, S, nh   int          // conv taps, head width, heads
	pool       *kernels.Pool
	eg         []float32 // per head: one token's exp(g), S each
	job        recurJob
}

// D is the width d_inner = heads × head width.
func (d *kda) D() int { return d.nh * d.S }

// StateFloats implements model.Mixer.
func (d *kda) StateFloats() int { return 3*(d.K-1)*d.D() + d.nh*d.S*d.S }

// loadKDA reads KDA layer l's tensors.
func loadKDA(ld *model.Loader, hp model.HParams, own HParams, l int, eps float32, opt model.Options) model.Mixer {
	E := hp.NEmbd
	d := &kda{K: own.ConvKernel, S: own.HeadDim, nh: hp.NHead, lower: own.GateLowerBound, eps: eps, pool: opt.Pool}
	D := d.D()
	d.norm = ld.Vector(blk(l, "attn_norm.weight"), E)
	d.wq = ld.Matrix(blk(l, "attn_q.weight"), E, D)
	d.wk = ld.Matrix(blk(l, "attn_k.weight"), E, D)
	d.wv = ld.Matrix(blk(l, "attn_v.weight"), E, D)
	for i, qkv := range []string{"q", "k", "v"} {
		d.conv[i] = ld.Vector(blk(l, "ssm_conv1d_"+qkv+".weight"), d.K*D)
	}
	d.wf = ld.Matrix(blk(l, "ssm_f_a.weight"), E, D)
	d.wbeta = ld.Matrix(blk(l, "ssm_beta.weight"), E, d.nh)
	d.a = ld.Vector(blk(l, "ssm_a"), d.nh)
	d.dt = ld.Vector(blk(l, "ssm_dt.bias"), D)
	d.wg = ld.Matrix(blk(l, "ssm_g_a.weight"), E, D)
	d.oNorm = ld.Vector(blk(l, "ssm_norm.weight"), d.S)
	d.out = ld.Matrix(blk(l, "attn_output.weight"), D, E)
	d.eg = make([]float32, D)
	d.job.fn = d.job.run
	return d
}

// Mix implements model.Mixer: x += Wo·(RMSNorm(o)·ssm_norm·σ(Wg h)) with o
// the KDA rule over the convolved, activated q, k, v of h = RMSNorm(x)·attn_norm.
func (d *kda) Mix(p *model.Pass, st *model.State, l int, x []float32) error {
	n, D, nh := p.N, d.D(), d.nh
	rec := st.Recurrent(l)
	if len(rec) != d.StateFloats() {
		return fmt.Errorf("%w: layer %d: recurrent state of %d floats, want %d", model.ErrBadModel, l, len(rec), d.StateFloats())
	}
	h := p.Buf(n * p.E)
	p.Norm(h, x, d.norm)
	q, k, v, g := p.Buf(n*D), p.Buf(n*D), p.Buf(n*D), p.Buf(n*D)
	if err := p.Project(h, []*model.Weight{&d.wq, &d.wk, &d.wv, &d.wf}, [][]float32{q, k, v, g}); err != nil {
		return err
	}
	z, beta := p.Buf(n*D), p.Buf(n*nh)
	if err := p.Project(h, []*model.Weight{&d.wg, &d.wbeta}, [][]float32{z, beta}); err != nil {
		return err
	}
	cs := (d.K - 1) * D
	win := p.Buf(d.K - 1 + n)
	for i, qkv := range [][]float32{q, k, v} {
		model.CausalConv(rec[i*cs:(i+1)*cs], qkv, d.conv[i], n, D, d.K, win)
		kernels.SiLU(qkv, qkv)
	}
	d.gates(n, g, beta)
	for r := 0; r < n*nh; r++ {
		l2Norm(q[r*d.S:(r+1)*d.S], d.eps)
		l2Norm(k[r*d.S:(r+1)*d.S], d.eps)
	}
	o := p.Buf(n * D)
	j := &d.job
	j.d, j.n, j.q, j.k, j.v, j.g, j.beta, j.o, j.state = d, n, q, k, v, g, beta, o, rec[3*cs:]
	err := d.pool.Parallel(nh, j.fn)
	j.q, j.k, j.v, j.g, j.beta, j.o, j.state = nil, nil, nil, nil, nil, nil, nil
	if err != nil {
		return err
	}
	for r := 0; r < n*nh; r++ {
		head, zh := o[r*d.S:(r+1)*d.S], z[r*d.S:(r+1)*d.S]
		model.RMSNorm(head, head, d.eps, d.oNorm)
		for i, zi := range zh {
			head[i] *= model.Sigmoid(zi)
		}
	}
	y := p.Buf(n * p.E)
	if err := p.MatMul(&d.out, o, y); err != nil {
		return err
	}
	for i := range x {
		x[i] = y[i] + x[i]
	}
	return nil
}

// gates turns the n tokens' forget-gate projections g (d_inner each) into
// the per-channel log decays lower·σ((g + dt)·a_head), and the β
// projections (one per head) into σ(β), in ggml's order of operations.
func (d *kda) gates(n int, g, beta []float32) {
	D := d.D()
	for t := 0; t < n; t++ {
		row := g[t*D : (t+1)*D]
		for c := range row {
			row[c] = model.Sigmoid((row[c]+d.dt[c])*d.a[c/d.S]) * d.lower
		}
	}
	for i, b := range beta[:n*d.nh] {
		beta[i] = model.Sigmoid(b)
	}
}

// recurJob is the KDA rule of every head over a pass's tokens, one head
// per pool task.
type recurJob struct {
	d                          *kda
	n                          int
	q, k, v, g, beta, o, state []float32
	fn                         func(h int)
}

// run is head h's KDA rule over the pass's tokens, as ggml's
// gated_delta_net with a per-channel gate (K=1) computes it: per token,
// with M the head's state (row j = column j of S),
//
//	M_j[i] *= exp(g[i]) for every row j; then kernels.DeltaRule with the
//	decay 1 (exact): δ_j = (v_j − M_j·k)·β; M_j += δ_j·k; o_j = (M_j·q)/√S
func (j *recurJob) run(h int) {
	d := j.d
	S, D := d.S, d.D()
	M := j.state[h*S*S : (h+1)*S*S]
	scale := float32(1 / math.Sqrt(float64(S)))
	eg := d.eg[h*S : (h+1)*S]
	for t := 0; t < j.n; t++ {
		off := t*D + h*S
		for i, gi := range j.g[off : off+S] {
			eg[i] = float32(math.Exp(float64(gi)))
		}
		for r := 0; r < S; r++ {
			row := M[r*S : (r+1)*S]
			for i := range row {
				row[i] *= eg[i]
			}
		}
		kernels.DeltaRule(M, j.k[off:off+S], j.q[off:off+S], j.v[off:off+S], j.o[off:off+S], 1, j.beta[t*d.nh+h], scale)
	}
}

// l2Norm scales x to unit L2 norm as ggml_l2_norm: x / max(√Σx², eps), the
// sum in float64, its square root in float32.
func l2Norm(x []float32, eps float32) {
	var sum float64
	for _, v := range x {
		sum += float64(v * v)
	}
	scale := 1 / max(float32(math.Sqrt(float64(float32(sum)))), eps)
	for i := range x {
		x[i] *= scale
	}
}
