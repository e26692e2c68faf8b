package model

// block.go: the decoder-block skeleton every architecture shares. A Decoder
// is the embedding, a list of Layers and the output head; each Layer is an
// Attention (weights plus per-layer geometry, with optional parts for what
// the architectures add: biases, per-head Q/K norms, a weightless V norm, a
// post-attention norm, sinks, a sliding window, an output gate) or a Mixer
// hook in its place (a recurrent layer with its own state), followed by an
// FFN hook (the feed-forward half, where the architectures differ most).
// Architectures fill a Decoder from their tensors and implement the hooks;
// Forward, NewState and PeekRouter are written once here.

import (
	"context"
	"fmt"
	"math"

	"github.com/pipe-engine/pipe/internal/clock"
	"github.com/pipe-engine/pipe/kernels"
)

// Geom is one attention layer's geometry.
type Geom struct {
	NHead, NHeadKV int
	HeadDim        int      // K and V head width
	Window         int      // sliding window: query p sees key j iff p-j < Window; 0 = whole causal context
	Rope           Rotation // rotation of Q and K heads
	Scale          float32  // KQ scale
}

// QDim is the width of a token's queries.
func (g Geom) QDim() int { return g.NHead * g.HeadDim }

// KVDim is the width of a token's keys (and values).
func (g Geom) KVDim() int { return g.NHeadKV * g.HeadDim }

// Attention is one layer's attention: weights, geometry and optional parts
// (nil when the architecture has none).
type Attention struct {
	Geom
	Norm           []float32 // attn_norm (RMS)
	Wq, Wk, Wv, Wo Weight    // Wv without Data: V is K's projection (gemma4)
	Bq, Bk, Bv, Bo []float32 // projection biases (gpt-oss)
	QNorm, KNorm   []float32 // per-head RMS norms of Q and K, before RoPE
	QKNormWhole    bool      // QNorm and KNorm span the whole projection, not one head (olmoe)
	VNorm          bool      // per-head RMS norm of V without a weight (gemma4)
	PostNorm       []float32 // RMS norm of the projected output, before the residual (gemma4)
	Sinks          []float32 // one sink logit per head (gpt-oss)
	// Gated: Wq's rows hold each head's query then as many gate rows, and
	// the attention output is multiplied by sigmoid(gate) before Wo
	// (qwen35moe).
	Gated bool
	// Latent, when set, replaces the projections above (only Norm and Wo
	// are used): latent attention over a K-only cache (latent.go).
	Latent *Latent
}

// qRows is the width of Wq's output for one token: the queries, and the
// gates of a gated layer.
func (a *Attention) qRows() int {
	if a.Gated {
		return 2 * a.QDim()
	}
	return a.QDim()
}

// Mixer is a layer's token mixer in place of the shared Attention: a
// recurrent layer (qwen35moe's gated delta-net, nemotron_h_moe's Mamba-2),
// or none at all (StateFloats 0: nemotron_h_moe's MoE-only blocks, which
// keep no state). Mix transforms the residual stream x (p.N × n_embd,
// token-major) in place, reading and updating the layer's recurrent state
// st.Recurrent(layer), which holds StateFloats floats (zero at the start
// of a sequence).
type Mixer interface {
	Mix(p *Pass, st *State, layer int, x []float32) error
	StateFloats() int
}

// FFN is the feed-forward half of a decoder layer.
type FFN interface {
	// Run transforms the residual stream x (the attention block's output,
	// p.N × n_embd, token-major) in place; routed experts go through p.RunMoE.
	Run(ctx context.Context, p *Pass, layer int, x []float32) error
}

// Peeker is implemented by FFN hooks with a router: Peek writes the
// layer's router logits for routerIn, a hidden state of the kind the hook
// hands to Pass.RunMoE as its router input.
type Peeker interface {
	Peek(p *kernels.Pool, routerIn []float32, n int, logits []float32) error
}

// Layer is one decoder block: Attn, or Mixer when set, then FFN.
type Layer struct {
	Attn  Attention
	Mixer Mixer
	FFN   FFN
}

