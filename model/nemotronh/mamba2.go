package nemotronh

// mamba2.go: the Mamba-2 block (llama.cpp's build_mamba2_layer with the
// CPU backend's ggml_ssm_conv and ggml_ssm_scan): a gated selective
// state-space scan whose state — the convolution's last inputs and one
// head_dim × d_state matrix per head — is the block's recurrent state.

import (
	"fmt"
	"math"

	"github.com/pipe-engine/pipe/kernels"
	"github.com/pipe-engine/pipe/model"
)

// mamba2 is one Mamba-2 block. Its state (model.State.Recurrent) is the
// convolution's last K-1 inputs per channel (channel-major, as
// model.CausalConv keeps them), then per head its head_dim rows of d_state
// (ggml's ssm_scan layout).
type mamba2 struct {
	norm    []float32    // attn_norm
	in, out model.Weight // ssm_in (z, x, B, C, dt rows), ssm_out
	conv    []float32    // ssm_conv1d: C() rows of K taps
	convB   []float32    // ssm_conv1d.bias (nil: none)
	dtB, a  []float32    // ssm_dt.bias, ssm_a (-exp(A_log)): one per head
	d       []float32    // ssm_d: one per head
	ssmNorm []float32    // ssm_norm: inner, one weight row per group
	pool    *kernels.Pool
	K       int // ssm.conv_kernel
	inner   int // ssm.inner_size
	ds      int // ssm.state_size
	ng, nh  int // ssm.group_count, ssm.time_step_rank (heads)
	hd      int // inner / nh
	job     scanJob
}

func loadMamba2(ld *model.Loader, l int, hp *model.HParams, pool *kernels.Pool) *mamba2 {
	g := hp.SSM
	m := &mamba2{pool: pool, K: g.ConvKernel, inner: g.InnerSize, ds: g.StateSize, ng: g.GroupCount, nh: g.TimeStepRank}
	m.hd = m.inner / m.nh
	E := hp.NEmbd
	m.norm = ld.Vector(blk(l, "attn_norm.weight"), E)
	m.in = ld.Matrix(blk(l, "ssm_in.weight"), E, m.projRows())
	m.conv = ld.Vector(blk(l, "ssm_conv1d.weight"), m.K*m.C())
	m.convB, _ = ld.OptionalVector(blk(l, "ssm_conv1d.bias"), m.C())
	m.dtB = ld.Vector(blk(l, "ssm_dt.bias"), m.nh)
	m.a = ld.Vector(blk(l, "ssm_a"), m.nh)
	m.d = ld.Vector(blk(l, "ssm_d"), m.nh)
	m.ssmNorm = ld.Vector(blk(l, "ssm_norm.weight"), m.inner)
	m.out = ld.Matrix(blk(l, "ssm_out.weight"), m.inner, E)
	m.job.fn = m.job.run
	return m
}

// C is the convolved channels: x (inner), B and C (groups × d_state each).
func (m *mamba2) C() int { return m.inner + 2*m.ng*m.ds }

// projRows is ssm_in's output per token: z, x|B|C, dt.
func (m *mamba2) projRows() int { return m.inner + m.C() + m.nh }

// StateFloats implements model.Mixer.
func (m *mamba2) StateFloats() int { return (m.K-1)*m.C() + m.nh*m.hd*m.ds }

