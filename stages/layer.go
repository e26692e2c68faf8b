package stages

import (
	"cmp"
	"context"
	"fmt"
	"slices"
	"time"

	"github.com/pipe-engine/pipe/cache"
	"github.com/pipe-engine/pipe/expert"
	"github.com/pipe-engine/pipe/ffn"
	"github.com/pipe-engine/pipe/internal/buf"
	"github.com/pipe-engine/pipe/model"
	"github.com/pipe-engine/pipe/prefetch"
	"github.com/pipe-engine/pipe/reader"
	"github.com/pipe-engine/pipe/router"
)

// layerScratch is the decode goroutine's reusable per-layer state: the
// routing buffers, the FFN job and the next-layer guesses.
type layerScratch struct {
	routeIDs   [][]int
	routeW     [][]float32
	probs      []float32
	job        ffn.Job
	peekLogits []float32
	peekIn     [][]float32 // the current layer's router inputs (RunMoERouted)
	peekX      []float32   // a prompt pass's router inputs, one block (speculatePrompt)
	votes      []int32     // per expert, the prompt tokens whose guess picks it
	guess      [2]struct {
		ids []int
		w   []float32
	}
	mapped      chan expert.Ready // non-streaming hand-off
	mappedParts [][][][]byte      // [layer][expert] slices of the file mapping
}

// renew makes fresh hand-off channels for up to n experts per request.
func (s *streamIO) renew(n int) {
	s.out = make(chan expert.Ready, n)
	s.done = make(chan error, 1)
}

type stepAcc struct {
	stall, compute time.Duration
	model          time.Duration // model.Timings total when the step began
}

type planReq struct {
	step, layer int
	experts     []int             // demand lookups (nil: speculation only)
	routed      []int             // the layer's whole routed set, on its first wave (prefetch.Planner.Settle)
	out         chan expert.Ready // the engine's reusable hand-off (streamIO.out)
	done        chan error
	specLayer   int   // layer to speculate for after the demand (-1: none)
	guess       []int // next-layer policy: the predicted experts of specLayer
	set         []int // a prompt pass's guessed set of specLayer (Planner.SpeculateSet)
}

// startIO starts the streaming I/O that needs no model: the expert cache,
// the reader lanes and the planner (with its speculation policy), so a warm
// start can read while the dense weights load.
func (e *Engine) startIO() error {
	cfg := e.cfg
	slot := e.layout.slotBytes
	pol, err := cache.NewPolicy(cfg.Cache.Policy, cache.PolicyOptions{Layers: e.desc.HParams.NLayer, Seed: 1})
	if err != nil {
		return fmt.Errorf("%w: %w", ErrConfig, err)
	}
	e.io.cache, err = cache.New(cache.Config{BudgetBytes: cfg.Cache.Bytes, SlotBytes: slot, Policy: pol, TransientSlots: max(e.cfg.K, cache.DefaultTransientSlots), HugePages: cfg.HugePages})
	if err != nil {
		return err
	}
	e.io.lanes, err = reader.Start(e.life.ctx, e.io.files, reader.LaneOptions{Lanes: cfg.IO.Lanes, SpecLanes: cfg.Prefetch.Lanes})
	if err != nil {
		return err
	}
	var pp prefetch.Policy
	if cfg.Prefetch.N > 0 && cfg.Cache.Bytes > 0 {
		if pp, err = prefetch.NewPolicy(cfg.Prefetch.Policy, e.desc.HParams.NLayer); err != nil {
			return fmt.Errorf("%w: --prefetch-policy: %w", ErrConfig, err)
		}
	}
	e.io.policy = pp
	e.io.planner = prefetch.New(e.io.cache, e.io.lanes, e.layout, pp, cfg.Prefetch.N)
	return nil
}

// startPlanLoop finishes the streaming pipeline once the model is built: the
// next-layer policy's early router, the hand-off channels and the planner
// goroutine.
func (e *Engine) startPlanLoop() error {
	if pk, ok := e.model.(model.RouterPeeker); ok && e.cfg.Prefetch.Prompt {
		e.io.prompt = pk
	}
	if g, ok := e.io.policy.(prefetch.Guesser); ok {
		e.io.guesser = g
		if e.io.peeker, ok = e.model.(model.RouterPeeker); !ok {
			return fmt.Errorf("%w: --prefetch-policy next-layer: architecture %s cannot apply a router early", ErrConfig, e.desc.Arch)
		}
	}
	e.io.plans = make(chan planReq, 2) // a demand request and the speculation that follows it
	e.io.renew(e.layout.maxExperts())
	e.life.Go(e.planLoop)
	return nil
}

