// Package stages wires one decode step of the engine as DESIGN.md §1 draws
// it: per layer, router → prefetch planner → reader lanes → expert cache →
// FFN compute; per token, metrics to the sink.
//
// # Goroutines
//
// Engine.Open starts the long-lived stage goroutines under one errgroup bound
// to the engine's context: the planner goroutine (it takes one layer's
// expert list at a time from a bounded channel, acquires cache entries in
// router-rank order and submits misses) and the --io-threads reader lanes
// (package reader). The compute stage — attention, router and the expert FFN
// — runs on the decode goroutine, which calls Forward; it cannot run ahead of
// the planner because layer ℓ+1's router needs layer ℓ's output, so a
// separate compute goroutine would add a hand-off without adding overlap.
// Overlap comes from the planner and lanes running while the decode goroutine
// computes the experts that are already resident, and, with --prefetch and
// the next-layer policy, from reading the experts layer ℓ+1's router picks
// when applied to layer ℓ's input while layer ℓ computes (the planner
// withdraws the wrong guesses once layer ℓ+1 is routed).
//
// Every channel is bounded and every send selects on the context, so an
// error in any stage (a failed read, a cancelled context) ends the run with
// that error and Close waits for every goroutine: none outlives the Engine.
//
// # Determinism
//
// Where expert bytes come from (mmap or cache), which lane read them and in
// which order they arrived change only timing: the FFN stage sums expert
// outputs in top-k rank order and each expert's output depends only on its
// bytes and inputs. Tests check bit-identical logits across --io-threads,
// --cache-mb, --overlap, --prefetch, --prefetch-lanes, --huge-pages,
// --dense-weights, --moe-stream and -t.
//
// # Memory
//
// Streaming mode (--moe-stream): expert bytes are only ever read with
// O_DIRECT (or buffered pread as the fallback) into cache slots (anonymous
// memory, huge pages unless --huge-pages=false); the file is never mmap'd for
// experts. Dense weights follow --dense-weights. Non-streaming
// mode mmaps the whole file, as llama.cpp does, for A/B comparisons.
package stages

import (
	"context"
	"errors"
	"fmt"
	"os"
	"strconv"
	"strings"
	"syscall"
	"time"

	"github.com/rs/zerolog"
	"golang.org/x/sync/errgroup"

	"github.com/pipe-engine/pipe/cache"
	"github.com/pipe-engine/pipe/ffn"
	"github.com/pipe-engine/pipe/gguf"
	"github.com/pipe-engine/pipe/internal/anon"
	"github.com/pipe-engine/pipe/kernels"
	"github.com/pipe-engine/pipe/model"
	"github.com/pipe-engine/pipe/prefetch"
	"github.com/pipe-engine/pipe/reader"
	"github.com/pipe-engine/pipe/router"
)

// Config is everything the engine needs; cmd/pipe fills it from flags.
type Config struct {
	Path          string
	Stream        bool      // --moe-stream
	IOThreads     int       // --io-threads
	NoODirect     bool      // --no-odirect
	CacheBytes    int64     // --cache-mb in bytes; 0 = no cache (ignored with CacheAuto)
	CacheAuto     bool      // --cache-mb auto: size from cgroup limit / MemAvailable
	CacheCeil     int64     // --cache-ceil-mb in bytes (0 = none)
	CacheFloor    int64     // --cache-floor-mb in bytes: RAM left free by auto
	KVPositions   int       // context positions the run will allocate (for auto)
	KVElemBytes   int       // bytes per KV element (2 for f16, 4 for f32)
	Policy        string    // cache replacement policy (lru …)
	Overlap       bool      // --overlap
	Prefetch      int       // --prefetch: speculative experts per layer
	PrefetchPol   string    // --prefetch-policy
	PrefetchLanes int       // --prefetch-lanes: lanes serving speculative reads at once (0: all)
	HugePages     bool      // --huge-pages: THP behind the expert cache slots and the anonymous dense weights
	Dense         DenseMode // --dense-weights
	Threads       int       // -t
	ExpertsUsed   int       // --n-expert-used
	Log           zerolog.Logger
	// OpenFile, when set, opens the model's files for the reader (tests use
	// it to inject short reads, EIO and EINVAL); nil is the operating system.
	OpenFile reader.OpenFunc
}

