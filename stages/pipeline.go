package stages

import (
	"context"
	"fmt"
	"time"

	"github.com/pipe-engine/pipe/ffn"
	"github.com/pipe-engine/pipe/internal/clock"
	"github.com/pipe-engine/pipe/metrics"
	"github.com/pipe-engine/pipe/model"
	"github.com/pipe-engine/pipe/router"
)

// pipeline is one MoE layer's flow, run on the decode goroutine for every
// layer of a forward pass: the layer's router picks each token's experts,
// the FFN job is planned, the expert source hands the FFN stage the
// experts' bytes (speculating for the next layer as it goes), the FFN stage
// computes them and sums each token's outputs in rank order. It implements
// model.MoE and model.RouterInputMoE: the engine hands it to the model's
// Forward. Its buffers are reused layer after layer.
type pipeline struct {
	model   model.Model
	ffn     *ffn.Stage
	src     expertSource
	meter   *meter
	onRoute func(step, layer int, ids [][]int, weights [][]float32)
	lossy   *lossyStage // nil with every lossy mode off

	// batch is set during Engine.ForwardBatch; decodeRows[t] then tells
	// whether row t of a layer is a decode step's (a one-token sequence's).
	batch      bool
	decodeRows []bool

	ids   [][]int
	w     [][]float32
	probs []float32
	job   ffn.Job
	st    ffn.Stats // the layer's
}

// RunMoE implements model.MoE, with x as the router input for speculation.
func (p *pipeline) RunMoE(ctx context.Context, layer int, x, logits [][]float32, out [][]float32) error {
	return p.RunMoERouted(ctx, layer, x, logits, x, out)
}

// RunMoERouted implements model.RouterInputMoE: speculation applies the
// next layer's router to routerIn.
func (p *pipeline) RunMoERouted(ctx context.Context, layer int, x, logits, routerIn, out [][]float32) error {
	return p.RunMoESide(ctx, layer, x, logits, routerIn, out, nil)
}

// RunMoESide implements model.SideMoE: the FFN stage runs side (if not nil)
// the first time it would wait for an expert's bytes (ffn.Job.Side).
func (p *pipeline) RunMoESide(ctx context.Context, layer int, x, logits, routerIn, out [][]float32, side func() error) error {
	clk := p.meter.clock
	t0 := clk.Now()
	job, err := p.route(layer, x, logits, out)
	if err != nil {
		return err
	}
	d := clk.Since(t0)
	if p.onRoute != nil {
		p.onRoute(p.meter.step, layer, job.IDs, job.W) // the router's choice, before any lossy mode
	}
	t0 = clk.Now()
	if p.lossy != nil {
		for t := range x {
			if !p.decodeRow(t, len(x)) {
				continue
			}
			if err := p.lossy.apply(p.model.Router(layer), layer, logits[t], job.IDs[t], job.W[t], p.probs); err != nil {
				return fmt.Errorf("layer %d: %w", layer, err)
			}
		}
	}
	job.Plan()
	job.Side = side
	defer func() { job.Side = nil }()
	p.ffn.Begin(job)
	st := &p.st // not a local: handed to an interface method, it would escape
	*st = ffn.Stats{Compute: d + clk.Since(t0)}
	if err := p.src.run(ctx, job, routerIn, p.decodeBatch(len(routerIn)), st); err != nil {
		return err
	}
	p.ffn.Finish(job, st)
	p.meter.add(*st)
	if p.meter.layers.on {
		p.meter.layers.row(p, layer, len(x))
	}
	return nil
}

// decodeRow reports whether row t of a layer's n rows is a decode step's
// token (the lossy modes apply to those alone): in a batch, a row of a
// one-token sequence; else the row of a one-token pass.
func (p *pipeline) decodeRow(t, n int) bool {
	if p.batch {
		return t < len(p.decodeRows) && p.decodeRows[t]
	}
	return n == 1
}

// decodeBatch reports whether every one of a layer's n rows is a decode
// step's token.
func (p *pipeline) decodeBatch(n int) bool {
	for t := range n {
		if !p.decodeRow(t, n) {
			return false
		}
	}
	return true
}

// route routes every token of the layer into the job (planned by the
// caller, after any lossy mode).
func (p *pipeline) route(layer int, x, logits, out [][]float32) (*ffn.Job, error) {
	spec := p.model.Router(layer)
	n := len(x)
	if cap(p.ids) < n {
		p.ids = make([][]int, n)
		p.w = make([][]float32, n)
	}
	ids, ws := p.ids[:n], p.w[:n]
	if len(p.probs) < router.ScratchLen(spec) {
		p.probs = make([]float32, router.ScratchLen(spec))
	}
	for t := 0; t < n; t++ {
		if cap(ids[t]) < spec.K {
			ids[t] = make([]int, spec.K)
			ws[t] = make([]float32, spec.K)
		}
		ids[t], ws[t] = ids[t][:spec.K], ws[t][:spec.K]
		if err := router.Route(spec, logits[t], ids[t], ws[t], p.probs); err != nil {
			return nil, fmt.Errorf("layer %d: %w", layer, err)
		}
	}
	job := &p.job
	job.Layer, job.K, job.X, job.IDs, job.W, job.Out = layer, spec.K, x, ids, ws, out
	return job, nil
}

// meter accumulates where the decode goroutine's time went, read from
// clock (nil: the wall clock; Inputs.clock).
type meter struct {
	clock   clock.Clock
	step    int // decode step of the current Forward (Engine.setStep)
	acc     stepAcc
	timings model.Timings // filled by the model
	experts time.Duration // FFN stage compute, cumulative
	stall   time.Duration // FFN stage waits, cumulative
	load    time.Duration
	prompt  metrics.Lookups // the demand lookups of prompt passes (Session.Prefill)
	layers  layerLog        // a prompt pass's per-layer rows (on during Session.Prefill)
}

type stepAcc struct {
	stall, compute time.Duration
	model          time.Duration // model.Timings total when the step began
}

// add counts a layer's FFN stage times.
func (m *meter) add(st ffn.Stats) {
	m.acc.stall += st.Stall
	m.acc.compute += st.Compute
	m.experts += st.Compute
	m.stall += st.Stall
}

// take returns and resets the totals since the last call: stall is the time
// the FFN stage waited for expert bytes; compute is the measured busy time
// of the compute sections — embedding, attention, router (also the next
// layer's, applied early for prefetch), expert FFNs, the weighted sum and
// the LM head — never derived from wall time.
func (m *meter) take() (stall, compute time.Duration) {
	total := m.modelTime()
	s, c := m.acc.stall, m.acc.compute+total-m.acc.model
	m.acc = stepAcc{model: total}
	return s, c
}

// modelTime is the model's measured compute sections so far: embedding,
// attention, router, LM head (with the FFN stage's, the compute of take).
func (m *meter) modelTime() time.Duration {
	return m.timings.Attention + m.timings.Router + m.timings.LMHead + m.timings.Embed
}