// Decoder is a decoder-only transformer built from Layers.
type Decoder struct {
	Pool      *kernels.Pool
	NEmbd     int
	Eps       float32 // RMS norm epsilon
	TokEmbd   Weight
	EmbdScale float32 // multiplies the token embeddings (0: not scaled)
	Layers    []Layer
	OutNorm   []float32
	Output    Weight
	Softcap   float32 // final logit soft-cap: cap·tanh(logit/cap) (0: none)
	Timings   *Timings
	Clock     clock.Clock // what Timings are read from (nil: the wall clock)
}

// NewState implements Model: one KV layer per attention layer, each as wide
// as its own geometry (K only for latent attention), and a recurrent state
// per Mixer layer (none for a Mixer of no state).
func (d *Decoder) NewState(nCtx int, kv KVType) (*State, error) {
	widths, rec := make([]int, len(d.Layers)), make([]int, len(d.Layers))
	kOnly, none := make([]bool, len(d.Layers)), make([]bool, len(d.Layers))
	for l := range d.Layers {
		if m := d.Layers[l].Mixer; m != nil {
			rec[l] = m.StateFloats()
			none[l] = rec[l] == 0
			continue
		}
		widths[l] = d.Layers[l].Attn.KVDim()
		kOnly[l] = d.Layers[l].Attn.Latent != nil
	}
	return newState(nCtx, widths, rec, kOnly, none, kv)
}

// PeekRouter implements RouterPeeker through layer's FFN hook.
func (d *Decoder) PeekRouter(layer int, x []float32, n int, logits []float32) error {
	if layer < 0 || layer >= len(d.Layers) || n <= 0 || len(x) != n*d.NEmbd {
		return fmt.Errorf("model: PeekRouter(layer %d of %d, %d inputs for %d rows of %d)", layer, len(d.Layers), len(x), n, d.NEmbd)
	}
	pk, ok := d.Layers[layer].FFN.(Peeker)
	if !ok {
		return fmt.Errorf("model: layer %d has no router", layer)
	}
	return pk.Peek(d.Pool, x, n, logits)
}

// Forward implements Model: embeddings, every layer's attention and FFN,
// then the output head. The returned rows are valid until the next Forward
// on st: a single-token pass (decode) reuses st's buffers, so a steady
// decode step allocates nothing here. It is ForwardBatch of one sequence.
func (d *Decoder) Forward(ctx context.Context, st *State, tokens []int32, moe MoE, all bool) ([][]float32, error) {
	n := len(tokens)
	if n == 0 {
		return nil, nil
	}
	pos0, err := Reserve(st, n)
	if err != nil {
		return nil, err
	}
	p := d.pass(st, n, pos0, moe)
	seqs := [1]seqPass{{st: st, p: p, x: p.x, tokens: tokens, all: all}}
	if err := d.run(ctx, seqs[:], p); err != nil {
		return nil, err
	}
	return d.headOf(&seqs[0])
}

// SoftCap replaces every logit v with cap·tanh(v·(1/cap)), as ggml's
// scale, tanh, scale.
func SoftCap(row []float32, c float32) {
	inv := 1 / c
	for i, v := range row {
		row[i] = float32(math.Tanh(float64(v*inv))) * c
	}
}

// Pass is one Forward call's activations over N tokens starting at
// position Pos0 (token-major rows of n_embd floats). The attention buffers
// are sized for the widest layer; FFN hooks take more from Buf, which hands
// out buffers that are reused from layer to layer. A single-token pass is
// kept in its State and reused by the next single-token Forward (its scores
// window spans the whole context); a multi-token pass (a prefill chunk) is
// made for its call, so its larger buffers do not outlive it.
type Pass struct {
	N, Pos0, E int
	Pool       *kernels.Pool
	Eps        float32
	Timings    *Timings
	Clock      clock.Clock // the Decoder's: what Timings are read from
	moe        MoE
	d          *Decoder
	tm         Timings // Timings when the Decoder has none

	x, h, q, k, v, att, o []float32
	scores                []float32 // one window of Pos0+N floats per query head
	bufs                  [][]float32
	next                  int
	xs, ls, rs, os        [][]float32
	in                    Inputs // the single-token q/k/v input, quantized once
	logits                []float32
	rows                  [][]float32 // head's rows, views of logits
	heads                 attendJob
	cs                    []float32    // one position's rotation table (TableRotation)
	side                  sideState    // RunMoEWith's side work
	sideFn                func() error // runSide, bound once
}

