package stages

import (
	"context"
	"errors"
	"fmt"
	"runtime/debug"
	"sync"
	"time"

	"github.com/sourcegraph/conc"

	"github.com/pipe-engine/pipe/cache"
	"github.com/pipe-engine/pipe/dense"
	"github.com/pipe-engine/pipe/ffn"
	"github.com/pipe-engine/pipe/gguf"
	"github.com/pipe-engine/pipe/kernels"
	"github.com/pipe-engine/pipe/model"
	"github.com/pipe-engine/pipe/reader"
	"github.com/pipe-engine/pipe/warmstart"
)

// Engine is a loaded model with its pipeline: it opens the model, resolves
// the configuration, chooses the expert source, builds the architecture and
// the pipeline over them, runs forward passes and closes it all.
type Engine struct {
	cfg     Resolved
	desc    *model.Desc
	model   model.Model
	pool    *kernels.Pool
	weights *dense.Weights
	layout  expertLayout
	src     expertSource
	pipe    pipeline
	life    lifetime
	meter   meter // decode goroutine only

	batchSteps int // ForwardBatch passes with a decode step, for the step numbering
}

// lifetime is the context the stage goroutines run under and their owner:
// a goroutine's error cancels the context (with that error as its cause)
// and is kept for Close, which waits for every goroutine (conc.WaitGroup
// re-raises a goroutine's panic there).
type lifetime struct {
	parent context.Context // Open's
	ctx    context.Context
	cancel context.CancelCauseFunc
	wg     *conc.WaitGroup
	mu     sync.Mutex
	err    error // the first goroutine error
}

// errStagePanic is the lifetime's cause when a stage goroutine panicked;
// Close re-raises the panic itself.
var errStagePanic = errors.New("stages: a stage goroutine panicked")

// Go runs f as a stage goroutine. A panic in f also cancels the lifetime
// (the panic goes on to conc, which re-raises it at wait): the goroutines
// and callers waiting for f's stage are released instead of waiting for
// it forever.
func (l *lifetime) Go(f func() error) {
	l.wg.Go(func() {
		returned := false
		defer func() {
			if !returned {
				l.cancel(errStagePanic)
			}
		}()
		err := f()
		returned = true
		if err != nil {
			l.mu.Lock()
			if l.err == nil {
				l.err = err
			}
			l.mu.Unlock()
			l.cancel(err)
		}
	})
}

// stageErr is why the lifetime's context ended: the caller's cancellation
// (context.Canceled or DeadlineExceeded, wrapping its cause, so callers can
// test for it) or a stage's error.
func (l *lifetime) stageErr() error {
	if err := l.parent.Err(); err != nil {
		if cause := context.Cause(l.parent); cause != nil && cause != err {
			return fmt.Errorf("%w: %w", err, cause)
		}
		return err
	}
	if err := context.Cause(l.ctx); err != nil {
		return err
	}
	return context.Canceled
}

// wait waits for every stage goroutine and returns the first error.
func (l *lifetime) wait() error {
	l.wg.Wait()
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.err
}

// expertLayout maps (layer, expert) to file ranges.
type expertLayout struct {
	ranges    [][][]reader.Range
	slotBytes int64 // cache slot: the largest expert span, aligned
}

func (l expertLayout) ExpertRanges(layer, e int) []reader.Range { return l.ranges[layer][e] }

// maxExperts is the most experts any layer has.
func (l expertLayout) maxExperts() int {
	n := 0
	for _, exps := range l.ranges {
		n = max(n, len(exps))
	}
	return n
}

// count is the number of experts over all layers.
func (l expertLayout) count() int64 {
	var n int64
	for _, exps := range l.ranges {
		n += int64(len(exps))
	}
	return n
}