// planLoop is the planner goroutine.
func (e *Engine) planLoop() error {
	for {
		select {
		case <-e.life.ctx.Done():
			return nil
		case r := <-e.io.plans:
			if r.routed != nil {
				e.io.planner.Settle(r.layer, r.routed)
			}
			if r.experts != nil {
				err := e.io.planner.Plan(e.life.ctx, r.step, r.layer, r.experts, r.out)
				r.done <- err
				if err != nil {
					continue
				}
			}
			switch {
			case r.specLayer < 0 || r.specLayer >= len(e.layout.ranges):
			case r.set != nil:
				e.io.planner.SpeculateSet(r.specLayer, r.set)
			default:
				if e.io.guesser != nil {
					e.io.guesser.SetGuess(r.specLayer, r.guess)
				}
				e.io.planner.Speculate(r.step, r.specLayer)
			}
		}
	}
}

// RunMoE implements model.MoE: the per-layer pipeline, with x as the
// router input for speculation.
func (e *Engine) RunMoE(ctx context.Context, layer int, x, logits [][]float32, out [][]float32) error {
	return e.RunMoERouted(ctx, layer, x, logits, x, out)
}

// RunMoERouted implements model.RouterInputMoE: the per-layer pipeline;
// next-layer speculation applies the next layer's router to routerIn.
func (e *Engine) RunMoERouted(ctx context.Context, layer int, x, logits, routerIn, out [][]float32) error {
	e.scratch.peekIn = routerIn
	spec := e.model.Router(layer)
	n := len(x)
	if cap(e.scratch.routeIDs) < n {
		e.scratch.routeIDs = make([][]int, n)
		e.scratch.routeW = make([][]float32, n)
	}
	ids, ws := e.scratch.routeIDs[:n], e.scratch.routeW[:n]
	if len(e.scratch.probs) < spec.NExpert {
		e.scratch.probs = make([]float32, spec.NExpert)
	}
	t0 := time.Now()
	for t := 0; t < n; t++ {
		if cap(ids[t]) < spec.K {
			ids[t] = make([]int, spec.K)
			ws[t] = make([]float32, spec.K)
		}
		ids[t], ws[t] = ids[t][:spec.K], ws[t][:spec.K]
		if err := router.Route(spec, logits[t], ids[t], ws[t], e.scratch.probs); err != nil {
			return fmt.Errorf("layer %d: %w", layer, err)
		}
	}
	job := &e.scratch.job
	job.Layer, job.K, job.X, job.IDs, job.W, job.Out = layer, spec.K, x, ids, ws, out
	job.Plan()
	e.ffn.Begin(job)
	var st ffn.Stats
	st.Compute += time.Since(t0)
	if e.OnRoute != nil {
		e.OnRoute(e.meter.step, layer, ids, ws)
	}
	var err error
	if e.io == nil {
		err = e.runMapped(ctx, job, &st)
	} else {
		err = e.runStream(ctx, job, &st)
	}
	if err != nil {
		return err
	}
	e.ffn.Finish(job, &st)
	e.meter.acc.stall += st.Stall
	e.meter.acc.compute += st.Compute
	e.meter.experts += st.Compute
	e.meter.stall += st.Stall
	return nil
}

// runMapped hands the layer's experts to the FFN stage as slices of the
// whole-file mapping (non-streaming mode).
func (e *Engine) runMapped(ctx context.Context, job *ffn.Job, st *ffn.Stats) error {
	sc := &e.scratch
	if sc.mapped == nil {
		sc.mapped = make(chan expert.Ready, e.layout.maxExperts())
		sc.mappedParts = make([][][][]byte, len(e.layout.ranges))
	}
	for _, x := range job.Order {
		parts, err := e.mappedParts(job.Layer, x)
		if err != nil {
			return fmt.Errorf("layer %d expert %d: %w", job.Layer, x, err)
		}
		sc.mapped <- expert.Ready{Expert: x, Parts: parts}
	}
	err := e.ffn.Consume(ctx, job, sc.mapped, len(job.Order), true, st)
	for len(sc.mapped) > 0 { // left by an early return: nothing to release
		<-sc.mapped
	}
	return err
}

// mappedParts returns (and keeps) the projection slices of an expert in the
// whole-file mapping.
func (e *Engine) mappedParts(layer, x int) ([][]byte, error) {
	row := e.scratch.mappedParts[layer]
	if row == nil {
		row = make([][][]byte, len(e.layout.ranges[layer]))
		e.scratch.mappedParts[layer] = row
	}
	if row[x] != nil {
		return row[x], nil
	}
	rs := e.layout.ranges[layer][x]
	parts := make([][]byte, len(rs))
	for i, r := range rs {
		b, err := e.weights.Mapped(r.Shard, r.Off, r.Len)
		if err != nil {
			return nil, err
		}
		parts[i] = b
	}
	row[x] = parts
	return parts, nil
}

