package model

import (
	"fmt"
	"math"

	"github.com/pipe-engine/pipe/kernels"
)

// The pieces below are shared by every architecture's Forward: the context
// check, the token embedding lookup and the output head. Architectures call
// them so that these steps are written, and tested, once.

// Reserve checks that n more positions fit in st's context, gives a
// growing state their rows, and returns the first new position.
func Reserve(st *State, n int) (int, error) {
	if st.Pos+n > st.NCtx {
		return 0, fmt.Errorf("%w: %d positions used + %d new > context %d (raise -c)", ErrContextFull, st.Pos, n, st.NCtx)
	}
	st.grow(st.Pos + n)
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
// same size). With embd (State.Embeddings) the rows are the output norm's,
// n_embd wide, and the LM head is not applied.
func (p *Pass) head(d *Decoder, x []float32, all, embd bool) ([][]float32, error) {
	out := &d.Output
	E, R := out.Cols, out.Rows
	if embd {
		R = E
	}
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
		lg := p.logits[(t-first)*R : (t-first+1)*R]
		if embd {
			RMSNorm(lg, x[t*E:(t+1)*E], d.Eps, d.OutNorm)
			p.rows = append(p.rows, lg)
			continue
		}
		RMSNorm(h, x[t*E:(t+1)*E], d.Eps, d.OutNorm)
		if err := MatMul(d.Pool, out, h, 1, lg); err != nil {
			return nil, err
		}
		p.rows = append(p.rows, lg)
	}
	return p.rows, nil
}

// NeoXGeom is the attention geometry of the families with one head width
// for every layer, NeoX RoPE over the whole head at rope.freq_base (linear
// scaling by rope.scaling.factor when the file has one) and KQ scale
// 1/√head_dim: qwen3moe, qwen2moe, olmoe. A rope.scaling.type other than
// none or linear is refused when linearOnly is set.
func NeoXGeom(hp HParams, arch string, linearOnly bool) (Geom, error) {
	hd := hp.HeadDim
	if hd == 0 && hp.NHead > 0 {
		hd = hp.NEmbd / hp.NHead
	}
	if hp.NHead <= 0 || hp.NHeadKV <= 0 || hp.NHead%hp.NHeadKV != 0 || hd <= 0 || hd%2 != 0 {
		return Geom{}, fmt.Errorf("%w: %s: %d heads, %d KV heads of %d", ErrBadModel, arch, hp.NHead, hp.NHeadKV, hd)
	}
	if hp.NRot != 0 && hp.NRot != hd {
		return Geom{}, fmt.Errorf("%w: %s: rope.dimension_count %d, head width %d (llama.cpp rotates whole heads)", ErrBadModel, arch, hp.NRot, hd)
	}
	switch hp.RopeScalingType {
	case "", "none", "linear":
	default:
		if linearOnly {
			return Geom{}, fmt.Errorf("%w: %s: rope scaling %q is not supported", ErrUnsupportedArch, arch, hp.RopeScalingType)
		}
	}
	base := hp.RopeFreqBase
	if base == 0 {
		base = 10000
	}
	fs := float32(1)
	if hp.RopeScaleLinear > 0 {
		fs = 1 / hp.RopeScaleLinear
	}
	return Geom{NHead: hp.NHead, NHeadKV: hp.NHeadKV, HeadDim: hd,
		Rope: Rope{NDims: hd, Base: base, FreqScale: fs, AttnScale: 1}, Scale: float32(1 / math.Sqrt(float64(hd)))}, nil
}

// RoutedFFN loads layer's pre-norm routed FFN: ffn_norm and the
// ffn_gate_inp router of nExpert rows.
func (l *Loader) RoutedFFN(layer, nEmbd, nExpert int) *RoutedFFN {
	p := fmt.Sprintf("blk.%d.", layer)
	return &RoutedFFN{Norm: l.Vector(p+"ffn_norm.weight", nEmbd), Gate: l.Matrix(p+"ffn_gate_inp.weight", nEmbd, nExpert)}
}
