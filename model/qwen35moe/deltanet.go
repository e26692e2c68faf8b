package qwen35moe

// deltanet.go: the gated delta-net layer (linear attention with a
// recurrent state and a short causal convolution), llama.cpp's
// build_layer_attn_linear with the fused ggml_gated_delta_net its CPU
// backend runs for prompts and single tokens alike. LoadDeltaNet and
// Projections are exported for qwen3next, whose delta-net differs only in
// how its input projections are stored and how value heads share key
// heads.

import (
	"fmt"
	"math"

	"github.com/pipe-engine/pipe/kernels"
	"github.com/pipe-engine/pipe/model"
)

// deltaNet is one recurrent layer. Its state (model.State.Recurrent) is
// the convolution's last K-1 inputs per channel (channel-major), then one
// S×S matrix per value head, row j holding column j of the delta rule's
// state (ggml's layout).
type deltaNet struct {
	norm    []float32   // attn_norm
	in      Projections // q|k|v, z, β and α from the normed input
	dt, a   []float32   // ssm_dt.bias, ssm_a (-exp(A_log)), nv each
	conv    []float32   // ssm_conv1d: C rows of K taps
	ssmNorm []float32   // ssm_norm: S
	out     model.Weight
	pool    *kernels.Pool

	K       int  // convolution taps (ssm.conv_kernel)
	S       int  // head width (ssm.state_size), keys and values
	nk, nv  int  // key heads (ssm.group_count), value heads (ssm.time_step_rank)
	grouped bool // value head h reads key head h/(nv/nk), else h mod nk

	job recurJob // the recurrence's arguments, kept with its bound method
}

// C is the convolved channels: q, k (nk·S each) and v (nv·S).
func (d *deltaNet) C() int { return 2*d.nk*d.S + d.nv*d.S }

// V is the value width nv·S.
func (d *deltaNet) V() int { return d.nv * d.S }

// StateFloats implements model.Mixer.
func (d *deltaNet) StateFloats() int { return (d.K-1)*d.C() + d.nv*d.S*d.S }

// Projections computes a delta-net layer's input projections of a pass's
// p.N tokens from h = RMSNorm(x)·attn_norm (p.N × n_embd), before any
// activation: mixed (p.N × C: the q, k and v heads, the convolution's
// channels), z (p.N × V: the output gate), beta and alpha (p.N × value
// heads, in value-head order).
type Projections interface {
	Project(p *model.Pass, h, mixed, z, beta, alpha []float32) error
}

// separate are qwen35moe's input projections: one matrix each.
type separate struct {
	qkv, z      model.Weight // attn_qkv (C rows), attn_gate (V rows)
	beta, alpha model.Weight // ssm_beta, ssm_alpha (nv rows)
}

// Project implements Projections.
func (s *separate) Project(p *model.Pass, h, mixed, z, beta, alpha []float32) error {
	return p.Project(h, []*model.Weight{&s.qkv, &s.z, &s.beta, &s.alpha}, [][]float32{mixed, z, beta, alpha})
}

// loadDeltaNet reads layer l's delta-net tensors, qwen35moe's: separate
// projections, value head h reading key head h mod nk.
func loadDeltaNet(ld *model.Loader, l, E int, g model.SSMGeom, pool *kernels.Pool) model.Mixer {
	p := fmt.Sprintf("blk.%d.", l)
	C, V, nv := 2*g.GroupCount*g.StateSize+g.TimeStepRank*g.StateSize, g.TimeStepRank*g.StateSize, g.TimeStepRank
	in := &separate{
		qkv: ld.Matrix(p+"attn_qkv.weight", E, C), z: ld.Matrix(p+"attn_gate.weight", E, V),
		beta: ld.Matrix(p+"ssm_beta.weight", E, nv), alpha: ld.Matrix(p+"ssm_alpha.weight", E, nv),
	}
	return LoadDeltaNet(ld, l, E, g, pool, in, false)
}

// LoadDeltaNet reads layer l's delta-net tensors beside its input
// projections in (attn_norm, ssm_conv1d, ssm_dt.bias, ssm_a, ssm_norm,
// ssm_out) and returns the layer's mixer. With grouped, value head h reads
// key head h/(nv/nk), the value heads grouped by key head (qwen3next's
// repeat-interleave); otherwise key head h mod nk (qwen35moe's tiling).
func LoadDeltaNet(ld *model.Loader, l, E int, g model.SSMGeom, pool *kernels.Pool, in Projections, grouped bool) model.Mixer {
	p := fmt.Sprintf("blk.%d.", l)
	d := &deltaNet{K: g.ConvKernel, S: g.StateSize, nk: g.GroupCount, nv: g.TimeStepRank, pool: pool, in: in, grouped: grouped}
	C, V := d.C(), d.V()
	d.norm = ld.Vector(p+"attn_norm.weight", E)
	d.dt = ld.Vector(p+"ssm_dt.bias", d.nv)
	d.a = ld.Vector(p+"ssm_a", d.nv)
	d.conv = ld.Vector(p+"ssm_conv1d.weight", d.K*C)
	d.ssmNorm = ld.Vector(p+"ssm_norm.weight", d.S)
	d.out = ld.Matrix(p+"ssm_out.weight", V, E)
	d.job.fn = d.job.run
	return d
}