// Engine is a loaded model with its pipeline.
type Engine struct {
	cfg   Config
	file  *gguf.File
	desc  *model.Desc
	model model.Model
	pool  *kernels.Pool

	mapped *mapping   // whole-file mmap (non-stream, or dense warm/mmap)
	anon   *anonDense // dense weights in anonymous memory
	dense  [][]byte   // page spans of the dense weights, for mincore

	files   *reader.Files
	lanes   *reader.Lanes
	cache   *cache.Cache
	planner *prefetch.Planner
	ffn     *ffn.Stage
	layout  expertLayout

	ctx    context.Context
	cancel context.CancelFunc
	group  *errgroup.Group
	plans  chan planReq

	// per-step accumulators (decode goroutine only)
	step     int
	acc      stepAcc
	routeIDs [][]int
	routeW   [][]float32
	probs    []float32

	LoadTime   time.Duration
	pfPolicy   prefetch.Policy
	peeker     model.RouterPeeker
	peekLogits []float32
	peekIDs    []int
	peekW      []float32
	timings    model.Timings
	experts    time.Duration // FFN stage compute, cumulative
	stallTotal time.Duration
	slotBytes  int64
	workingSet int64

	// OnRoute, when set, observes every layer's routing (for --route-trace).
	// Called on the decode goroutine; the slices are valid only during the call.
	OnRoute func(step, layer int, ids [][]int, weights [][]float32)
}

type stepAcc struct {
	stall, compute time.Duration
	model          time.Duration // model.Timings total when the step began
}

type planReq struct {
	step, layer int
	experts     []int // demand lookups (nil: speculation only)
	routed      []int // the layer's whole routed set, on its first wave (prefetch.Planner.Settle)
	out         chan ffn.Ready
	done        chan error
	specLayer   int   // layer to speculate for after the demand (-1: none)
	guess       []int // next-layer policy: the predicted experts of specLayer
}

// expertLayout maps (layer, expert) to file ranges.
type expertLayout struct {
	ranges [][][]reader.Range
}

func (l expertLayout) ExpertRanges(layer, e int) []reader.Range { return l.ranges[layer][e] }

// count is the number of experts over all layers.
func (l expertLayout) count() int64 {
	var n int64
	for _, exps := range l.ranges {
		n += int64(len(exps))
	}
	return n
}

// ErrConfig marks an invalid engine configuration.
var ErrConfig = errors.New("invalid configuration")

