package model

import (
	"fmt"
	"strings"

	"github.com/pipe-engine/pipe/kernels"
	"github.com/pipe-engine/pipe/quant"
)

// Inputs holds one input vector quantized for the weight types that read it,
// once per activation format (kernels.Activation.Serves): the q, k and v
// projections of a decode step, or the gate and up projections of all the
// experts a token is routed to, quantize their shared input once. An Inputs
// is owned by one goroutine; Reset starts a new vector and keeps the buffers.
type Inputs struct {
	x    []float32
	acts []*kernels.Activation
	used int
}

// Reset makes x the input (borrowed until the next Reset).
func (in *Inputs) Reset(x []float32) {
	in.x, in.used = x, 0
}

// For returns the input quantized for rows of type t.
func (in *Inputs) For(t quant.Type) (*kernels.Activation, error) {
	for _, a := range in.acts[:in.used] {
		if a.Serves(t) {
			return a, nil
		}
	}
	if in.used == len(in.acts) {
		in.acts = append(in.acts, new(kernels.Activation))
	}
	a := in.acts[in.used]
	if err := a.Quantize(t, in.x); err != nil {
		return nil, err
	}
	in.used++
	return a, nil
}

// MatVecs multiplies the input of in by every weight of ws into the matching
// ys in one pool dispatch (kernels.Pool.MatVecs); each y equals MatMul's
// with n = 1 bit for bit.
func MatVecs(p *kernels.Pool, in *Inputs, ws []*Weight, ys [][]float32) error {
	var arr [4]kernels.Product
	ps := arr[:0]
	for i, w := range ws {
		a, err := in.For(w.Type)
		if err != nil {
			return fmt.Errorf("%s: %w", w.Name, err)
		}
		ps = append(ps, kernels.Product{Type: w.Type, W: w.Data, Rows: w.Rows, Cols: w.Cols, A: a, Y: ys[i]})
	}
	if err := p.MatVecs(ps); err != nil {
		names := make([]string, len(ws))
		for i, w := range ws {
			names[i] = w.Name
		}
		return fmt.Errorf("%s: %w", strings.Join(names, ", "), err)
	}
	return nil
}