// pass returns the Pass for n tokens at pos0: st's kept one when n is 1.
func (d *Decoder) pass(st *State, n, pos0 int, moe MoE) *Pass {
	var p *Pass
	if n > 1 {
		p = d.newPass(n, pos0+n)
	} else {
		if st.pass == nil || st.pass.d != d {
			st.pass = d.newPass(1, st.NCtx)
		}
		p = st.pass
	}
	p.Pos0, p.moe, p.Timings, p.Clock = pos0, moe, d.Timings, d.Clock
	if p.Timings == nil {
		p.Timings = &p.tm
	}
	return p
}

// newPass makes a Pass for n tokens whose attention windows reach at most
// window positions.
func (d *Decoder) newPass(n, window int) *Pass {
	qd, kvd, heads, cs := 0, 0, 0, 0
	for l := range d.Layers {
		a := &d.Layers[l].Attn
		cs = max(cs, tableLen(a))
		// scores: a window per query head, or per slot of a prompt tile
		qd, kvd, heads = max(qd, a.qRows()), max(kvd, a.KVDim()), max(heads, a.NHead, kernels.GroupSlots*a.NHeadKV)
	}
	E := d.NEmbd
	p := &Pass{N: n, E: E, Pool: d.Pool, Eps: d.Eps, d: d,
		x: make([]float32, n*E), h: make([]float32, n*E), q: make([]float32, n*qd), k: make([]float32, n*kvd), v: make([]float32, n*kvd),
		att: make([]float32, n*qd), o: make([]float32, n*E), scores: make([]float32, heads*window), cs: make([]float32, cs),
		xs: make([][]float32, n), ls: make([][]float32, n), rs: make([][]float32, n), os: make([][]float32, n)}
	p.heads.p = p
	p.heads.fn = p.heads.run
	p.sideFn = p.runSide
	return p
}

// Buf returns a buffer of size floats for the current layer (contents
// unspecified). Buffers are reused from one layer to the next, and from one
// pass to the next when the pass is kept.
func (p *Pass) Buf(size int) []float32 {
	if p.next == len(p.bufs) {
		p.bufs = append(p.bufs, nil)
	}
	b := p.bufs[p.next]
	if cap(b) < size {
		b = make([]float32, size)
		p.bufs[p.next] = b
	}
	p.next++
	return b[:size]
}

// Norm writes the RMS norm of each of the N rows of x into dst (dst may be
// x); w may be nil (no weight).
func (p *Pass) Norm(dst, x, w []float32) {
	NormRows(dst, x, p.N, p.Eps, w)
}

// NormRows RMS-normalises each of the n rows of x into dst (dst may be x).
func NormRows(dst, x []float32, n int, eps float32, w []float32) {
	c := len(x) / n
	for t := 0; t < n; t++ {
		RMSNorm(dst[t*c:(t+1)*c], x[t*c:(t+1)*c], eps, w)
	}
}

// MatMul multiplies the N rows of x by w into y.
func (p *Pass) MatMul(w *Weight, x, y []float32) error {
	return MatMul(p.Pool, w, x, p.N, y)
}

// RouterInputMoE is a MoE that also takes, per token, the hidden state the
// architecture's router read (PeekRouter's input), so that speculative
// prefetch can apply the next layer's router to the same kind of input.
type RouterInputMoE interface {
	MoE
	RunMoERouted(ctx context.Context, layer int, x, logits, routerIn, out [][]float32) error
}

// RunMoE hands layer's expert inputs x, router logits and router inputs
// (rows of N) to the MoE, which writes out.
func (p *Pass) RunMoE(ctx context.Context, layer int, x, logits, routerIn, out []float32) error {
	p.moeRows(x, logits, routerIn, out)
	if rm, ok := p.moe.(RouterInputMoE); ok {
		return rm.RunMoERouted(ctx, layer, p.xs, p.ls, p.rs, p.os)
	}
	return p.moe.RunMoE(ctx, layer, p.xs, p.ls, p.os)
}