// runStream sends the layer's experts to the planner goroutine in waves (one
// wave with overlap) and has the FFN stage consume them as they become
// ready. Requests and Ready values travel by value through the engine's
// reusable channels; after an error the channels are replaced, in case the
// planner could still deliver into the old ones (only when the engine is
// closing: a wave is always consumed whole otherwise).
func (e *Engine) runStream(ctx context.Context, job *ffn.Job, st *ffn.Stats) error {
	err := e.streamWaves(ctx, job, st)
	if err != nil {
		e.io.renew(e.layout.maxExperts())
	}
	return err
}

func (e *Engine) streamWaves(ctx context.Context, job *ffn.Job, st *ffn.Stats) error {
	order := job.Order
	// Without overlap the FFN waits for a whole wave; a wave must fit in the
	// slots that can be pinned at once (the transient pool is at least k).
	wave := len(order)
	if !e.cfg.Overlap {
		wave = max(job.K, cache.DefaultTransientSlots)
	}
	first := true
	for len(order) > 0 {
		w := order[:min(wave, len(order))]
		order = order[len(w):]
		var routed []int
		if first {
			routed = job.Order
		}
		select {
		case e.io.plans <- planReq{step: e.meter.step, layer: job.Layer, experts: w, routed: routed, out: e.io.out, done: e.io.done, specLayer: e.temporalSpec(job.Layer)}:
		case <-ctx.Done():
			return ctx.Err()
		case <-e.life.ctx.Done():
			return cancelled(ctx, e.stageErr())
		}
		if first {
			e.speculateNext(job)
			first = false
		}
		// The wave is consumed under the engine's lifetime, not ctx: the
		// planner and lanes deliver every expert of it, and one left unread
		// in out would stay pinned in the cache for good. A cancelled ctx
		// ends the pass at the next wave or layer (the sends above).
		cerr := e.ffn.Consume(e.life.ctx, job, e.io.out, len(w), e.cfg.Overlap, st)
		var perr error
		select {
		case perr = <-e.io.done:
		case <-e.life.ctx.Done():
			perr = e.stageErr()
		}
		if err := cmp.Or(cerr, perr); err != nil {
			return cancelled(ctx, err)
		}
	}
	return nil
}

// cancelled reports err as ctx.Err() when ctx is done: whatever a stage saw
// as the pass went down (the engine's lifetime ends with its parent context,
// a wave still consumed), the caller tells cancellation from failure by it.
func cancelled(ctx context.Context, err error) error {
	if cerr := ctx.Err(); cerr != nil {
		return cerr
	}
	return err
}

// temporalSpec is the layer a history-based policy speculates for after
// layer's demand (-1: none; the next-layer policy sends its own request).
func (e *Engine) temporalSpec(layer int) int {
	if e.io.policy == nil || e.io.peeker != nil {
		return -1
	}
	return layer + 1
}

// speculateNext applies layer+1's router to this layer's router input and
// hands the guess to the planner without blocking: speculation is dropped
// when the planner is busy. A decode step guesses --prefetch experts with
// the next-layer policy; a prompt pass guesses the next layer's routed set
// (speculatePrompt).
func (e *Engine) speculateNext(job *ffn.Job) {
	if job.Layer+1 >= len(e.layout.ranges) {
		return
	}
	if len(e.scratch.peekIn) > 1 {
		e.speculatePrompt(job.Layer + 1)
		return
	}
	if e.io.peeker == nil || len(e.scratch.peekIn) != 1 {
		return
	}
	next := job.Layer + 1
	spec := e.model.Router(next)
	if len(e.scratch.peekLogits) < spec.NExpert {
		e.scratch.peekLogits = make([]float32, spec.NExpert)
		e.scratch.probs = make([]float32, spec.NExpert)
	}
	t0 := time.Now()
	err := e.io.peeker.PeekRouter(next, e.scratch.peekIn[0], 1, e.scratch.peekLogits)
	spec.K = min(e.cfg.Prefetch.N, spec.NExpert)
	// Two guess buffers, by layer parity: the planner copies a guess
	// (Guesser.SetGuess) before it takes the demand request of that layer,
	// which this goroutine waits for before it computes the guess two
	// layers on.
	g := &e.scratch.guess[next%2]
	g.ids, g.w = buf.Grow(g.ids, spec.K), buf.Grow(g.w, spec.K)
	if err == nil {
		err = router.Route(spec, e.scratch.peekLogits[:spec.NExpert], g.ids, g.w, e.scratch.probs)
	}
	e.meter.timings.Router += time.Since(t0)
	if err != nil {
		return
	}
	select {
	case e.io.plans <- planReq{step: e.meter.step, layer: next, specLayer: next, guess: g.ids}:
	default:
	}
}