// Open loads the model at cfg.Path and starts the pipeline.
func Open(ctx context.Context, cfg Config) (*Engine, error) {
	t0 := time.Now()
	if cfg.Threads <= 0 {
		return nil, fmt.Errorf("%w: -t %d must be positive", ErrConfig, cfg.Threads)
	}
	if cfg.Stream && cfg.IOThreads <= 0 {
		return nil, fmt.Errorf("%w: --io-threads %d must be positive", ErrConfig, cfg.IOThreads)
	}
	if cfg.CacheBytes < 0 {
		return nil, fmt.Errorf("%w: cache budget %d is negative", ErrConfig, cfg.CacheBytes)
	}
	switch cfg.Dense {
	case DenseAnon, DenseWarm, DenseMmap:
	case "":
		cfg.Dense = DenseAnon
	default:
		return nil, fmt.Errorf("%w: --dense-weights %q (want anon, warm or mmap)", ErrConfig, cfg.Dense)
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
	e := &Engine{cfg: cfg, file: f, desc: d}
	e.ctx, e.cancel = context.WithCancel(ctx)
	var g *errgroup.Group
	g, e.ctx = errgroup.WithContext(e.ctx)
	e.group = g
	ok := false
	defer func() {
		if !ok {
			e.Close()
		}
	}()
	e.pool = kernels.NewPool(cfg.Threads)
	// Expert layout.
	e.layout.ranges = make([][][]reader.Range, len(d.Experts))
	var maxSpan int64
	for l, exps := range d.Experts {
		e.layout.ranges[l] = make([][]reader.Range, len(exps))
		for x, sl := range exps {
			rs := make([]reader.Range, len(sl))
			for i, s := range sl {
				rs[i] = reader.Range{Shard: s.Shard, Off: s.Off, Len: s.Len}
			}
			e.layout.ranges[l][x] = rs
			maxSpan = max(maxSpan, reader.SpanBytes(rs))
		}
	}
	e.slotBytes = cache.SlotSize(maxSpan)
	if cfg.Stream {
		if err := e.resolveBudget(); err != nil {
			return nil, err
		}
	}

	var paths []string
	for _, sh := range f.Shards {
		paths = append(paths, sh.Path)
	}
	needFiles := cfg.Stream
	if !cfg.Stream || cfg.Dense != DenseAnon {
		if e.mapped, err = mapFiles(f); err != nil {
			return nil, err
		}
	}
	if needFiles {
		e.files, err = reader.Open(paths, reader.Options{NoODirect: cfg.NoODirect, Open: cfg.OpenFile, Logf: func(format string, args ...any) {
			cfg.Log.Warn().Str("event", "odirect_fallback").Msgf(format, args...)
		}})
		if err != nil {
			return nil, err
		}
	}
	var src model.DenseSource
	switch {
	case !cfg.Stream:
		src = e.mapped
		for _, r := range d.Dense {
			e.dense = append(e.dense, pageSpan(e.mapped.data[r.Shard], r.Off, r.Len))
		}
		if cfg.Dense == DenseWarm || cfg.Dense == DenseAnon {
			// Non-streaming mode is llama.cpp's whole-file mmap; the dense
			// policy only decides whether it is prefaulted.
			for _, s := range e.dense {
				touch(s)
			}
		}
	case cfg.Dense == DenseAnon:
		if err := e.loadAnon(); err != nil {
			return nil, err
		}
		src = e.anon
	default:
		src = e.mapped
		for _, r := range d.Dense {
			e.dense = append(e.dense, pageSpan(e.mapped.data[r.Shard], r.Off, r.Len))
		}
		if cfg.Dense == DenseWarm {
			for _, s := range e.dense {
				touch(s)
			}
		}
	}
	m, err := model.New(d, src, model.Options{Pool: e.pool, ExpertsUsed: cfg.ExpertsUsed, Timings: &e.timings})
	if err != nil {
		return nil, fmt.Errorf("%s: %w", cfg.Path, err)
	}
	e.model = m
	e.ffn = ffn.New(m, d.HParams.NEmbd)

	if cfg.Stream {
		if err := e.startStream(); err != nil {
			return nil, err
		}
	}
	e.LoadTime = time.Since(t0)
	ok = true
	return e, nil
}

func (e *Engine) loadAnon() error {
	d := e.desc
	a := &anonDense{}
	var total int64
	for _, r := range d.Dense {
		_, l := reader.Widen(r.Off, r.Len)
		total += l
	}
	if total == 0 {
		total = reader.BlockSize
	}
	buf, err := anon.Map(total, e.cfg.HugePages)
	if err != nil {
		return fmt.Errorf("dense weights: %w", err)
	}
	a.buf = buf
	e.anon = a
	var pos int64
	for _, r := range d.Dense {
		start, l := reader.Widen(r.Off, r.Len)
		rr := []reader.Range{{Shard: r.Shard, Off: r.Off, Len: r.Len}}
		if _, err := e.files.ReadRanges(buf[pos:pos+l], rr, "dense weights"); err != nil {
			return err
		}
		a.ranges = append(a.ranges, anonRange{shard: r.Shard, off: r.Off, len: r.Len, at: pos + r.Off - start})
		e.dense = append(e.dense, buf[pos:pos+l])
		pos += l
	}
	return nil
}

// resolveBudget turns --cache-mb auto into bytes and logs the cliff guard.
func (e *Engine) resolveBudget() error {
	d := e.desc
	if e.cfg.CacheAuto {
		k := d.HParams.NExpertUsed
		if e.cfg.ExpertsUsed > 0 {
			k = e.cfg.ExpertsUsed
		}
		// Dense bytes are subtracted in every mode: with warm/mmap they are
		// page-cache pages, but a cgroup charges those too, and a cache that
		// takes their room pushes them out to refault during compute (the
		// seed note's Regime 2).
		dense := d.DenseBytes
		a, err := cache.AutoBudget(cache.AutoOptions{
			DenseBytes: dense, KVBytes: e.kvBytes(),
			OverheadBytes: int64(max(k, cache.DefaultTransientSlots))*e.slotBytes + 64<<20,
			FloorBytes:    e.cfg.CacheFloor, CeilBytes: e.cfg.CacheCeil, SlotBytes: e.slotBytes,
			AllBytes: e.layout.count() * e.slotBytes,
		})
		if err != nil {
			return fmt.Errorf("--cache-mb auto: %w", err)
		}
		e.cfg.CacheBytes = a.Budget
		e.cfg.Log.Info().Str("event", "cache_budget").Int64("budget_bytes", a.Budget).Int64("available_bytes", a.Available).
			Str("source", a.Source).Msg(a.Explain)
	}
	k := d.HParams.NExpertUsed
	if e.cfg.ExpertsUsed > 0 {
		k = e.cfg.ExpertsUsed
	}
	e.workingSet = cache.TokenWorkingSet(d.HParams.NLayer, k, e.slotBytes)
	if e.cfg.CacheBytes > 0 && e.cfg.CacheBytes < e.workingSet {
		e.cfg.Log.Warn().Str("event", "cache_cliff").Int64("budget_bytes", e.cfg.CacheBytes).
			Int64("working_set_bytes", e.workingSet).Msg(cache.CliffWarning(e.cfg.CacheBytes, e.workingSet))
	}
	return nil
}

// kvBytes is the KV cache the run will allocate: layers × K and V ×
// positions × KV width × element size.
func (e *Engine) kvBytes() int64 {
	hp := e.desc.HParams
	kvDim := hp.NHeadKV * hp.HeadDim
	if kvDim == 0 {
		kvDim = hp.NEmbd
	}
	return int64(hp.NLayer) * 2 * int64(e.cfg.KVPositions) * int64(kvDim) * int64(max(e.cfg.KVElemBytes, 2))
}

// Budget is the expert cache budget in bytes (resolved when auto).
func (e *Engine) Budget() int64 { return e.cfg.CacheBytes }

// WorkingSet is one token's expert bytes in cache slots (Σ layers k × slot).
func (e *Engine) WorkingSet() int64 { return e.workingSet }

func (e *Engine) startStream() error {
	cfg := e.cfg
	slot := e.slotBytes
	pol, err := cache.NewPolicy(cfg.Policy, cache.PolicyOptions{Layers: e.desc.HParams.NLayer, Seed: 1})
	if err != nil {
		return fmt.Errorf("%w: %w", ErrConfig, err)
	}
	k := e.model.Router(0).K
	e.cache, err = cache.New(cache.Config{BudgetBytes: cfg.CacheBytes, SlotBytes: slot, Policy: pol, TransientSlots: max(k, cache.DefaultTransientSlots), HugePages: cfg.HugePages})
	if err != nil {
		return err
	}
	e.lanes, err = reader.Start(e.ctx, e.files, reader.LaneOptions{Lanes: cfg.IOThreads, SpecLanes: cfg.PrefetchLanes})
	if err != nil {
		return err
	}
	var pp prefetch.Policy
	if cfg.Prefetch > 0 && cfg.CacheBytes > 0 {
		name := cfg.PrefetchPol
		if name == "" {
			name = "temporal"
		}
		if pp, err = prefetch.NewPolicy(name, e.desc.HParams.NLayer); err != nil {
			return fmt.Errorf("%w: --prefetch-policy: %w", ErrConfig, err)
		}
	}
	e.pfPolicy = pp
	if _, ok := pp.(*prefetch.NextLayer); ok {
		if e.peeker, ok = e.model.(model.RouterPeeker); !ok {
			return fmt.Errorf("%w: --prefetch-policy next-layer: architecture %s cannot apply a router early", ErrConfig, e.desc.Arch)
		}
	}
	e.planner = prefetch.New(e.cache, e.lanes, e.layout, pp, cfg.Prefetch)
	e.plans = make(chan planReq, 2) // a demand request and the speculation that follows it
	e.group.Go(e.planLoop)
	return nil
}

// planLoop is the planner goroutine.
func (e *Engine) planLoop() error {
	for {
		select {
		case <-e.ctx.Done():
			return nil
		case r := <-e.plans:
			if r.routed != nil {
				e.planner.Settle(r.layer, r.routed)
			}
			if r.experts != nil {
				err := e.planner.Plan(e.ctx, r.step, r.layer, r.experts, r.out)
				r.done <- err
				if err != nil {
					continue
				}
			}
			if r.specLayer >= 0 && r.specLayer < len(e.layout.ranges) {
				if nl, ok := e.pfPolicy.(*prefetch.NextLayer); ok {
					nl.SetGuess(r.specLayer, r.guess)
				}
				e.planner.Speculate(e.ctx, r.step, r.specLayer)
			}
		}
	}
}

// Desc is the model description.
func (e *Engine) Desc() *model.Desc { return e.desc }

// Model is the architecture instance.
func (e *Engine) Model() model.Model { return e.model }

// Cache is the expert cache (nil when not streaming).
func (e *Engine) Cache() *cache.Cache { return e.cache }

// Lanes are the reader lanes (nil when not streaming).
func (e *Engine) Lanes() *reader.Lanes { return e.lanes }

// ODirect reports whether expert/dense reads use O_DIRECT.
func (e *Engine) ODirect() bool { return e.files != nil && e.files.ODirect() }

// NewState allocates a KV cache.
func (e *Engine) NewState(nCtx int, kv model.KVType) (*model.State, error) {
	return e.model.NewState(nCtx, kv)
}

// Forward feeds tokens through the model with this engine as its MoE.
func (e *Engine) Forward(ctx context.Context, st *model.State, tokens []int32, all bool) ([][]float32, error) {
	return e.model.Forward(ctx, st, tokens, e, all)
}

// SetStep names the decode step subsequent Forward calls belong to (for the
// cache's batch bookkeeping and the route trace).
func (e *Engine) SetStep(step int) { e.step = step }

// RunMoE implements model.MoE: the per-layer pipeline.
func (e *Engine) RunMoE(ctx context.Context, layer int, x, logits [][]float32, out [][]float32) error {
	spec := e.model.Router(layer)
	n := len(x)
	if cap(e.routeIDs) < n {
		e.routeIDs = make([][]int, n)
		e.routeW = make([][]float32, n)
	}
	ids, ws := e.routeIDs[:n], e.routeW[:n]
	if len(e.probs) < spec.NExpert {
		e.probs = make([]float32, spec.NExpert)
	}
	t0 := time.Now()
	for t := 0; t < n; t++ {
		if cap(ids[t]) < spec.K {
			ids[t] = make([]int, spec.K)
			ws[t] = make([]float32, spec.K)
		}
		ids[t], ws[t] = ids[t][:spec.K], ws[t][:spec.K]
		if err := router.Route(spec, logits[t], ids[t], ws[t], e.probs); err != nil {
			return fmt.Errorf("layer %d: %w", layer, err)
		}
	}
	job := &ffn.Job{Layer: layer, K: spec.K, X: x, IDs: ids, W: ws, Out: out}
	job.Plan()
	e.ffn.Begin(job)
	var st ffn.Stats
	st.Compute += time.Since(t0)
	if e.OnRoute != nil {
		e.OnRoute(e.step, layer, ids, ws)
	}
	var err error
	if e.cache == nil {
		err = e.runMapped(ctx, job, &st)
	} else {
		err = e.runStream(ctx, job, &st)
	}
	if err != nil {
		return err
	}
	e.ffn.Finish(job, &st)
	e.acc.stall += st.Stall
	e.acc.compute += st.Compute
	e.experts += st.Compute
	e.stallTotal += st.Stall
	return nil
}

func (e *Engine) runMapped(ctx context.Context, job *ffn.Job, st *ffn.Stats) error {
	ch := make(chan ffn.Ready, len(job.Order))
	for _, x := range job.Order {
		rs := e.layout.ranges[job.Layer][x]
		parts := make([][]byte, len(rs))
		for i, r := range rs {
			b, err := e.mapped.slice(r.Shard, r.Off, r.Len)
			if err != nil {
				return fmt.Errorf("layer %d expert %d: %w", job.Layer, x, err)
			}
			parts[i] = b
		}
		ch <- ffn.Ready{Expert: x, Parts: parts}
	}
	return e.ffn.Consume(ctx, job, ch, len(job.Order), true, st)
}

func (e *Engine) runStream(ctx context.Context, job *ffn.Job, st *ffn.Stats) error {
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
		out := make(chan ffn.Ready, len(w))
		done := make(chan error, 1)
		var routed []int
		if first {
			routed = job.Order
		}
		select {
		case e.plans <- planReq{step: e.step, layer: job.Layer, experts: w, routed: routed, out: out, done: done, specLayer: e.temporalSpec(job.Layer)}:
		case <-ctx.Done():
			return ctx.Err()
		case <-e.ctx.Done():
			return e.stageErr()
		}
		if first {
			e.speculateNext(job)
			first = false
		}
		cerr := e.ffn.Consume(ctx, job, out, len(w), e.cfg.Overlap, st)
		var perr error
		select {
		case perr = <-done:
		case <-e.ctx.Done():
			perr = e.stageErr()
		}
		if cerr != nil {
			return cerr
		}
		if perr != nil {
			return perr
		}
	}
	return nil
}