// moeRows points the MoE row views at the pass's rows of x, logits,
// routerIn and out.
func (p *Pass) moeRows(x, logits, routerIn, out []float32) {
	ne := len(logits) / p.N
	for t := 0; t < p.N; t++ {
		p.xs[t] = x[t*p.E : (t+1)*p.E]
		p.ls[t] = logits[t*ne : (t+1)*ne]
		p.rs[t] = routerIn[t*p.E : (t+1)*p.E]
		p.os[t] = out[t*p.E : (t+1)*p.E]
	}
}

// AddBias adds bias to each row of y (rows of len(bias)); a nil bias adds
// nothing.
func AddBias(y, bias []float32) {
	w := len(bias)
	if w == 0 {
		return
	}
	for o := 0; o+w <= len(y); o += w {
		row := y[o : o+w]
		for i, b := range bias {
			row[i] += b
		}
	}
}

// attention runs layer l's attention block on the residual stream x in
// place: x += PostNorm(Wo·(attend(rope(norm(Wq h)), rope(norm(Wk h)), Wv h)
// [·sigmoid(gate)]) + bo) with h = RMSNorm(x)·Norm.
func (p *Pass) attention(st *State, l int, a *Attention, x []float32) error {
	if a.Latent != nil {
		return p.latentAttention(st, l, a, x)
	}
	n, qd, kvd := p.N, a.QDim(), a.KVDim()
	h, q, k, v, att, o := p.h, p.q[:n*a.qRows()], p.k[:n*kvd], p.v[:n*kvd], p.att[:n*qd], p.o
	p.Norm(h, x, a.Norm)
	if err := p.qkv(a, h, q, k, v); err != nil {
		return err
	}
	var gate []float32
	if a.Gated {
		gate = p.Buf(n * qd)
		splitGate(q, gate, n*a.NHead, a.HeadDim)
		q = q[:n*qd]
	}
	AddBias(q, a.Bq)
	AddBias(k, a.Bk)
	AddBias(v, a.Bv)
	p.prepareHeads(a, q, k, v)
	for t := 0; t < n; t++ {
		st.Store(l, p.Pos0+t, k[t*kvd:(t+1)*kvd], v[t*kvd:(t+1)*kvd])
	}
	if err := p.attendPrompt(st, l, a, q, att); err != nil {
		return err
	}
	for i, g := range gate {
		att[i] *= Sigmoid(g)
	}
	if err := p.MatMul(&a.Wo, att, o); err != nil {
		return err
	}
	AddBias(o, a.Bo)
	if a.PostNorm != nil {
		p.Norm(o, o, a.PostNorm)
	}
	for i := range x {
		x[i] = o[i] + x[i]
	}
	return nil
}

// splitGate moves the gates out of q, whose rows rows hold a query of hd
// floats followed by its gate of hd floats: the queries are packed to the
// front of q (rows × hd), the gates into gate.
func splitGate(q, gate []float32, rows, hd int) {
	for r := 0; r < rows; r++ {
		copy(gate[r*hd:(r+1)*hd], q[(2*r+1)*hd:(2*r+2)*hd])
		copy(q[r*hd:(r+1)*hd], q[2*r*hd:(2*r+1)*hd])
	}
}

// qkv projects the normed input h to q, k and v (v = k without Wv).
func (p *Pass) qkv(a *Attention, h, q, k, v []float32) error {
	ws, ys := []*Weight{&a.Wq, &a.Wk, &a.Wv}, [][]float32{q, k, v}
	if a.Wv.Data == nil {
		ws, ys = ws[:2], ys[:2]
	}
	if err := p.Project(h, ws, ys); err != nil {
		return err
	}
	if a.Wv.Data == nil {
		copy(v, k)
	}
	return nil
}

// Project multiplies the N rows of h by each of ws into the matching ys:
// one pool dispatch over the matrices for a single token (h quantized once
// per activation format, at most 4 matrices), the multi-token products
// otherwise.
func (p *Pass) Project(h []float32, ws []*Weight, ys [][]float32) error {
	if p.N == 1 {
		p.in.Reset(h)
		err := MatVecs(p.Pool, &p.in, ws, ys)
		p.in.Reset(nil)
		return err
	}
	for i, w := range ws {
		if err := p.MatMul(w, h, ys[i]); err != nil {
			return err
		}
	}
	return nil
}

