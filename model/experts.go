package model

// experts.go: the routed-expert math every architecture shares, written
// once: an expert is gate and up projections (separate, or fused into one
// gate_up matrix whose first half of rows is the gate), optional per-expert
// biases, a gated activation, the down projection, its optional bias and an
// optional per-expert output scale. Architectures describe their experts
// with an Experts value (the activation and, per layer, the types, biases
// and scales) and embed it: ComputeExpert and the batched ComputeExperts
// are the same code for every family, and give the same bits.

import (
	"fmt"

	"github.com/pipe-engine/pipe/kernels"
	"github.com/pipe-engine/pipe/quant"
)

// Activation writes act(gate, up) element-wise into out (out may alias
// gate): SwiGLU, GEGLU, gpt-oss's SwiGLU-OAI.
type Activation func(out, gate, up []float32)

// ExpertLayer is one layer's routed-expert projections.
type ExpertLayer struct {
	Fused      bool       // gate and up in one gate_up matrix (2·n_ff rows: gate, then up)
	GateUpT    quant.Type // fused gate_up
	GateT, UpT quant.Type // separate gate and up
	DownT      quant.Type
	GateB, UpB []float32 // per-expert biases, n_expert × n_ff (nil: none)
	DownB      []float32 // per-expert down bias, n_expert × n_embd (nil: none)
	DownScale  []float32 // per-expert output scale, n_expert (nil: 1)
	HasExperts bool      // false for a layer without routed experts
}

// Experts is an architecture's routed-expert math: Act(gate x + bg, up x + bu)
// through down, plus bd, times the expert's scale. It implements
// ExpertFFN and BatchExpertFFN for the architecture that embeds it. Safe for
// concurrent use (it only reads itself and writes the caller's buffers).
type Experts struct {
	Arch       string // names the architecture in errors
	Pool       *kernels.Pool
	NEmbd, NFF int // n_ff: one expert's feed-forward width
	NExpert    int
	Act        Activation
	ByLayer    []ExpertLayer // per layer
}

// AddLayer appends layer l's expert description, reading the types
// of blk.l.ffn_{gate,up,gate_up,down}_exps through ld (fused when the file
// has ffn_gate_up_exps).
func (x *Experts) AddLayer(ld *Loader, l int) *ExpertLayer {
	p := fmt.Sprintf("blk.%d.", l)
	E, F, N := x.NEmbd, x.NFF, x.NExpert
	L := ExpertLayer{HasExperts: true}
	if ld.Has(p + "ffn_gate_up_exps.weight") {
		L.Fused = true
		L.GateUpT = ld.ExpertType(p+"ffn_gate_up_exps.weight", E, 2*F, N)
	} else {
		L.GateT = ld.ExpertType(p+"ffn_gate_exps.weight", E, F, N)
		L.UpT = ld.ExpertType(p+"ffn_up_exps.weight", E, F, N)
	}
	L.DownT = ld.ExpertType(p+"ffn_down_exps.weight", F, E, N)
	x.ByLayer = append(x.ByLayer, L)
	return &x.ByLayer[len(x.ByLayer)-1]
}

// SkipLayer appends a layer without routed experts.
func (x *Experts) SkipLayer() { x.ByLayer = append(x.ByLayer, ExpertLayer{}) }

// layer checks l, e and the number of parts and returns the layer.
func (x *Experts) layer(l, e int, parts [][]byte) (*ExpertLayer, error) {
	if l < 0 || l >= len(x.ByLayer) || !x.ByLayer[l].HasExperts || e < 0 || e >= x.NExpert {
		return nil, fmt.Errorf("%w: %s: layer %d expert %d out of range", ErrBadModel, x.Arch, l, e)
	}
	L := &x.ByLayer[l]
	if want := L.parts(); len(parts) != want {
		names := "gate, up, down"
		if L.Fused {
			names = "gate_up, down"
		}
		return nil, fmt.Errorf("%s: layer %d expert %d: %d parts, want %s", x.Arch, l, e, len(parts), names)
	}
	return L, nil
}

func (L *ExpertLayer) parts() int {
	if L.Fused {
		return 2
	}
	return 3
}

