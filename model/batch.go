package model

// batch.go: one forward pass over several sequences (continuous batching).
// Each sequence keeps its own State (KV rows, recurrent state, position) and
// its own Pass for the token mixer (attention or a Mixer) and the output
// head; the FFN hooks — and through them the MoE — run once per layer over
// the rows of every sequence's tokens together, so a layer's routed experts
// are planned, read and computed once for the whole batch. The FFN half
// computes every row independently of the others (per-row norms,
// row-independent products, per-token expert sums in rank order), so a
// sequence's logits do not depend on what else shares its pass.

import (
	"context"
	"fmt"
)

// Seq is one sequence's share of a batched forward pass: the tokens fed at
// its State's next positions, and whether the logits of every fed position
// are wanted (else only the last one's).
type Seq struct {
	State  *State
	Tokens []int32
	All    bool
}

// seqPass is a sequence of a run: its state, its Pass (token mixer and
// head) and its rows x of the run's residual stream.
type seqPass struct {
	st     *State
	p      *Pass
	x      []float32
	tokens []int32
	all    bool
}

// ForwardBatch feeds every sequence's tokens at its own State's next
// positions in one pass and returns, per sequence, the rows Forward would
// return for it alone (bit for bit): attention runs per sequence, each FFN
// layer once over all the sequences' tokens. A sequence without tokens gets
// no rows. Every sequence needs its own State. The rows of a one-token
// sequence are its State's reused buffers (valid until its next pass).
func (d *Decoder) ForwardBatch(ctx context.Context, seqs []Seq, moe MoE) ([][][]float32, error) {
	out := make([][][]float32, len(seqs))
	run := make([]seqPass, 0, len(seqs))
	at := make([]int, 0, len(seqs)) // index in seqs of run[i]
	n := 0
	for i, s := range seqs {
		if len(s.Tokens) == 0 {
			continue
		}
		for _, r := range run {
			if r.st == s.State {
				return nil, fmt.Errorf("model: batch sequences %d and another share one State", i)
			}
		}
		pos0, err := Reserve(s.State, len(s.Tokens))
		if err != nil {
			return nil, fmt.Errorf("batch sequence %d: %w", i, err)
		}
		p := d.pass(s.State, len(s.Tokens), pos0, moe)
		run = append(run, seqPass{st: s.State, p: p, tokens: s.Tokens, all: s.All})
		at = append(at, i)
		n += len(s.Tokens)
	}
	if len(run) == 0 {
		return out, nil
	}
	f := run[0].p
	if len(run) > 1 {
		f = d.ffnPass(n, moe)
	}
	off := 0
	for i := range run {
		r := &run[i]
		r.x = f.x[off*d.NEmbd : (off+len(r.tokens))*d.NEmbd]
		off += len(r.tokens)
	}
	if err := d.run(ctx, run, f); err != nil {
		return nil, err
	}
	for i := range run {
		rows, err := d.headOf(&run[i])
		if err != nil {
			return nil, err
		}
		out[at[i]] = rows
	}
	return out, nil
}

// ffnPass makes the Pass the FFN hooks of a batch run over n tokens: only
// the residual stream and the MoE row views (the hooks take the rest from
// Buf).
func (d *Decoder) ffnPass(n int, moe MoE) *Pass {
	p := &Pass{N: n, E: d.NEmbd, Pool: d.Pool, Eps: d.Eps, d: d, moe: moe, Timings: d.Timings, Clock: d.Clock,
		x:  make([]float32, n*d.NEmbd),
		xs: make([][]float32, n), ls: make([][]float32, n), rs: make([][]float32, n), os: make([][]float32, n)}
	if p.Timings == nil {
		p.Timings = &p.tm
	}
	p.sideFn = p.runSide
	return p
}

// run embeds the sequences' tokens into their rows and runs every layer:
// each sequence's token mixer on its rows with its own Pass and State, then
// the layer's FFN once with f over all rows (f.x, which the sequences' rows
// are views of). Each State's position advances when the pass succeeds.
func (d *Decoder) run(ctx context.Context, seqs []seqPass, f *Pass) error {
	tm, clk := f.Timings, f.Clock
	t0 := clk.Now()
	for i := range seqs {
		if err := d.embed(seqs[i].tokens, seqs[i].x); err != nil {
			return err
		}
	}
	tm.Embed += clk.Since(t0)
	for l := range d.Layers {
		if err := ctx.Err(); err != nil {
			return err
		}
		t0 = clk.Now()
		for i := range seqs {
			if err := d.mix(&seqs[i], l); err != nil {
				return err
			}
		}
		tm.Attention += clk.Since(t0)
		f.next = 0
		if err := d.Layers[l].FFN.Run(ctx, f, l, f.x); err != nil {
			return err
		}
	}
	for i := range seqs {
		s := &seqs[i]
		s.st.Pos = s.p.Pos0 + len(s.tokens)
	}
	return nil
}

// embed writes the (scaled) embedding rows of tokens into x.
func (d *Decoder) embed(tokens []int32, x []float32) error {
	if err := Embed(&d.TokEmbd, tokens, x); err != nil {
		return err
	}
	if d.EmbdScale != 0 {
		for i := range x {
			x[i] *= d.EmbdScale
		}
	}
	return nil
}

// mix runs layer l's token mixer (attention, or the layer's Mixer) on s's
// rows.
func (d *Decoder) mix(s *seqPass, l int) error {
	s.p.next = 0
	if m := d.Layers[l].Mixer; m != nil {
		return m.Mix(s.p, s.st, l, s.x)
	}
	return s.p.attention(s.st, l, &d.Layers[l].Attn, s.x)
}

// headOf is the output head (and final soft-cap) of s's rows, or their
// output norm when s's State is in embeddings mode.
func (d *Decoder) headOf(s *seqPass) ([][]float32, error) {
	tm, clk := s.p.Timings, s.p.Clock
	t0 := clk.Now()
	defer func() { tm.LMHead += clk.Since(t0) }()
	out, err := s.p.head(d, s.x, s.all, s.st.Embeddings)
	if err != nil || d.Softcap == 0 || s.st.Embeddings {
		return out, err
	}
	for _, row := range out {
		SoftCap(row, d.Softcap)
	}
	return out, nil
}