func newLayout(d *model.Desc) expertLayout {
	var l expertLayout
	l.ranges = make([][][]reader.Range, len(d.Experts))
	var maxSpan int64
	for i, exps := range d.Experts {
		l.ranges[i] = make([][]reader.Range, len(exps))
		for x, sl := range exps {
			rs := make([]reader.Range, len(sl))
			for j, s := range sl {
				rs[j] = s.Range
			}
			l.ranges[i][x] = rs
			maxSpan = max(maxSpan, reader.SpanBytes(rs))
		}
	}
	l.slotBytes = cache.SlotSize(maxSpan)
	return l
}

// Open loads the model at cfg.Path and starts the pipeline: prepare
// works the configuration out (defaults, validation, the model's
// description, resolve) before anything is allocated, then the engine is
// built on that plan (Engine.Config).
func Open(ctx context.Context, cfg Config, in Inputs) (*Engine, error) {
	t0 := time.Now()
	p, err := prepare(cfg, in)
	if err != nil {
		return nil, err
	}
	e := &Engine{cfg: p.cfg, desc: p.desc, layout: p.layout}
	e.meter.clock = p.cfg.clock
	e.life.parent = ctx
	e.life.ctx, e.life.cancel = context.WithCancelCause(ctx)
	e.life.wg = conc.NewWaitGroup()
	ok := false
	defer func() {
		if !ok {
			e.Close()
		}
	}()
	if err := e.load(p.desc.File); err != nil {
		return nil, err
	}
	e.meter.load = time.Since(t0)
	ok = true
	return e, nil
}

// load opens the expert source — when streaming, the reader files, the
// cache, lanes and planner and the warm start, whose reads then overlap the
// rest of the load — makes the dense weights resident, builds the
// architecture over them and the pipeline over both.
func (e *Engine) load(f *gguf.File) error {
	cfg := &e.cfg
	var stream *streamSource
	do := dense.Options{Mode: cfg.Dense, Stream: cfg.Streams(), HugePages: !cfg.NoHugePages, Ctx: e.life.ctx, Progress: cfg.LoadProgress}
	if cfg.Streams() {
		var paths []string
		for _, sh := range f.Shards {
			paths = append(paths, sh.Path)
		}
		var err error
		stream, err = openStream(cfg, e.desc, e.layout, paths, &e.life, &e.meter)
		e.src, do.Files = stream, stream.files
		if err != nil {
			return err
		}
	}
	var keys []warmstart.Key
	if cfg.WarmKeys != nil {
		keys = cfg.WarmKeys(e.desc) // asked in every mode; only a stream reads them
	}
	if stream != nil {
		stream.warmStart(keys)
	}
	var err error
	if e.weights, err = dense.Load(f, e.desc, do); err != nil {
		return err
	}
	e.pool = kernels.NewPool(cfg.Threads)
	m, err := model.New(e.desc, e.weights, model.Options{Pool: e.pool, ExpertsUsed: cfg.ExpertsUsed, Timings: &e.meter.timings, Clock: cfg.clock})
	if err != nil {
		return fmt.Errorf("%s: %w", cfg.Path, err)
	}
	e.model = m
	fs := ffn.New(m, e.desc.HParams.NEmbd, e.pool)
	fs.Clock = cfg.clock
	if stream != nil {
		if err := stream.begin(m, fs, e.desc.Arch); err != nil {
			return err
		}
	} else {
		e.src = newMappedSource(e.weights, e.layout, fs)
	}
	e.pipe = pipeline{model: m, ffn: fs, src: e.src, meter: &e.meter}
	if cfg.Lossy.On() {
		e.pipe.lossy = newLossyStage(cfg.Lossy, e.src)
	}
	return nil
}

// Config is the configuration the engine runs with (resolved at Open).
func (e *Engine) Config() Resolved { return e.cfg }

// Desc is the model description.
func (e *Engine) Desc() *model.Desc { return e.desc }

// Resident reports whether the bytes of (layer, expert) are in memory now,
// so a lookup would hit (always false when nothing streams: the page cache
// is not asked).
func (e *Engine) Resident(layer, expert int) bool {
	return e.src.resident(cache.Key{Layer: layer, Expert: expert})
}