// ComputeExpert implements ExpertFFN.
func (x *Experts) ComputeExpert(l, e int, parts [][]byte, n int, in, out []float32, s *Scratch) error {
	L, err := x.layer(l, e, parts)
	if err != nil {
		return err
	}
	F, E := x.NFF, x.NEmbd
	a, b := s.Grow(n * 2 * F)
	gate, up := proj{L.GateT, parts[0], "gate"}, proj{L.UpT, nil, "up"}
	if L.Fused {
		gate = proj{L.GateUpT, parts[0], "gate_up"}
	} else {
		up.W = parts[1]
	}
	down := proj{L.DownT, parts[len(parts)-1], "down"}
	act := func(g, u []float32) { x.activate(L, e, g, u) }
	if err := gatedFFN(s.On(x.Pool), gate, up, down, F, E, n, in, a[:n*F], b[:n*F], out, act); err != nil {
		return fmt.Errorf("layer %d expert %d %w", l, e, err)
	}
	x.finish(L, e, out[:n*E])
	return nil
}

// proj is one projection of a gated FFN: its type, bytes and name in errors.
type proj struct {
	T    quant.Type
	W    []byte
	Name string
}

// gatedFFN is the gate/up/activation/down of every feed-forward of the
// engine — routed experts (Experts.ComputeExpert), shared experts and dense
// MLPs (GLU.Run) — over n rows of x (n×E): gate and up (F rows of E
// columns) into g and u, act(g, u) writing into g, then down (E rows of F)
// from g into out. An up without bytes means a fused gate_up (2F rows,
// gate then up): it is computed into g's backing array (cap(g) ≥ 2nF) and
// each row split into g and u.
func gatedFFN(mm MatMuler, gate, up, down proj, F, E, n int, x, g, u, out []float32, act func(g, u []float32)) error {
	if up.W == nil {
		gu := g[:n*2*F]
		if err := mm.MatMul(gate.T, gate.W, 2*F, E, x[:n*E], n, gu); err != nil {
			return fmt.Errorf("%s: %w", gate.Name, err)
		}
		// token t's gate moves from gu[2tF:] to g[tF:], never ahead of a
		// row still to be read
		for t := 0; t < n; t++ {
			copy(u[t*F:(t+1)*F], gu[t*2*F+F:(t+1)*2*F])
			copy(g[t*F:(t+1)*F], gu[t*2*F:t*2*F+F])
		}
	} else {
		if err := mm.MatMul(gate.T, gate.W, F, E, x[:n*E], n, g); err != nil {
			return fmt.Errorf("%s: %w", gate.Name, err)
		}
		if err := mm.MatMul(up.T, up.W, F, E, x[:n*E], n, u); err != nil {
			return fmt.Errorf("%s: %w", up.Name, err)
		}
	}
	act(g, u)
	if err := mm.MatMul(down.T, down.W, E, F, g, n, out[:n*E]); err != nil {
		return fmt.Errorf("%s: %w", down.Name, err)
	}
	return nil
}

// activate adds expert e's gate and up biases to rows of n_ff and writes
// the activation into gate.
func (x *Experts) activate(L *ExpertLayer, e int, gate, up []float32) {
	F := x.NFF
	if L.GateB != nil {
		AddBias(gate, L.GateB[e*F:(e+1)*F])
	}
	if L.UpB != nil {
		AddBias(up, L.UpB[e*F:(e+1)*F])
	}
	x.Act(gate, gate, up)
}

// finish adds expert e's down bias and applies its output scale to y.
func (x *Experts) finish(L *ExpertLayer, e int, y []float32) {
	E := x.NEmbd
	if L.DownB != nil {
		AddBias(y, L.DownB[e*E:(e+1)*E])
	}
	if L.DownScale != nil {
		sc := L.DownScale[e]
		for i := range y {
			y[i] *= sc
		}
	}
}