// tableLen is the rotation table a's rotations need (0: none).
func tableLen(a *Attention) int {
	n := 0
	if tr, ok := a.Rope.(TableRotation); ok {
		n = tr.TableLen()
	}
	if a.Latent != nil {
		if tr, ok := a.Latent.Rope.(TableNormRotation); ok {
			n = max(n, tr.TableLen())
		}
	}
	return n
}

// headRotation rotates a layer's heads of one token: from the position's
// table when the rotation has one (computed once per token by at), else
// by ApplyNeoX per head.
type headRotation struct {
	r   Rotation
	tr  TableRotation
	cs  []float32
	pos int
}

// newHeadRotation returns the rotation by r, with cs as the table's scratch.
func newHeadRotation(r Rotation, cs []float32) headRotation {
	h := headRotation{r: r}
	if tr, ok := r.(TableRotation); ok {
		h.tr, h.cs = tr, cs[:tr.TableLen()]
	}
	return h
}

// at sets the position of the heads rotated next.
func (h *headRotation) at(pos int) {
	h.pos = pos
	if h.tr != nil {
		h.tr.Angles(pos, h.cs)
	}
}

// rotate rotates one head vector at the position set by at.
func (h *headRotation) rotate(x []float32) {
	if h.tr != nil {
		h.tr.RotateNeoX(x, h.cs)
		return
	}
	h.r.ApplyNeoX(x, h.pos)
}

// prepareHeads applies the Q and K norms (per head, or over the whole
// projection) and the rotation to every token's Q and K heads, and the
// weightless norm to V heads when the layer has it.
func (p *Pass) prepareHeads(a *Attention, q, k, v []float32) {
	hd, qd, kvd := a.HeadDim, a.QDim(), a.KVDim()
	rot := newHeadRotation(a.Rope, p.cs)
	for t := 0; t < p.N; t++ {
		rot.at(p.Pos0 + t)
		if a.QKNormWhole {
			RMSNorm(q[t*qd:(t+1)*qd], q[t*qd:(t+1)*qd], p.Eps, a.QNorm)
			RMSNorm(k[t*kvd:(t+1)*kvd], k[t*kvd:(t+1)*kvd], p.Eps, a.KNorm)
		}
		// per-head norms first (heads are independent), four heads at a time
		if a.QNorm != nil && !a.QKNormWhole {
			RMSNormHeads(q[t*qd:(t+1)*qd], hd, p.Eps, a.QNorm)
		}
		if a.KNorm != nil && !a.QKNormWhole {
			RMSNormHeads(k[t*kvd:(t+1)*kvd], hd, p.Eps, a.KNorm)
		}
		for i := 0; i < a.NHead; i++ {
			rot.rotate(q[(t*a.NHead+i)*hd : (t*a.NHead+i+1)*hd])
		}
		for i := 0; i < a.NHeadKV; i++ {
			o := (t*a.NHeadKV + i) * hd
			head := k[o : o+hd]
			rot.rotate(head)
			if a.VNorm {
				RMSNorm(v[o:o+hd], v[o:o+hd], p.Eps, nil)
			}
		}
	}
}

// attendPrompt is the attention of every query head of the N tokens over
// the cache (causal, within the layer's window). When a KV head serves a
// multiple of kernels.GroupSlots query heads, each task is one slot group
// of a KV head's query heads (the cache rows read once for the group),
// else one query head; either way a task runs on one pool thread with its
// own scores window, and every head's result is the single-head one, so
// results do not depend on -t.
func (p *Pass) attendPrompt(st *State, l int, a *Attention, q, att []float32) error {
	j := &p.heads
	j.st, j.l, j.a, j.q, j.att = st, l, a, q, att
	group := a.NHead / a.NHeadKV
	j.width, j.tile = 1, 0
	tasks := a.NHead
	switch {
	case group%kernels.GroupSlots == 0:
		j.width = kernels.GroupSlots
		tasks = a.NHead / j.width
	case p.N > 1 && kernels.GroupSlots%group == 0 && a.HeadDim <= maxTileDim:
		j.tile = kernels.GroupSlots / group
		tasks = a.NHeadKV
	}
	err := p.Pool.Parallel(tasks, j.fn)
	j.st, j.a, j.q, j.att = nil, nil, nil, nil
	return err
}