// Observe sets an observer of every layer's routing (nil: none; for
// --route-trace and the hot set). It runs on the decode goroutine; the
// slices are valid only during the call.
func (e *Engine) Observe(f func(step, layer int, ids [][]int, weights [][]float32)) {
	e.pipe.onRoute = f
}

// newState allocates a KV cache, refusing one larger than the memory
// available now.
func (e *Engine) newState(nCtx int, kv model.KVType) (*model.State, error) {
	if err := kvFits(stateOf(e.desc, nCtx, kvElemBytes(kv)), nCtx, readMemory()); err != nil {
		return nil, err
	}
	return e.model.NewState(nCtx, kv)
}

// Forward feeds tokens through the model with this engine as its MoE. A
// memory fault reading the mapped model (the file shrank under the run)
// ends the pass with an ErrModelChanged error instead of a crash.
func (e *Engine) Forward(ctx context.Context, st *model.State, tokens []int32, all bool) (rows [][]float32, err error) {
	defer debug.SetPanicOnFault(debug.SetPanicOnFault(true))
	defer func() {
		if r := recover(); r != nil {
			err = e.faultError(r)
		}
	}()
	return e.model.Forward(ctx, st, tokens, &e.pipe, all)
}

// ForwardBatch is Forward over several sequences in one pass (continuous
// batching): per layer the MoE routes every sequence's tokens together, so
// each distinct expert the batch routes to is looked up and read once and
// computed over every token that chose it. Each sequence's rows equal what
// Forward returns for it alone, bit for bit. The lossy modes apply to the
// tokens of one-token sequences (decode steps), as Forward applies them to
// a one-token pass.
func (e *Engine) ForwardBatch(ctx context.Context, seqs []model.Seq) (rows [][][]float32, err error) {
	defer debug.SetPanicOnFault(debug.SetPanicOnFault(true))
	defer func() {
		if r := recover(); r != nil {
			err = e.faultError(r)
		}
	}()
	e.pipe.decodeRows = e.pipe.decodeRows[:0]
	decodes := false
	for _, s := range seqs {
		for range s.Tokens {
			e.pipe.decodeRows = append(e.pipe.decodeRows, len(s.Tokens) == 1)
		}
		decodes = decodes || len(s.Tokens) == 1
	}
	if decodes { // a batch step numbers its own steps; a prompt-only pass is step 0, as Prefill
		e.batchSteps++
		e.setStep(e.batchSteps)
	} else {
		e.setStep(0)
	}
	e.pipe.batch = true
	defer func() { e.pipe.batch = false }()
	return e.model.ForwardBatch(ctx, seqs, &e.pipe)
}

// setStep names the decode step subsequent Forward calls belong to (for the
// cache's batch bookkeeping and the route trace).
func (e *Engine) setStep(step int) { e.meter.step = step }

// residentFrac samples the resident fraction of the dense weights.
func (e *Engine) residentFrac() float64 {
	if e.weights == nil {
		return -1
	}
	return e.weights.ResidentFrac()
}

// Close stops the pipeline, waits for its goroutines and frees memory.
func (e *Engine) Close() error {
	if e.life.cancel != nil {
		e.life.cancel(nil)
	}
	var errs []error
	if e.src != nil {
		e.src.stop()
	}
	if e.life.wg != nil {
		if err := e.life.wait(); err != nil && !errors.Is(err, context.Canceled) {
			errs = append(errs, err)
		}
		e.life.wg = nil
	}
	if e.src != nil {
		errs = append(errs, e.src.close())
		e.src = nil
	}
	if e.pool != nil {
		e.pool.Close()
		e.pool = nil
	}
	if e.weights != nil {
		errs = append(errs, e.weights.Close())
		e.weights = nil
	}
	return errors.Join(errs...)
}