// Mix implements model.Mixer: x += Wout·GroupRMSNorm(silu(z)·(scan + D·x'))
// with x'|B|C = silu(conv(xBC) + b) and z|xBC|dt = Win·RMSNorm(x)·attn_norm.
func (m *mamba2) Mix(p *model.Pass, st *model.State, l int, x []float32) error {
	n, C, P := p.N, m.C(), m.projRows()
	rec := st.Recurrent(l)
	if len(rec) != m.StateFloats() {
		return fmt.Errorf("%w: layer %d: recurrent state of %d floats, want %d", model.ErrBadModel, l, len(rec), m.StateFloats())
	}
	h := p.Buf(n * p.E)
	p.Norm(h, x, m.norm)
	zx := p.Buf(n * P)
	if err := p.MatMul(&m.in, h, zx); err != nil {
		return err
	}
	xbc := p.Buf(n * C)
	for t := 0; t < n; t++ {
		copy(xbc[t*C:(t+1)*C], zx[t*P+m.inner:t*P+m.inner+C])
	}
	model.CausalConv(rec[:(m.K-1)*C], xbc, m.conv, n, C, m.K, p.Buf(m.K-1+n))
	if m.convB != nil {
		model.AddBias(xbc, m.convB)
	}
	kernels.SiLU(xbc, xbc)
	y := p.Buf(n * m.inner)
	j := &m.job
	j.m, j.n, j.zx, j.xbc, j.y, j.state = m, n, zx, xbc, y, rec[(m.K-1)*C:]
	err := m.pool.Parallel(m.nh, j.fn)
	j.zx, j.xbc, j.y, j.state = nil, nil, nil, nil
	if err != nil {
		return err
	}
	gs := m.inner / m.ng
	for t := 0; t < n; t++ {
		yt := y[t*m.inner : (t+1)*m.inner]
		kernels.SwiGLU(yt, zx[t*P:t*P+m.inner], yt) // silu(z)·y
		for g := 0; g < m.ng; g++ {
			model.RMSNorm(yt[g*gs:(g+1)*gs], yt[g*gs:(g+1)*gs], p.Eps, m.ssmNorm[g*gs:(g+1)*gs])
		}
	}
	o := p.Buf(n * p.E)
	if err := p.MatMul(&m.out, y, o); err != nil {
		return err
	}
	for i := range x {
		x[i] = o[i] + x[i]
	}
	return nil
}

// scanJob is the selective scan of every head over a pass's tokens, one
// head per pool task (heads are independent: the result does not depend
// on the thread count).
type scanJob struct {
	m                 *mamba2
	n                 int
	zx, xbc, y, state []float32
	fn                func(h int)
}

// run is head h's scan as ggml_ssm_scan_f32 computes it with a scalar
// decay per head: per token, Δ = softplus(dt + dt_b), dA = exp(Δ·A), and
// per row i of the head's state
//
//	S_i = S_i·dA + B·(x_i·Δ);  y_i = S_i·C (a float32 sum in order)
//
// then y_i += x_i·D (ggml_mul, then ggml_add). B and C are the head's
// group's (h / (heads/groups), repeat_interleave).
func (j *scanJob) run(h int) {
	m := j.m
	C, P, ds, hd := m.C(), m.projRows(), m.ds, m.hd
	g := h / (m.nh / m.ng)
	S := j.state[h*hd*ds : (h+1)*hd*ds]
	A, D := m.a[h], m.d[h]
	for t := 0; t < j.n; t++ {
		row := j.xbc[t*C : (t+1)*C]
		xh := row[h*hd : (h+1)*hd]
		B := row[m.inner+g*ds : m.inner+(g+1)*ds]
		Cg := row[m.inner+(m.ng+g)*ds : m.inner+(m.ng+g+1)*ds]
		dt := softplus(j.zx[t*P+m.inner+C+h] + m.dtB[h])
		dA := float32(math.Exp(float64(dt * A)))
		yh := j.y[t*m.inner+h*hd : t*m.inner+(h+1)*hd]
		for i, xi := range xh {
			xdt := xi * dt
			s := S[i*ds : (i+1)*ds]
			var sum float32
			for k := range s {
				v := float32(s[k]*dA) + float32(B[k]*xdt) // explicit rounding: no FMA
				sum += float32(v * Cg[k])
				s[k] = v
			}
			yh[i] = sum + float32(xi*D)
		}
	}
}

// softplus is ggml's: x above 20, else log(1+e^x) in float32.
func softplus(x float32) float32 {
	if x > 20 {
		return x
	}
	return float32(math.Log(float64(1 + float32(math.Exp(float64(x))))))
}
