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

// Embed returns the embedding rows of tokens (n × cols, token-major).
func Embed(w *Weight, tokens []int32) ([]float32, error) {
	E := w.Cols
	x := make([]float32, len(tokens)*E)
	for t, tok := range tokens {
		if tok < 0 || int(tok) >= w.Rows {
			return nil, fmt.Errorf("token id %d outside the vocabulary of %d", tok, w.Rows)
		}
		if err := DequantizeRow(w.Type, w.Data, E, int(tok), x[t*E:(t+1)*E]); err != nil {
			return nil, fmt.Errorf("%s row %d: %w", w.Name, tok, err)
		}
	}
	return x, nil
}

// MatMul multiplies n token-major inputs by w, naming w in errors.
func MatMul(p *kernels.Pool, w *Weight, x []float32, n int, y []float32) error {
	if err := p.MatMul(w.Type, w.Data, w.Rows, w.Cols, x, n, y); err != nil {
		return fmt.Errorf("%s: %w", w.Name, err)
	}
	return nil
}

// Head applies the output RMSNorm and the LM head to the last token of x
// (n × cols), or to every token when all is set, and returns one logit row
// per token.
func Head(p *kernels.Pool, norm []float32, eps float32, output *Weight, x []float32, n int, all bool) ([][]float32, error) {
	E := output.Cols
	first := n - 1
	if all {
		first = 0
	}
	h := make([]float32, E)
	out := make([][]float32, 0, n-first)
	for t := first; t < n; t++ {
		RMSNorm(h, x[t*E:(t+1)*E], eps, norm)
		lg := make([]float32, output.Rows)
		if err := MatMul(p, output, h, 1, lg); err != nil {
			return nil, err
		}
		out = append(out, lg)
	}
	return out, nil
}