// maxTileDim bounds the head width of prompt tiles (their gathered queries
// and outputs live on the stack).
const maxTileDim = 512

// attendJob is attendPrompt's arguments, kept in the Pass with the bound
// method the pool runs (made once per Pass, not once per layer).
type attendJob struct {
	p      *Pass
	st     *State
	l      int
	a      *Attention
	q, att []float32
	width  int // query heads per task: 1 or kernels.GroupSlots
	tile   int // > 0: tokens per tile, one KV head per task (tiles)
	fn     func(task int)
}

// run is one pool task: a KV head's prompt tiles or a run of query heads.
func (j *attendJob) run(task int) {
	if j.tile > 0 {
		j.tiles(task)
		return
	}
	j.heads(task)
}

// tiles is the attention of KV head kvh's query heads for the pass's
// tokens, j.tile tokens at a time: the tile's tokens × the KV head's query
// heads fill kernels.GroupSlots slots (the last tile padded with copies of
// its last slot), each slot reading rows from the tile's common first row
// to its own token. A tile whose tokens' windows start at different rows
// runs head by head.
func (j *attendJob) tiles(kvh int) {
	p, a := j.p, j.a
	hd, qd, group, end := a.HeadDim, a.QDim(), a.NHead/a.NHeadKV, p.Pos0+p.N
	g := kernels.GroupSlots
	sc := p.scores[kvh*g*end : (kvh+1)*g*end]
	args := AttnArgs{Layer: j.l, Off: kvh * hd, Dim: hd, Scale: a.Scale}
	var qb, ob [kernels.GroupSlots * maxTileDim]float32
	var rows [kernels.GroupSlots]int
	var sinkb [kernels.GroupSlots]float32
	for t0 := 0; t0 < p.N; t0 += j.tile {
		nt := min(j.tile, p.N-t0)
		args.Lo = a.windowStart(p.Pos0 + t0)
		if a.windowStart(p.Pos0+t0+nt-1) != args.Lo {
			for t := t0; t < t0+nt; t++ {
				j.headsOf(kvh*group, group, t, sc)
			}
			continue
		}
		for s := 0; s < g; s++ {
			ti, h := min(s/group, nt-1), kvh*group+s%group
			copy(qb[s*hd:(s+1)*hd], j.q[(t0+ti)*qd+h*hd:])
			rows[s] = p.Pos0 + t0 + ti - args.Lo + 1
			if a.Sinks != nil {
				sinkb[s] = a.Sinks[h]
			}
		}
		var sinks []float32
		if a.Sinks != nil {
			sinks = sinkb[:]
		}
		j.st.AttendTile(&args, &rows, sinks, qb[:g*hd], sc, ob[:g*hd])
		for s := 0; s < nt*group; s++ {
			ti, h := s/group, kvh*group+s%group
			copy(j.att[(t0+ti)*qd+h*hd:(t0+ti)*qd+(h+1)*hd], ob[s*hd:(s+1)*hd])
		}
	}
}

// windowStart is the first cache row position pos attends to.
func (a *Attention) windowStart(pos int) int {
	if a.Window > 0 && pos-a.Window+1 > 0 {
		return pos - a.Window + 1
	}
	return 0
}

// headsOf is the attention of query heads h0 … h0+n-1 for token t alone,
// head by head, with scores scratch sc.
func (j *attendJob) headsOf(h0, n, t int, sc []float32) {
	p, a := j.p, j.a
	hd, qd, group := a.HeadDim, a.QDim(), a.NHead/a.NHeadKV
	args := AttnArgs{Layer: j.l, Dim: hd, Scale: a.Scale, Hi: p.Pos0 + t}
	args.Lo = a.windowStart(args.Hi)
	for h := h0; h < h0+n; h++ {
		args.Off = (h / group) * hd
		if a.Sinks != nil {
			args.Sink, args.HasSink = a.Sinks[h], true
		}
		o := t*qd + h*hd
		j.st.Attend(&args, j.q[o:], sc, j.att[o:o+hd])
	}
}