// ComputeExperts implements BatchExpertFFN: the gate and up (or gate_up)
// projections of every single-token expert in one pool dispatch (their
// shared input quantized once), then all their down projections in
// another; experts of several tokens go through ComputeExpert (the
// multi-token kernels).
func (x *Experts) ComputeExperts(l int, work []ExpertWork, s *Scratch) error {
	single := 0
	for _, w := range work {
		if _, err := x.layer(l, w.Expert, w.Parts); err != nil {
			return err
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
	L := &x.ByLayer[l]
	F, E := x.NFF, x.NEmbd
	a, _ := s.Grow(single * 2 * F)
	s.ResetInputs()
	ps := s.Products[:0]
	i := 0
	for _, w := range work {
		if w.N != 1 {
			continue
		}
		var err error
		if ps, err = x.gateUpProducts(L, w, s.Input(w.X[:E]), a[i*2*F:(i+1)*2*F], ps); err != nil {
			return fmt.Errorf("layer %d expert %d: %w", l, w.Expert, err)
		}
		i++
	}
	if err := x.Pool.MatVecs(ps); err != nil {
		return fmt.Errorf("layer %d experts gate/up: %w", l, err)
	}
	d, err := x.activateAll(L, work, single, a, s)
	if err != nil {
		return fmt.Errorf("layer %d experts: %w", l, err)
	}
	ps = ps[:0]
	i = 0
	for _, w := range work {
		if w.N != 1 {
			continue
		}
		if err := d.errs[i]; err != nil {
			return fmt.Errorf("layer %d expert %d down: %w", l, w.Expert, err)
		}
		ps = append(ps, kernels.Product{Type: L.DownT, W: w.Parts[len(w.Parts)-1], Rows: E, Cols: F, A: d.acts[i], Y: w.Out[:E]})
		i++
	}
	err = x.Pool.MatVecs(ps)
	clear(ps)
	s.Products = ps[:0]
	s.ResetInputs()
	if err != nil {
		return fmt.Errorf("layer %d experts down: %w", l, err)
	}
	for _, w := range work {
		if w.N == 1 {
			x.finish(L, w.Expert, w.Out[:E])
		}
	}
	return nil
}

// activateAll runs, on the pool's threads, the step between the single
// experts' gate/up and down products: each expert's activation (biases and
// activation function, in place in its gate rows of gu, 2·n_ff floats per
// expert in work's order) and its down projection's input quantized. Run on
// the calling thread alone this took long enough between the two pool
// dispatches (olmoe: 8 experts a layer; docs/measurements.md, issue 39
// session 7) for the other threads to stop spinning and park, and wake
// again for the down products. Each
// expert is computed whole by one thread, as before, so the results do not
// depend on the thread count. The returned job holds each expert's
// quantized input and error, valid until the next call with s.
func (x *Experts) activateAll(L *ExpertLayer, work []ExpertWork, single int, gu []float32, s *Scratch) (*activateJob, error) {
	d := s.activate
	if d == nil {
		d = new(activateJob)
		d.fn = d.run
		s.activate = d
	}
	d.experts, d.ins = d.experts[:0], d.ins[:0]
	F := x.NFF
	for _, w := range work {
		if w.N == 1 {
			i := len(d.experts)
			d.experts = append(d.experts, w.Expert)
			d.ins = append(d.ins, s.Input(gu[i*2*F:i*2*F+F]))
		}
	}
	if cap(d.acts) < single {
		d.acts, d.errs = make([]*kernels.Activation, single), make([]error, single)
	}
	d.acts, d.errs = d.acts[:single], d.errs[:single]
	d.x, d.L, d.gu = x, L, gu
	err := x.Pool.Parallel(single, d.fn)
	d.x, d.L, d.gu = nil, nil, nil
	return d, err
}

// activateJob is activateAll's arguments and results, kept in a Scratch
// with the bound method the pool runs (made once, so a decode step
// allocates nothing).
type activateJob struct {
	x       *Experts
	L       *ExpertLayer
	gu      []float32
	experts []int
	ins     []*Inputs
	acts    []*kernels.Activation
	errs    []error
	fn      func(i int)
}

// run activates the i-th single expert and quantizes its down input.
func (d *activateJob) run(i int) {
	F := d.x.NFF
	g := d.gu[i*2*F : (i+1)*2*F]
	d.x.activate(d.L, d.experts[i], g[:F], g[F:])
	d.acts[i], d.errs[i] = d.ins[i].For(d.L.DownT)
}

// gateUpProducts appends the single-token products of w's gate and up (or
// gate_up) projections writing gate then up into gu (2·n_ff floats).
func (x *Experts) gateUpProducts(L *ExpertLayer, w ExpertWork, in *Inputs, gu []float32, ps []kernels.Product) ([]kernels.Product, error) {
	F, E := x.NFF, x.NEmbd
	if L.Fused {
		a, err := in.For(L.GateUpT)
		if err != nil {
			return ps, fmt.Errorf("gate_up: %w", err)
		}
		return append(ps, kernels.Product{Type: L.GateUpT, W: w.Parts[0], Rows: 2 * F, Cols: E, A: a, Y: gu}), nil
	}
	ag, err := in.For(L.GateT)
	if err != nil {
		return ps, fmt.Errorf("gate: %w", err)
	}
	au, err := in.For(L.UpT)
	if err != nil {
		return ps, fmt.Errorf("up: %w", err)
	}
	return append(ps,
		kernels.Product{Type: L.GateT, W: w.Parts[0], Rows: F, Cols: E, A: ag, Y: gu[:F]},
		kernels.Product{Type: L.UpT, W: w.Parts[1], Rows: F, Cols: E, A: au, Y: gu[F:]}), nil
}
