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
	"github.com/pipe-engine/pipe/expert"
	"github.com/pipe-engine/pipe/ffn"
	"github.com/pipe-engine/pipe/gguf"
	"github.com/pipe-engine/pipe/kernels"
	"github.com/pipe-engine/pipe/metrics"
	"github.com/pipe-engine/pipe/model"
	"github.com/pipe-engine/pipe/prefetch"
	"github.com/pipe-engine/pipe/reader"
)

// Engine is a loaded model with its pipeline.
type Engine struct {
	cfg     Resolved
	desc    *model.Desc
	model   model.Model
	pool    *kernels.Pool
	weights *dense.Weights
	io      *streamIO // nil without streaming
	layout  expertLayout
	ffn     *ffn.Stage
	life    lifetime
	scratch layerScratch // decode goroutine only
	meter   meter        // decode goroutine only

	// OnRoute, when set, observes every layer's routing (for --route-trace).
	// Called on the decode goroutine; the slices are valid only during the call.
	OnRoute func(step, layer int, ids [][]int, weights [][]float32)
}

// streamIO is the streaming half of the pipeline.
type streamIO struct {
	files   *reader.Files
	lanes   *reader.Lanes
	cache   *cache.Cache
	planner *prefetch.Planner
	plans   chan planReq      // decode goroutine → planner goroutine (capacity 2)
	out     chan expert.Ready // planner and lanes → FFN stage (capacity: experts per layer)
	done    chan error        // planner → decode goroutine: a request's lookups are issued (capacity 1)
	policy  prefetch.Policy
	guesser prefetch.Guesser   // policy, when the pipeline computes its guesses
	peeker  model.RouterPeeker // the guesser's early router
	prompt  model.RouterPeeker // the early router of prompt passes (PrefetchConfig.Prompt)
	warm    bool               // a warm start was started
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

// Go runs f as a stage goroutine.
func (l *lifetime) Go(f func() error) {
	l.wg.Go(func() {
		if err := f(); err != nil {
			l.mu.Lock()
			if l.err == nil {
				l.err = err
			}
			l.mu.Unlock()
			l.cancel(err)
		}
	})
}

// wait waits for every stage goroutine and returns the first error.
func (l *lifetime) wait() error {
	l.wg.Wait()
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.err
}

// meter accumulates where the decode goroutine's time went.
type meter struct {
	step    int // decode step of the current Forward (SetStep)
	acc     stepAcc
	timings model.Timings // filled by the model
	experts time.Duration // FFN stage compute, cumulative
	stall   time.Duration // FFN stage waits, cumulative
	load    time.Duration
	prompt  metrics.Lookups // the demand lookups of prompt passes (Session.Prefill)
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

// Open loads the model at cfg.Path and starts the pipeline.
func Open(ctx context.Context, cfg Config) (*Engine, error) {
	t0 := time.Now()
	if err := cfg.EnsureDefaults().Validate(); err != nil {
		return nil, err
	}
	f, err := gguf.Open(cfg.Path)
	if err != nil {
		return nil, err
	}
	d, err := model.Describe(f)
	if err != nil {
		return nil, err
	}
	if !model.Runnable(d.Arch) {
		return nil, fmt.Errorf("%s: %w: %q (pipe runs: %v)", cfg.Path, model.ErrUnsupportedArch, d.Arch, model.Architectures())
	}
	layout := newLayout(d)
	rc, err := resolve(cfg, d, layout)
	if err != nil {
		return nil, err
	}
	e := &Engine{cfg: rc, desc: d, layout: layout}
	e.life.parent = ctx
	e.life.ctx, e.life.cancel = context.WithCancelCause(ctx)
	e.life.wg = conc.NewWaitGroup()
	ok := false
	defer func() {
		if !ok {
			e.Close()
		}
	}()
	e.pool = kernels.NewPool(cfg.Threads)
	if err := e.load(f); err != nil {
		return nil, err
	}
	if cfg.Stream {
		if err := e.startPlanLoop(); err != nil {
			return nil, err
		}
	}
	e.meter.load = time.Since(t0)
	ok = true
	return e, nil
}

// load sizes the cache budget, opens the reader files and starts the
// streaming I/O (cache, lanes, planner and the warm start, whose reads then
// overlap the rest of the load), makes the dense weights resident and builds
// the architecture over them.
func (e *Engine) load(f *gguf.File) error {
	cfg := e.cfg
	if cfg.Stream {
		var paths []string
		for _, sh := range f.Shards {
			paths = append(paths, sh.Path)
		}
		files, err := reader.Open(paths, reader.Options{NoODirect: cfg.IO.NoODirect, Open: cfg.IO.Open, Logf: func(format string, args ...any) {
			cfg.Log.Warn().Str("event", "odirect_fallback").Msgf(format, args...)
		}})
		if err != nil {
			return err
		}
		e.io = &streamIO{files: files}
		if err := e.startIO(); err != nil {
			return err
		}
	}
	if cfg.WarmKeys != nil {
		e.warmStart(cfg.WarmKeys(e.desc)) // nothing to do without streaming
	}
	do := dense.Options{Mode: cfg.Dense, Stream: cfg.Stream, HugePages: cfg.HugePages, Ctx: e.life.ctx, Progress: cfg.LoadProgress}
	if e.io != nil {
		do.Files = e.io.files
	}
	var err error
	if e.weights, err = dense.Load(f, e.desc, do); err != nil {
		return err
	}
	m, err := model.New(e.desc, e.weights, model.Options{Pool: e.pool, ExpertsUsed: cfg.ExpertsUsed, Timings: &e.meter.timings})
	if err != nil {
		return fmt.Errorf("%s: %w", cfg.Path, err)
	}
	e.model = m
	e.ffn = ffn.New(m, e.desc.HParams.NEmbd, e.pool)
	return nil
}

// Config is the configuration the engine runs with (resolved at Open).
func (e *Engine) Config() Resolved { return e.cfg }

// Desc is the model description.
func (e *Engine) Desc() *model.Desc { return e.desc }

// Model is the architecture instance.
func (e *Engine) Model() model.Model { return e.model }

// LoadTime is how long Open took.
func (e *Engine) LoadTime() time.Duration { return e.meter.load }

// Cache is the expert cache (nil when not streaming).
func (e *Engine) Cache() *cache.Cache {
	if e.io == nil {
		return nil
	}
	return e.io.cache
}

// Lanes are the reader lanes (nil when not streaming).
func (e *Engine) Lanes() *reader.Lanes {
	if e.io == nil {
		return nil
	}
	return e.io.lanes
}

// ODirect reports whether expert/dense reads use O_DIRECT.
func (e *Engine) ODirect() bool { return e.io != nil && e.io.files.ODirect() }

// NewState allocates a KV cache.
func (e *Engine) NewState(nCtx int, kv model.KVType) (*model.State, error) {
	if err := checkKV(e.desc.HParams, nCtx, kvElemBytes(kv)); err != nil {
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
	return e.model.Forward(ctx, st, tokens, e, all)
}

// SetStep names the decode step subsequent Forward calls belong to (for the
// cache's batch bookkeeping and the route trace).
func (e *Engine) SetStep(step int) { e.meter.step = step }

// ResidentFrac samples the resident fraction of the dense weights.
func (e *Engine) ResidentFrac() float64 {
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
	if e.io != nil && e.io.lanes != nil {
		e.io.lanes.Close()
	}
	if e.life.wg != nil {
		if err := e.life.wait(); err != nil && !errors.Is(err, context.Canceled) {
			errs = append(errs, err)
		}
		e.life.wg = nil
	}
	if e.io != nil {
		errs = append(errs, e.io.close())
		e.io = nil
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

func (s *streamIO) close() error {
	if s.planner != nil {
		s.planner.Close()
	}
	var errs []error
	if s.cache != nil {
		errs = append(errs, s.cache.Close())
	}
	errs = append(errs, s.files.Close())
	return errors.Join(errs...)
}