// Mix implements model.Mixer: x += Wout·(RMSNorm(o)·ssm_norm·silu(z)) with o
// the delta rule over silu(conv(Wqkv h)), h = RMSNorm(x)·attn_norm.
func (d *deltaNet) Mix(p *model.Pass, st *model.State, l int, x []float32) error {
	n, C, V, nv := p.N, d.C(), d.V(), d.nv
	rec := st.Recurrent(l)
	if len(rec) != d.StateFloats() {
		return fmt.Errorf("%w: layer %d: recurrent state of %d floats, want %d", model.ErrBadModel, l, len(rec), d.StateFloats())
	}
	h := p.Buf(n * p.E)
	p.Norm(h, x, d.norm)
	mixed, z, beta, g := p.Buf(n*C), p.Buf(n*V), p.Buf(n*nv), p.Buf(n*nv)
	if err := d.in.Project(p, h, mixed, z, beta, g); err != nil {
		return err
	}
	for t := 0; t < n; t++ {
		for j := 0; j < nv; j++ {
			i := t*nv + j
			beta[i] = model.Sigmoid(beta[i])
			g[i] = softplus(g[i]+d.dt[j]) * d.a[j]
		}
	}
	if err := d.convolve(p, rec[:(d.K-1)*C], mixed); err != nil {
		return err
	}
	for t := 0; t < n; t++ {
		qk := mixed[t*C : t*C+2*d.nk*d.S]
		for i := 0; i+d.S <= len(qk); i += d.S {
			l2Norm(qk[i:i+d.S], p.Eps)
		}
	}
	o := p.Buf(n * V)
	j := &d.job
	j.d, j.n, j.mixed, j.beta, j.g, j.o, j.z, j.eps, j.state = d, n, mixed, beta, g, o, z, p.Eps, rec[(d.K-1)*C:]
	err := d.pool.Parallel(nv, j.fn)
	j.mixed, j.beta, j.g, j.o, j.z, j.state = nil, nil, nil, nil, nil, nil
	if err != nil {
		return err
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

// recurJob is the delta rule of every value head over a pass's tokens,
// one head per pool task.
type recurJob struct {
	d                           *deltaNet
	n                           int
	mixed, beta, g, o, z, state []float32
	eps                         float32
	fn                          func(h int)
}

// run is value head h's delta rule over the pass's tokens, as ggml's
// gated_delta_net (K=1) computes it: per token, with M the head's state
// (row j = column j of S),
//
//	M *= exp(g); δ_j = (v_j − M_j·k)·β; M_j += δ_j·k; o_j = (M_j·q)/√S
//
// in one pass over the rows (kernels.DeltaRule: each row's steps depend on
// that row alone); then each token's o_h is RMS-normed (ssm_norm) and gated
// by silu(z_h), on this thread too. q and k are key head h mod nk
// (llama.cpp's Qwen3.5 head pattern), or h/(nv/nk) when grouped
// (Qwen3-Next's).
func (j *recurJob) run(h int) {
	d := j.d
	S, C, nv := d.S, d.C(), d.nv
	kh := h % d.nk
	if d.grouped {
		kh = h / (nv / d.nk)
	}
	M := j.state[h*S*S : (h+1)*S*S]
	scale := float32(1 / math.Sqrt(float64(S)))
	for t := 0; t < j.n; t++ {
		row := j.mixed[t*C : (t+1)*C]
		q := row[kh*S : (kh+1)*S]
		k := row[(d.nk+kh)*S : (d.nk+kh+1)*S]
		v := row[2*d.nk*S+h*S : 2*d.nk*S+(h+1)*S]
		eg := float32(math.Exp(float64(j.g[t*nv+h])))
		out := j.o[t*nv*S+h*S : t*nv*S+(h+1)*S]
		kernels.DeltaRule(M, k, q, v, out, eg, j.beta[t*nv+h], scale)
	}
	for t := 0; t < j.n; t++ {
		r := t*nv + h
		out, zh := j.o[r*S:(r+1)*S], j.z[r*S:(r+1)*S]
		model.RMSNorm(out, out, j.eps, d.ssmNorm)
		kernels.SwiGLU(out, zh, out) // out·silu(z), the product commutes
	}
}

// convolve runs the short convolution and its SiLU over mixed (p.N rows of
// C channels) in place: a prompt pass's channel blocks on the pool's
// threads, a single token (decode: C·K multiply-adds, less than a wake-up
// of the threads) on this one. The bits are the same either way.
func (d *deltaNet) convolve(p *model.Pass, state, mixed []float32) error {
	n, C := p.N, d.C()
	if n == 1 {
		model.CausalConv(state, mixed, d.conv, n, C, d.K, nil)
		kernels.SiLU(mixed, mixed)
		return nil
	}
	return model.CausalConvPool(d.pool, state, mixed, d.conv, n, C, d.K, p.Buf((d.K-1)*C), siluInPlace)
}

// siluInPlace is the convolution's activation: v = silu(v).
func siluInPlace(v []float32) { kernels.SiLU(v, v) }

// softplus is ggml's: x above 20, else log(1+e^x) in float32.
func softplus(x float32) float32 {
	if x > 20 {
		return x
	}
	return float32(math.Log(float64(1 + float32(math.Exp(float64(x))))))
}

// l2Norm scales x to unit L2 norm as ggml_l2_norm: x / max(√Σx², eps), the
// sum in float64.
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
