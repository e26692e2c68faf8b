package model

// glu.go: the dense gated feed-forward (gemma4's MLP beside its experts,
// the shared experts of qwen2moe and others) and the shared-expert hook of
// RoutedFFN.

import (
	"fmt"
)

// GLU is a dense gated feed-forward: Down · Act(Gate h, Up h).
type GLU struct {
	Gate, Up, Down Weight
	Act            Activation
}

// LoadGLU loads the dense projections prefix{gate,up,down}suffix
// (e.g. "blk.3.ffn_", "_shexp.weight") of width nFF (< 0: the file's) over
// nEmbd inputs.
func LoadGLU(ld *Loader, prefix, suffix string, nEmbd, nFF int, act Activation) GLU {
	g := GLU{Act: act, Gate: ld.Matrix(prefix+"gate"+suffix, nEmbd, nFF)}
	g.Up = ld.Matrix(prefix+"up"+suffix, nEmbd, g.Gate.Rows)
	g.Down = ld.Matrix(prefix+"down"+suffix, g.Gate.Rows, nEmbd)
	return g
}

// Run returns the GLU of the pass's N rows h (n_embd wide) in a buffer of p.
func (g *GLU) Run(p *Pass, h []float32) ([]float32, error) {
	F := g.Gate.Rows
	gate, up, out := p.Buf(p.N*F), p.Buf(p.N*F), p.Buf(p.N*p.E)
	err := gatedFFN(p.Pool, proj{g.Gate.Type, g.Gate.Data, g.Gate.Name}, proj{g.Up.Type, g.Up.Data, g.Up.Name},
		proj{g.Down.Type, g.Down.Data, g.Down.Name}, F, p.E, p.N, h, gate, up, out, g.act)
	return out, err
}

// act applies the GLU's activation in place into gate.
func (g *GLU) act(gate, up []float32) { g.Act(gate, gate, up) }

// SharedExpert is a dense expert every token goes through beside the
// routed ones, its output added to theirs: GLU(h), scaled per token by
// σ(Scale·h) when the layer has a scale row (ffn_gate_inp_shexp).
type SharedExpert struct {
	GLU
	Scale Weight // one row of n_embd (no Data: unscaled)
	// Sigma computes σ of the scale: nil is qwen2moe's graph, silu(x)/x;
	// qwen35moe's is ggml_sigmoid (Sigmoid).
	Sigma func(float32) float32
}

// LoadSharedExpert loads layer's blk.N.ffn_{gate,up,down}_shexp.weight
// (width nFF; < 0: the file's) and, when present, its
// ffn_gate_inp_shexp.weight scale row.
func LoadSharedExpert(ld *Loader, layer, nEmbd, nFF int, act Activation) *SharedExpert {
	p := fmt.Sprintf("blk.%d.ffn_", layer)
	s := &SharedExpert{GLU: LoadGLU(ld, p, "_shexp.weight", nEmbd, nFF, act)}
	s.Scale, _ = ld.OptionalMatrix(p+"gate_inp_shexp.weight", nEmbd, 1)
	return s
}

// Side implements SideWork: the shared expert's output for the N rows h,
// in a buffer of p.
func (s *SharedExpert) Side(p *Pass, h []float32) ([]float32, error) {
	y, err := s.Run(p, h)
	if err != nil {
		return nil, err
	}
	if s.Scale.Data != nil {
		g := p.Buf(p.N)
		if err := p.MatMul(&s.Scale, h, g); err != nil {
			return nil, err
		}
		E := p.E
		for t, v := range g {
			sig := SiLU(v) / v // llama.cpp's sigmoid here: silu(x)/x
			if s.Sigma != nil {
				sig = s.Sigma(v)
			}
			row := y[t*E : (t+1)*E]
			for i := range row {
				row[i] *= sig
			}
		}
	}
	return y, nil
}
