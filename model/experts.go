package model

// experts.go: the routed-expert math of the architectures whose experts are
// SwiGLU feed-forwards with separate gate, up and down projections
// (down(silu(gate x) · up x)), written once for all of them: one expert at a
// time (ComputeExpert) and several experts of a layer together
// (ComputeExperts).

import (
	"fmt"

	"github.com/pipe-engine/pipe/kernels"
	"github.com/pipe-engine/pipe/quant"
)

// SwiGLUExperts computes SwiGLU experts whose parts are gate, up and down
// (Desc.Experts order). Layers without experts have zero types.
type SwiGLUExperts struct {
	Arch              string // names the architecture in errors
	Pool              *kernels.Pool
	NEmbd, NFF        int
	GateT, UpT, DownT []quant.Type // per layer
}

// AddLayer records layer's expert types from the loader (the layer's
// tensors must be the next ones: layers are added in order).
func (x *SwiGLUExperts) AddLayer(ld *Loader, layer, nExpert int) {
	p := fmt.Sprintf("blk.%d.", layer)
	x.GateT = append(x.GateT, ld.ExpertType(p+"ffn_gate_exps.weight", x.NEmbd, x.NFF, nExpert))
	x.UpT = append(x.UpT, ld.ExpertType(p+"ffn_up_exps.weight", x.NEmbd, x.NFF, nExpert))
	x.DownT = append(x.DownT, ld.ExpertType(p+"ffn_down_exps.weight", x.NFF, x.NEmbd, nExpert))
}

// SkipLayer records a layer without experts.
func (x *SwiGLUExperts) SkipLayer() {
	x.GateT, x.UpT, x.DownT = append(x.GateT, 0), append(x.UpT, 0), append(x.DownT, 0)
}

// ComputeExpert implements ExpertFFN: down(silu(gate x) · up x).
func (x *SwiGLUExperts) ComputeExpert(l, e int, parts [][]byte, n int, in, out []float32, s *Scratch) error {
	if len(parts) != 3 {
		return fmt.Errorf("%s: layer %d expert %d: %d parts, want gate, up, down", x.Arch, l, e, len(parts))
	}
	if l < 0 || l >= len(x.GateT) {
		return fmt.Errorf("%w: %s: layer %d out of range", ErrBadModel, x.Arch, l)
	}
	a, b := s.Grow(n * x.NFF)
	mm := s.On(x.Pool)
	if err := mm.MatMul(x.GateT[l], parts[0], x.NFF, x.NEmbd, in[:n*x.NEmbd], n, a); err != nil {
		return fmt.Errorf("layer %d expert %d gate: %w", l, e, err)
	}
	if err := mm.MatMul(x.UpT[l], parts[1], x.NFF, x.NEmbd, in[:n*x.NEmbd], n, b); err != nil {
		return fmt.Errorf("layer %d expert %d up: %w", l, e, err)
	}
	SwiGLU(a, a, b)
	if err := mm.MatMul(x.DownT[l], parts[2], x.NEmbd, x.NFF, a, n, out[:n*x.NEmbd]); err != nil {
		return fmt.Errorf("layer %d expert %d down: %w", l, e, err)
	}
	return nil
}

// ComputeExperts implements BatchExpertFFN: the gate and up projections of
// every single-token expert in one pool dispatch (their shared input
// quantized once), then all their down projections in another; experts of
// several tokens go through ComputeExpert (the multi-token kernels).
func (x *SwiGLUExperts) ComputeExperts(l int, work []ExpertWork, s *Scratch) error {
	if l < 0 || l >= len(x.GateT) {
		return fmt.Errorf("%w: %s: layer %d out of range", ErrBadModel, x.Arch, l)
	}
	gateT, upT, downT := x.GateT[l], x.UpT[l], x.DownT[l]
	F, E := x.NFF, x.NEmbd
	single := 0
	for _, w := range work {
		if len(w.Parts) != 3 {
			return fmt.Errorf("%s: layer %d expert %d: %d parts, want gate, up, down", x.Arch, l, w.Expert, len(w.Parts))
		}
		if w.N == 1 {
			single++
			continue
		}
		if err := x.ComputeExpert(l, w.Expert, w.Parts, w.N, w.X, w.Out, s); err != nil {
			return err
		}
	}
	if single == 0 {
		return nil
	}
	gate, up := s.Grow(single * F)
	s.ResetInputs()
	ps := s.Products[:0]
	i := 0
	for _, w := range work {
		if w.N != 1 {
			continue
		}
		in := s.Input(w.X[:E])
		ag, err := in.For(gateT)
		if err != nil {
			return fmt.Errorf("layer %d expert %d gate: %w", l, w.Expert, err)
		}
		au, err := in.For(upT)
		if err != nil {
			return fmt.Errorf("layer %d expert %d up: %w", l, w.Expert, err)
		}
		ps = append(ps,
			kernels.Product{Type: gateT, W: w.Parts[0], Rows: F, Cols: E, A: ag, Y: gate[i*F : (i+1)*F]},
			kernels.Product{Type: upT, W: w.Parts[1], Rows: F, Cols: E, A: au, Y: up[i*F : (i+1)*F]})
		i++
	}
	if err := x.Pool.MatVecs(ps); err != nil {
		return fmt.Errorf("layer %d experts gate/up: %w", l, err)
	}
	SwiGLU(gate, gate, up)
	ps = ps[:0]
	i = 0
	for _, w := range work {
		if w.N != 1 {
			continue
		}
		a, err := s.Input(gate[i*F : (i+1)*F]).For(downT)
		if err != nil {
			return fmt.Errorf("layer %d expert %d down: %w", l, w.Expert, err)
		}
		ps = append(ps, kernels.Product{Type: downT, W: w.Parts[2], Rows: E, Cols: F, A: a, Y: w.Out[:E]})
		i++
	}
	err := x.Pool.MatVecs(ps)
	clear(ps)
	s.Products = ps[:0]
	s.ResetInputs()
	if err != nil {
		return fmt.Errorf("layer %d experts down: %w", l, err)
	}
	return nil
}