// temporalSpec is the layer a history-based policy speculates for after
// layer's demand (-1: none; the next-layer policy sends its own request).
func (e *Engine) temporalSpec(layer int) int {
	if e.pfPolicy == nil || e.peeker != nil {
		return -1
	}
	return layer + 1
}

// speculateNext applies layer+1's router to this layer's input (decode only:
// a prefill reads nearly every expert anyway) and hands the guess to the
// planner without blocking: speculation is dropped when the planner is busy.
func (e *Engine) speculateNext(job *ffn.Job) {
	if e.peeker == nil || len(job.X) != 1 || job.Layer+1 >= len(e.layout.ranges) {
		return
	}
	next := job.Layer + 1
	spec := e.model.Router(next)
	if len(e.peekLogits) < spec.NExpert {
		e.peekLogits = make([]float32, spec.NExpert)
		e.probs = make([]float32, spec.NExpert)
	}
	t0 := time.Now()
	err := e.peeker.PeekRouter(next, job.X[0], e.peekLogits)
	spec.K = min(e.cfg.Prefetch, spec.NExpert)
	e.peekIDs = make([]int, spec.K)
	e.peekW = make([]float32, spec.K)
	if err == nil {
		err = router.Route(spec, e.peekLogits[:spec.NExpert], e.peekIDs, e.peekW, e.probs)
	}
	e.timings.Router += time.Since(t0)
	if err != nil {
		return
	}
	select {
	case e.plans <- planReq{step: e.step, layer: next, specLayer: next, guess: e.peekIDs}:
	default:
	}
}

