package model

// side.go: work a layer runs while its MoE waits for expert bytes.

import "context"

// SideWork is a layer's work that does not depend on its routed experts'
// output — a shared expert, gemma4's dense MLP beside the experts. Handed
// to Pass.RunMoEWith, it runs while a streaming MoE waits for an expert's
// bytes (SideMoE) instead of after the last expert, where the reads would
// wait for it: under a cache cap a layer's misses are read only once its
// router has run, and the disk idles through the compute that follows the
// last one. Side returns its output for the N rows in, in a buffer of p.
type SideWork interface {
	Side(p *Pass, in []float32) ([]float32, error)
}

// SideMoE is a MoE that can run side work while it waits: RunMoESide is
// RunMoERouted that calls side at most once, on the calling goroutine,
// when the layer would otherwise wait for an expert's bytes. It may not
// call it at all (every expert was ready); the caller then runs it after.
type SideMoE interface {
	RunMoESide(ctx context.Context, layer int, x, logits, routerIn, out [][]float32, side func() error) error
}

// sideState is the side work of the MoE call in progress (RunMoEWith).
type sideState struct {
	w   SideWork
	in  []float32
	out []float32
	err error
	ran bool
}

// runSide runs the pending side work once and returns its error; bound
// once per Pass (sideFn), so handing it to the MoE allocates nothing.
func (p *Pass) runSide() error {
	s := &p.side
	if !s.ran {
		s.ran = true
		s.out, s.err = s.w.Side(p, s.in)
	}
	return s.err
}

// RunMoEWith is RunMoE that also runs w's side work on in and returns its
// output: while the MoE waits for expert bytes when it can (SideMoE), else
// after the experts. Both outputs are the same either way; only when the
// side work's compute happens changes.
func (p *Pass) RunMoEWith(ctx context.Context, layer int, x, logits, routerIn, out []float32, w SideWork, in []float32) ([]float32, error) {
	p.side = sideState{w: w, in: in}
	defer func() { p.side = sideState{} }()
	var err error
	if sm, ok := p.moe.(SideMoE); ok {
		p.moeRows(x, logits, routerIn, out)
		err = sm.RunMoESide(ctx, layer, p.xs, p.ls, p.rs, p.os, p.sideFn)
	} else {
		err = p.RunMoE(ctx, layer, x, logits, routerIn, out)
	}
	if err == nil {
		err = p.runSide()
	}
	return p.side.out, err
}
