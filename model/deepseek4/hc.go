package deepseek4

// hc.go: the hyper-connections (llama.cpp's build_hc_pre, build_hc_post,
// build_hc_sinkhorn and build_hc_head), token by token over the hc_mult
// residual streams of a token (stream s at s·n_embd of its row). Every
// product before a sum is rounded (float32(x*y)): no fused multiply-add on
// arm64, so the logits' bits are the same on every architecture.

import (
	"math"

	"github.com/pipe-engine/pipe/model"
)

// hcPre mixes the n tokens' streams x (n × hc·E) into cur (n × E) with
// mixer w, and writes each token's post weights (hc) and Sinkhorn
// combination (hc × hc, dst fastest) for hcPost.
func (m *Model) hcPre(w *hcMix, x []float32, n int, cur, post, comb []float32) error {
	hc, E := m.own.HC, m.E
	mixW := (2 + hc) * hc
	flat := make([]float32, n*hc*E)
	model.NormRows(flat, x, n, m.eps, nil)
	mixes := make([]float32, n*mixW)
	if err := model.MatMul(m.pool, &w.fn, flat, n, mixes); err != nil {
		return err
	}
	pre := make([]float32, hc)
	for t := 0; t < n; t++ {
		mx := mixes[t*mixW : (t+1)*mixW]
		for i := 0; i < hc; i++ {
			pre[i] = model.Sigmoid(float32(mx[i]*w.scale[0])+w.base[i]) + m.own.HCEps
			post[t*hc+i] = 2 * model.Sigmoid(float32(mx[hc+i]*w.scale[1])+w.base[hc+i])
		}
		c := comb[t*hc*hc : (t+1)*hc*hc]
		for k := range c {
			c[k] = float32(mx[2*hc+k]*w.scale[2]) + w.base[2*hc+k]
		}
		m.sinkhorn(c)
		weighStreams(x[t*hc*E:(t+1)*hc*E], pre, cur[t*E:(t+1)*E])
	}
	return nil
}

// weighStreams writes Σ_s pre_s·x_s into out, summed in stream order as
// ggml's mul and add nodes.
func weighStreams(x, pre, out []float32) {
	E := len(out)
	for i := range out {
		out[i] = x[i] * pre[0]
	}
	for s := 1; s < len(pre); s++ {
		xs := x[s*E : (s+1)*E]
		for i := range out {
			out[i] += float32(xs[i] * pre[s])
		}
	}
}

// sinkhorn normalises c (hc × hc, c[dst + hc·src]) as build_hc_sinkhorn:
// a softmax over dst for each src, + ε, the columns (each dst over its
// srcs) divided by their sum + ε, then hc_sinkhorn_iters − 1 times rows
// (each src over its dsts) and columns again.
func (m *Model) sinkhorn(c []float32) {
	hc, eps := m.own.HC, m.own.HCEps
	for src := 0; src < hc; src++ {
		model.Softmax(c[src*hc : (src+1)*hc])
	}
	for i := range c {
		c[i] += eps
	}
	cols := func() {
		for dst := 0; dst < hc; dst++ {
			var s float64
			for src := 0; src < hc; src++ {
				s += float64(c[dst+hc*src])
			}
			d := float32(s) + eps
			for src := 0; src < hc; src++ {
				c[dst+hc*src] /= d
			}
		}
	}
	rows := func() {
		for src := 0; src < hc; src++ {
			var s float64
			row := c[src*hc : (src+1)*hc]
			for _, v := range row {
				s += float64(v)
			}
			d := float32(s) + eps
			for i := range row {
				row[i] /= d
			}
		}
	}
	cols()
	for i := 1; i < m.own.Sinkhorn; i++ {
		rows()
		cols()
	}
}

// hcPost writes the streams after a block into x (n × hc·E): stream dst is
// post_dst·y + Σ_src comb[dst,src]·residual_src, added in src order.
func (m *Model) hcPost(y, residual []float32, n int, post, comb, x []float32) {
	hc, E := m.own.HC, m.E
	for t := 0; t < n; t++ {
		yt, rt := y[t*E:(t+1)*E], residual[t*hc*E:(t+1)*hc*E]
		c := comb[t*hc*hc : (t+1)*hc*hc]
		for dst := 0; dst < hc; dst++ {
			out := x[t*hc*E+dst*E : t*hc*E+(dst+1)*E]
			p := post[t*hc+dst]
			for i := range out {
				out[i] = yt[i] * p
			}
			for src := 0; src < hc; src++ {
				w, rs := c[dst+hc*src], rt[src*E:(src+1)*E]
				for i := range out {
					out[i] += float32(rs[i] * w)
				}
			}
		}
	}
}

// hcHeadMix is build_hc_head: the streams of each of the n tokens weighed
// by σ(m·scale + base) + ε of the head's mixes, into out (n × E).
func (m *Model) hcHeadMix(x []float32, n int, out []float32) error {
	hc, E := m.own.HC, m.E
	flat := make([]float32, n*hc*E)
	model.NormRows(flat, x, n, m.eps, nil)
	mixes := make([]float32, n*hc)
	if err := model.MatMul(m.pool, &m.hcHead.fn, flat, n, mixes); err != nil {
		return err
	}
	pre := make([]float32, hc)
	for t := 0; t < n; t++ {
		for i := range pre {
			pre[i] = model.Sigmoid(float32(mixes[t*hc+i]*m.hcHead.scale[0])+m.hcHead.base[i]) + m.own.HCEps
		}
		weighStreams(x[t*hc*E:(t+1)*hc*E], pre, out[t*E:(t+1)*E])
	}
	return nil
}

// relu is max(x, 0) as ggml's relu.
func relu(x float32) float32 {
	if x > 0 {
		return x
	}
	return 0
}

// negInf is −∞ in float32.
var negInf = float32(math.Inf(-1))
