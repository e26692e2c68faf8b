package deepseek4

// forward.go: the forward pass (llama_model_deepseek4::graph): the
// embedding repeated into the hyper-connection streams, every layer's
// attention and FFN blocks between their hyper-connections, and the head.

import (
	"context"
	"fmt"

	"github.com/pipe-engine/pipe/model"
)

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
	hc, E := m.own.HC, m.E
	e := make([]float32, n*E)
	if err := model.Embed(&m.tokEmbd, tokens, e); err != nil {
		return nil, err
	}
	x := make([]float32, n*hc*E)
	for t := 0; t < n; t++ {
		for s := 0; s < hc; s++ {
			copy(x[(t*hc+s)*E:(t*hc+s+1)*E], e[t*E:(t+1)*E])
		}
	}
	for l := range m.layers {
		if err := ctx.Err(); err != nil {
			return nil, err
		}
		if err := m.block(ctx, st, moe, l, x, tokens, pos0); err != nil {
			return nil, err
		}
	}
	st.Pos = pos0 + n
	return m.head(x, n, all, st.Embeddings)
}

// block runs layer l's attention and FFN halves, each between its
// hyper-connections, on the streams x of the n tokens.
func (m *Model) block(ctx context.Context, st *model.State, moe model.MoE, l int, x []float32, tokens []int32, pos0 int) error {
	L, n := &m.layers[l], len(tokens)
	hc, E := m.own.HC, m.E
	res := make([]float32, len(x))
	cur, h := make([]float32, n*E), make([]float32, n*E)
	post, comb := make([]float32, n*hc), make([]float32, n*hc*hc)
	copy(res, x)
	if err := m.hcPre(&L.hcAttn, x, n, cur, post, comb); err != nil {
		return err
	}
	model.NormRows(h, cur, n, m.eps, L.attnNorm)
	y, err := m.attention(st, l, h, n, pos0)
	if err != nil {
		return err
	}
	m.hcPost(y, res, n, post, comb, x)
	copy(res, x)
	if err := m.hcPre(&L.hcFFN, x, n, cur, post, comb); err != nil {
		return err
	}
	model.NormRows(h, cur, n, m.eps, L.ffnNorm)
	if y, err = m.ffn(ctx, moe, l, h, tokens); err != nil {
		return err
	}
	m.hcPost(y, res, n, post, comb, x)
	return nil
}

// ffn is the FFN half on the normed input h: the routed experts through
// the MoE seam plus the shared expert.
func (m *Model) ffn(ctx context.Context, moe model.MoE, l int, h []float32, tokens []int32) ([]float32, error) {
	L, n := &m.layers[l], len(tokens)
	E, ne := m.E, m.d.HParams.NExpert
	logits := make([]float32, n*ne)
	if err := model.MatMul(m.pool, &L.gateInp, h, n, logits); err != nil {
		return nil, err
	}
	if L.tid2eid != nil {
		m.hashMask(L.tid2eid, tokens, logits)
	}
	out := make([]float32, n*E)
	xs, ls, os := make([][]float32, n), make([][]float32, n), make([][]float32, n)
	for t := 0; t < n; t++ {
		xs[t], ls[t], os[t] = h[t*E:(t+1)*E], logits[t*ne:(t+1)*ne], out[t*E:(t+1)*E]
	}
	var err error
	if rm, ok := moe.(model.RouterInputMoE); ok {
		err = rm.RunMoERouted(ctx, l, xs, ls, xs, os)
	} else {
		err = moe.RunMoE(ctx, l, xs, ls, os)
	}
	if err != nil {
		return nil, err
	}
	sh, err := m.shared(L, h, n)
	if err != nil {
		return nil, err
	}
	for i := range out {
		out[i] += sh[i]
	}
	return out, nil
}

// hashMask leaves each token's logits only for the experts its row of
// tid2eid names (the others −∞: √softplus 0, never chosen while a named
// expert's score is positive), as llama.cpp's build_moe_ffn takes the
// row as the selected experts and weighs them by their scores.
func (m *Model) hashMask(tid2eid, tokens []int32, logits []float32) {
	ne, k := m.d.HParams.NExpert, m.d.HParams.NExpertUsed
	keep := make([]bool, ne)
	for t, tok := range tokens {
		clear(keep)
		for _, e := range tid2eid[int(tok)*k : (int(tok)+1)*k] {
			keep[e] = true
		}
		row := logits[t*ne : (t+1)*ne]
		for e := range row {
			if !keep[e] {
				row[e] = negInf
			}
		}
	}
}

// shared is the shared expert: down(act(gate h, up h)).
func (m *Model) shared(L *layer, h []float32, n int) ([]float32, error) {
	F := L.shGate.Rows
	g, u, a := make([]float32, n*F), make([]float32, n*F), make([]float32, n*F)
	if err := model.MatMul(m.pool, &L.shGate, h, n, g); err != nil {
		return nil, err
	}
	if err := model.MatMul(m.pool, &L.shUp, h, n, u); err != nil {
		return nil, err
	}
	L.shAct(a, g, u)
	out := make([]float32, n*m.E)
	return out, model.MatMul(m.pool, &L.shDown, a, n, out)
}

// head is the output: the head's hyper-connection, the output norm and
// the LM head, for the last token or every token; with embd the output
// norm's rows (model.State.Embeddings).
func (m *Model) head(x []float32, n int, all, embd bool) ([][]float32, error) {
	first := n - 1
	if all {
		first = 0
	}
	hc, E, V := m.own.HC, m.E, m.output.Rows
	k := n - first
	y := make([]float32, k*E)
	if err := m.hcHeadMix(x[first*hc*E:], k, y); err != nil {
		return nil, err
	}
	model.NormRows(y, y, k, m.eps, m.outNorm)
	logits := y
	if embd { // the output norm's rows (model.State.Embeddings)
		V = E
	} else {
		logits = make([]float32, k*V)
		if err := model.MatMul(m.pool, &m.output, y, k, logits); err != nil {
			return nil, err
		}
	}
	rows := make([][]float32, k)
	for i := range rows {
		rows[i] = logits[i*V : (i+1)*V]
	}
	return rows, nil
}

// ForwardBatch implements model.Model: each sequence's Forward in turn
// (every sequence's rows are what Forward returns for it alone; the MoE
// sees one sequence's tokens at a time).
func (m *Model) ForwardBatch(ctx context.Context, seqs []model.Seq, moe model.MoE) ([][][]float32, error) {
	out := make([][][]float32, len(seqs))
	for i, s := range seqs {
		if len(s.Tokens) == 0 {
			continue
		}
		for j := 0; j < i; j++ {
			if seqs[j].State == s.State && len(seqs[j].Tokens) > 0 {
				return nil, fmt.Errorf("model: batch sequences %d and %d share one State", j, i)
			}
		}
		rows, err := m.Forward(ctx, s.State, s.Tokens, moe, s.All)
		if err != nil {
			return nil, fmt.Errorf("batch sequence %d: %w", i, err)
		}
		out[i] = rows
	}
	return out, nil
}
