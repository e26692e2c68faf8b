package model

import (
	"context"
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

// Acts are the per-pass activations of a transformer MoE forward pass over
// n tokens (token-major): the normed input H, Q/K/V, the attention output
// Att and its projection O, router logits RL, the MoE output Out, and one
// scores window per head (heads run in parallel).
type Acts struct {
	N, E, NExpert          int
	H, Q, K, V, Att, O, RL []float32
	Out, Scores            []float32
	hs, ls, os             [][]float32
}

// NewActs allocates the activations of a pass of n tokens ending at
// position end (exclusive) for nHead query heads of width qd and KV width kvd.
func NewActs(n, e, qd, kvd, nExpert, nHead, end int) *Acts {
	return &Acts{N: n, E: e, NExpert: nExpert,
		H: make([]float32, n*e), Q: make([]float32, n*qd), K: make([]float32, n*kvd), V: make([]float32, n*kvd),
		Att: make([]float32, n*qd), O: make([]float32, n*e), RL: make([]float32, n*nExpert),
		Out: make([]float32, n*e), Scores: make([]float32, nHead*end),
		hs: make([][]float32, n), ls: make([][]float32, n), os: make([][]float32, n)}
}

// RunMoE hands layer's normed inputs H and router logits RL to moe, which
// writes Out.
func (a *Acts) RunMoE(ctx context.Context, moe MoE, layer int) error {
	for t := 0; t < a.N; t++ {
		a.hs[t] = a.H[t*a.E : (t+1)*a.E]
		a.ls[t] = a.RL[t*a.NExpert : (t+1)*a.NExpert]
		a.os[t] = a.Out[t*a.E : (t+1)*a.E]
	}
	return moe.RunMoE(ctx, layer, a.hs, a.ls, a.os)
}
