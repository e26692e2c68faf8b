package model

import (
	"fmt"

	"github.com/pipe-engine/pipe/kernels"
)

// The pieces below are shared by every architecture's Forward: the context
// check, the token embedding lookup and the output head. Architectures call
// them so that these steps are written, and tested, once.

// Reserve checks that n more positions fit in st's context and returns the
// first new position.
func Reserve(st *State, n int) (int, error) {
	if st.Pos+n > st.NCtx {
		return 0, fmt.Errorf("%w: %d positions used + %d new > context %d (raise -c)", ErrContextFull, st.Pos, n, st.NCtx)
	}
	return st.Pos, nil
}

// Embed writes the embedding rows of tokens into x (n × cols, token-major).
func Embed(w *Weight, tokens []int32, x []float32) error {
	E := w.Cols
	for t, tok := range tokens {
		if tok < 0 || int(tok) >= w.Rows {
			return fmt.Errorf("token id %d outside the vocabulary of %d", tok, w.Rows)
		}
		if err := DequantizeRow(w.Type, w.Data, E, int(tok), x[t*E:(t+1)*E]); err != nil {
			return fmt.Errorf("%s row %d: %w", w.Name, tok, err)
		}
	}
	return nil
}

// MatMul multiplies n token-major inputs by w, naming w in errors.
func MatMul(p *kernels.Pool, w *Weight, x []float32, n int, y []float32) error {
	if err := p.MatMul(w.Type, w.Data, w.Rows, w.Cols, x, n, y); err != nil {
		return fmt.Errorf("%s: %w", w.Name, err)
	}
	return nil
}

// head applies the output RMSNorm and the LM head to the last token of x
// (N × n_embd), or to every token when all is set, and returns one logit row
// per token: views of the pass's logits buffer (kept across passes of the
// same size).
func (p *Pass) head(d *Decoder, x []float32, all bool) ([][]float32, error) {
	out := &d.Output
	E, R := out.Cols, out.Rows
	first := p.N - 1
	if all {
		first = 0
	}
	if n := (p.N - first) * R; len(p.logits) != n {
		p.logits = make([]float32, n)
	}
	h := p.h[:E] // free once the last layer has run
	p.rows = p.rows[:0]
	for t := first; t < p.N; t++ {
		RMSNorm(h, x[t*E:(t+1)*E], d.Eps, d.OutNorm)
		lg := p.logits[(t-first)*R : (t-first+1)*R]
		if err := MatMul(d.Pool, out, h, 1, lg); err != nil {
			return nil, err
		}
		p.rows = append(p.rows, lg)
	}
	return p.rows, nil
}