// speculatePrompt guesses, during a prompt pass, which experts layer next
// will route: next's router applied to every token's router input of the
// layer being computed, each token's top k counted as votes, the experts with
// any vote most voted first. The planner reads them while this layer
// computes and the next one runs its attention — the time a prompt pass
// otherwise leaves the disk idle, as next's routing is not known before its
// attention — and withdraws the wrong guesses no lane has started once next
// is routed (Planner.Settle). Guesses never change what is computed.
func (e *Engine) speculatePrompt(next int) {
	if e.io.prompt == nil {
		return
	}
	sc := &e.scratch
	spec := e.model.Router(next)
	n, width := len(sc.peekIn), len(sc.peekIn[0])
	sc.peekX = buf.Grow(sc.peekX, n*width)
	for t, row := range sc.peekIn {
		copy(sc.peekX[t*width:(t+1)*width], row)
	}
	sc.peekLogits = buf.Grow(sc.peekLogits, n*spec.NExpert)
	sc.probs = buf.Grow(sc.probs, max(len(sc.probs), spec.NExpert))
	t0 := time.Now()
	defer func() { e.meter.timings.Router += time.Since(t0) }()
	if e.io.prompt.PeekRouter(next, sc.peekX, n, sc.peekLogits) != nil {
		return // no router to apply early (a layer without experts): nothing to guess
	}
	g := &sc.guess[next%2]
	g.ids, g.w = buf.Grow(g.ids, spec.K), buf.Grow(g.w, spec.K)
	sc.votes = buf.Grow(sc.votes, spec.NExpert)
	clear(sc.votes)
	for t := range n {
		if router.Route(spec, sc.peekLogits[t*spec.NExpert:(t+1)*spec.NExpert], g.ids, g.w, sc.probs) != nil {
			return
		}
		for _, x := range g.ids {
			sc.votes[x]++
		}
	}
	set := g.ids[:0]
	for x, v := range sc.votes {
		if v > 0 {
			set = append(set, x)
		}
	}
	slices.SortStableFunc(set, func(a, b int) int { return cmp.Compare(sc.votes[b], sc.votes[a]) })
	g.ids = set
	select {
	case e.io.plans <- planReq{step: e.meter.step, layer: next, specLayer: next, set: set}:
	default:
	}
}

// stageErr is why the engine's context ended: the caller's cancellation
// (context.Canceled or DeadlineExceeded, wrapping its cause, so callers can
// test for it) or a stage's error.
func (e *Engine) stageErr() error {
	if err := e.life.parent.Err(); err != nil {
		if cause := context.Cause(e.life.parent); cause != nil && cause != err {
			return fmt.Errorf("%w: %w", err, cause)
		}
		return err
	}
	if err := context.Cause(e.life.ctx); err != nil {
		return err
	}
	return context.Canceled
}

// TakeStep returns and resets the decode goroutine's totals since the last
// call: stall is the time the FFN stage waited for expert bytes; compute is
// the measured busy time of the compute sections — embedding, attention,
// router (also the next layer's, applied early for prefetch), expert FFNs,
// the weighted sum and the LM head — never derived from wall time.
func (e *Engine) TakeStep() (stall, compute time.Duration) {
	total := e.meter.timings.Attention + e.meter.timings.Router + e.meter.timings.LMHead + e.meter.timings.Embed
	s, c := e.meter.acc.stall, e.meter.acc.compute+total-e.meter.acc.model
	e.meter.acc = stepAcc{model: total}
	return s, c
}

// Profile is where the decode goroutine's time went since Open.
type Profile struct {
	model.Timings
	Experts time.Duration // routing, expert FFNs and the weighted sum
	Stall   time.Duration // waiting for expert bytes
}

// Profile returns the cumulative time breakdown.
func (e *Engine) Profile() Profile {
	return Profile{Timings: e.meter.timings, Experts: e.meter.experts, Stall: e.meter.stall}
}

// PlannerStats returns the planner's cumulative counters (ok is false when
// not streaming).
func (e *Engine) PlannerStats() (st prefetch.Stats, ok bool) {
	if e.io == nil {
		return st, false
	}
	return e.io.planner.Stats(), true
}