// heads is the attention of query heads task·width … (task+1)·width-1 for
// the pass's tokens.
func (j *attendJob) heads(task int) {
	p, a, q, att, width := j.p, j.a, j.q, j.att, j.width
	hd, qd := a.HeadDim, a.QDim()
	group := a.NHead / a.NHeadKV
	end := p.Pos0 + p.N
	h0 := task * width // first query head
	sc := p.scores[h0*end : (h0+width)*end]
	args := AttnArgs{Layer: j.l, Off: (h0 / group) * hd, Dim: hd, Scale: a.Scale}
	var sinks []float32
	if a.Sinks != nil {
		sinks = a.Sinks[h0 : h0+width]
		args.Sink, args.HasSink = sinks[0], true
	}
	for t := 0; t < p.N; t++ {
		args.Hi = p.Pos0 + t
		args.Lo = a.windowStart(args.Hi)
		qo := t*qd + h0*hd
		if width == 1 {
			j.st.Attend(&args, q[qo:], sc, att[qo:qo+hd])
		} else {
			j.st.AttendGroup(&args, sinks, q[qo:], sc, att[qo:qo+width*hd])
		}
	}
}

// DenseFFN is a pre-norm dense feed-forward (deepseek2's leading layers):
// x += GLU(RMSNorm(x)·Norm).
type DenseFFN struct {
	Norm []float32
	GLU  GLU
}

// Run implements FFN.
func (f *DenseFFN) Run(_ context.Context, p *Pass, _ int, x []float32) error {
	h := p.Buf(p.N * p.E)
	p.Norm(h, x, f.Norm)
	out, err := f.GLU.Run(p, h)
	if err != nil {
		return err
	}
	for i := range x {
		x[i] = out[i] + x[i]
	}
	return nil
}

// RoutedFFN is the pre-norm routed MoE feed-forward of qwen3moe, gpt-oss,
// qwen2moe, olmoe and deepseek2: h = RMSNorm(x)·Norm, logits = Gate h +
// GateBias, x += MoE(h) (+ Shared(h) when the layer has a shared expert).
type RoutedFFN struct {
	Norm     []float32
	Gate     Weight        // ffn_gate_inp: NExpert rows
	GateBias []float32     // optional
	Shared   *SharedExpert // optional
}

// Run implements FFN.
func (f *RoutedFFN) Run(ctx context.Context, p *Pass, layer int, x []float32) error {
	t0 := p.Clock.Now()
	h := p.Buf(p.N * p.E)
	p.Norm(h, x, f.Norm)
	logits := p.Buf(p.N * f.Gate.Rows)
	if err := p.MatMul(&f.Gate, h, logits); err != nil {
		return err
	}
	AddBias(logits, f.GateBias)
	p.Timings.Router += p.Clock.Since(t0)
	out := p.Buf(p.N * p.E)
	if f.Shared == nil {
		if err := p.RunMoE(ctx, layer, h, logits, h, out); err != nil {
			return err
		}
	} else {
		// the shared expert runs while the routed experts' bytes are read
		y, err := p.RunMoEWith(ctx, layer, h, logits, h, out, f.Shared, h)
		if err != nil {
			return err
		}
		for i := range out {
			out[i] += y[i]
		}
	}
	for i := range x {
		x[i] = out[i] + x[i]
	}
	return nil
}

// Peek implements Peeker: the router applied to n normalised FFN inputs.
func (f *RoutedFFN) Peek(pool *kernels.Pool, x []float32, n int, logits []float32) error {
	if len(logits) < n*f.Gate.Rows {
		return fmt.Errorf("model: peek into %d logits, router has %d for %d rows", len(logits), f.Gate.Rows, n)
	}
	lg := logits[:n*f.Gate.Rows]
	if err := MatMul(pool, &f.Gate, x, n, lg); err != nil {
		return err
	}
	AddBias(lg, f.GateBias)
	return nil
}