func (e *Engine) stageErr() error {
	if err := context.Cause(e.ctx); err != nil {
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
	total := e.timings.Attention + e.timings.Router + e.timings.LMHead + e.timings.Embed
	s, c := e.acc.stall, e.acc.compute+total-e.acc.model
	e.acc = stepAcc{model: total}
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
	return Profile{Timings: e.timings, Experts: e.experts, Stall: e.stallTotal}
}

// PlannerStats returns the planner's cumulative counters (ok is false when
// not streaming).
func (e *Engine) PlannerStats() (st prefetch.Stats, ok bool) {
	if e.planner == nil {
		return st, false
	}
	return e.planner.Stats(), true
}

// ResidentFrac samples the resident fraction of the dense weights.
func (e *Engine) ResidentFrac() float64 { return residentFrac(e.dense) }

// Close stops the pipeline, waits for its goroutines and frees memory.
func (e *Engine) Close() error {
	if e.cancel != nil {
		e.cancel()
	}
	var errs []error
	if e.lanes != nil {
		e.lanes.Close()
	}
	if e.group != nil {
		if err := e.group.Wait(); err != nil && !errors.Is(err, context.Canceled) {
			errs = append(errs, err)
		}
	}
	if e.planner != nil {
		e.planner.Close()
	}
	if e.cache != nil {
		errs = append(errs, e.cache.Close())
		e.cache = nil
	}
	if e.files != nil {
		errs = append(errs, e.files.Close())
		e.files = nil
	}
	if e.pool != nil {
		e.pool.Close()
		e.pool = nil
	}
	if e.mapped != nil {
		e.mapped.close()
		e.mapped = nil
	}
	if e.anon != nil {
		e.anon.close()
		e.anon = nil
	}
	return errors.Join(errs...)
}

// Rusage is the process's cumulative major faults and CPU time.
func Rusage() (majflt int64, cpu time.Duration) {
	var ru syscall.Rusage
	if err := syscall.Getrusage(syscall.RUSAGE_SELF, &ru); err != nil {
		return 0, 0
	}
	cpu = time.Duration(ru.Utime.Nano() + ru.Stime.Nano())
	return ru.Majflt, cpu
}

// ProcReadBytes is the process's cumulative storage read bytes
// (/proc/self/io read_bytes), or -1 when unavailable.
func ProcReadBytes() int64 {
	b, err := os.ReadFile("/proc/self/io")
	if err != nil {
		return -1
	}
	var v int64 = -1
	for _, line := range strings.Split(string(b), "\n") {
		if n, ok := cutInt(line, "read_bytes: "); ok {
			v = n
		}
	}
	return v
}

// cutInt parses the integer after prefix on line.
func cutInt(line, prefix string) (int64, bool) {
	rest, ok := strings.CutPrefix(line, prefix)
	if !ok {
		return 0, false
	}
	n, err := strconv.ParseInt(strings.TrimSpace(rest), 10, 64)
	return n, err == nil
}
