package stages

import (
	"cmp"
	"context"
	"errors"
	"fmt"

	"github.com/pipe-engine/pipe/cache"
	"github.com/pipe-engine/pipe/expert"
	"github.com/pipe-engine/pipe/ffn"
	"github.com/pipe-engine/pipe/metrics"
	"github.com/pipe-engine/pipe/model"
	"github.com/pipe-engine/pipe/prefetch"
	"github.com/pipe-engine/pipe/reader"
)

// streamSource reads routed experts into the expert cache (--moe-stream):
// the planner goroutine (prefetch.Planner.Run) looks each expert up and
// submits the misses to the reader lanes; hits and finished reads reach the
// FFN stage as expert.Ready values on out. It is built in two steps: open
// (speculation policy, cache, reader files and lanes, planner; enough for a
// warm start while the dense weights load), then begin once the model is
// built (speculation's early routers, the FFN stage, the planner goroutine).
type streamSource struct {
	cfg   *Resolved
	life  *lifetime
	meter *meter // the step of the pass; speculation's router time

	files   *reader.Files
	lanes   *reader.Lanes
	cache   *cache.Cache
	planner *prefetch.Planner
	spec    speculator
	ffn     *ffn.Stage

	plans      chan prefetch.Request // decode goroutine → planner goroutine (capacity 2)
	out        chan expert.Ready     // planner and lanes → FFN stage (capacity: experts per layer)
	done       chan error            // planner → decode goroutine: a request's lookups are issued (capacity 1)
	maxExperts int
	evicts     bool // the cache holds fewer slots than the model has experts: it will fill and evict
	layout     expertLayout
	filled     chan struct{} // closed when the cache fill has read every expert (nil: no fill)
	loaded     chan struct{} // closed by begin: the dense weights are loaded, the model built
}

// openStream starts what needs no model: the speculation policy, the
// expert cache, the reader lanes on the model's files (paths, its shards)
// and the planner, all from the resolved configuration.
func openStream(cfg *Resolved, d *model.Desc, l expertLayout, paths []string, life *lifetime, m *meter) (*streamSource, error) {
	s := &streamSource{cfg: cfg, life: life, meter: m, maxExperts: l.maxExperts(), loaded: make(chan struct{})}
	var pp prefetch.Policy
	var err error
	if cfg.Prefetch.N > 0 && cfg.Cache.Bytes > 0 {
		if pp, err = prefetch.NewPolicy(cfg.Prefetch.Policy, d.HParams.NLayer); err != nil {
			return s, fmt.Errorf("%w: --prefetch-policy: %w", ErrConfig, err)
		}
	}
	pol, err := cache.NewPolicy(cfg.Cache.Policy, cache.PolicyOptions{Layers: d.HParams.NLayer, Seed: 1})
	if err != nil {
		return s, fmt.Errorf("%w: %w", ErrConfig, err)
	}
	s.evicts = cfg.Cache.Bytes > 0 && cfg.Cache.Bytes/l.slotBytes < l.count()
	s.layout = l
	s.cache, err = cache.New(cache.Config{BudgetBytes: cfg.Cache.Bytes, SlotBytes: l.slotBytes, Policy: pol,
		TransientSlots: max(cfg.K, cache.DefaultTransientSlots), HugePages: !cfg.NoHugePages})
	if err != nil {
		return s, err
	}
	s.files, err = reader.Open(paths, reader.Options{NoODirect: cfg.IO.NoODirect, Open: cfg.IO.Open, Logf: func(format string, args ...any) {
		cfg.Log.Warn().Str("event", "odirect_fallback").Msgf(format, args...)
	}})
	if err != nil {
		return s, err
	}
	s.lanes, err = reader.Start(life.ctx, s.files, reader.LaneOptions{Lanes: cfg.IO.Lanes, SpecLanes: cfg.Prefetch.Lanes})
	if err != nil {
		return s, err
	}
	s.planner = prefetch.New(s.cache, s.lanes, l, pp, cfg.Prefetch.N)
	s.planner.OnWarm(cfg.onWarm)
	s.spec = speculator{policy: pp, n: cfg.Prefetch.N, layers: len(l.ranges), timings: &m.timings, clock: m.clock}
	return s, nil
}

// begin finishes the source once the model is built: speculation's early
// routers, the hand-off channels and the planner goroutine.
func (s *streamSource) begin(m model.Model, f *ffn.Stage, arch string) error {
	s.ffn = f
	defer close(s.loaded)
	// A cache that will fill within its first prompts has its memory
	// faulted in from now on, once the dense weights are loaded (started
	// with the cache, it took the load's pages and lengthened the load),
	// ahead of the first prompt pass's reads (cache.PrefaultAll).
	if s.evicts {
		s.cache.PrefaultAll()
	}
	if err := s.spec.begin(m, !s.cfg.Prefetch.NoPrompt, arch); err != nil {
		return err
	}
	s.plans = make(chan prefetch.Request, 2) // a demand request and the speculation that follows it
	s.renew()
	s.life.Go(func() error { return s.planner.Run(s.life.ctx, s.plans) })
	return nil
}

// renew makes fresh hand-off channels for a layer's experts.
func (s *streamSource) renew() {
	s.out = make(chan expert.Ready, s.maxExperts)
	s.done = make(chan error, 1)
}

// run sends the layer's experts to the planner goroutine in waves (one wave
// with overlap) and has the FFN stage consume them as they become ready.
// Requests and Ready values travel by value through the source's reusable
// channels; after an error the channels are replaced, in case the planner
// could still deliver into the old ones (only when the engine is closing: a
// wave is always consumed whole otherwise).
func (s *streamSource) run(ctx context.Context, job *ffn.Job, routerIn [][]float32, decode bool, st *ffn.Stats) error {
	err := s.waves(ctx, job, routerIn, decode, st)
	if err != nil {
		s.renew()
	}
	return err
}

func (s *streamSource) waves(ctx context.Context, job *ffn.Job, routerIn [][]float32, decode bool, st *ffn.Stats) error {
	order := job.Order
	// Without overlap the FFN waits for a whole wave; a wave must fit in the
	// slots that can be pinned at once (the transient pool is at least k).
	wave := len(order)
	if s.cfg.NoOverlap {
		wave = max(job.K, cache.DefaultTransientSlots)
	}
	life := s.life.ctx
	first := true
	for len(order) > 0 {
		w := order[:min(wave, len(order))]
		order = order[len(w):]
		var routed []int
		if first {
			routed = job.Order
		}
		req := prefetch.Request{Step: s.meter.step, Layer: job.Layer, Experts: w, Routed: routed, Out: s.out, Done: s.done,
			SpecLayer: s.spec.after(job.Layer)}
		select {
		case s.plans <- req:
		case <-ctx.Done():
			return ctx.Err()
		case <-life.Done():
			return cancelled(ctx, s.life.stageErr())
		}
		if first {
			if r, ok := s.spec.guess(s.meter.step, job.Layer, routerIn, decode); ok {
				select {
				case s.plans <- r:
				default: // the planner is busy: speculation is dropped
				}
			}
			first = false
		}
		// The wave is received under the engine's lifetime, not ctx: the
		// planner and lanes deliver every expert of it, and one left unread
		// in out would stay pinned in the cache for good. A cancelled ctx
		// stops its compute at once (the rest is received and released
		// uncomputed) and ends the pass.
		cerr := s.ffn.Consume(life, ctx, job, s.out, len(w), !s.cfg.NoOverlap, st)
		var perr error
		select {
		case perr = <-s.done:
		case <-life.Done():
			perr = s.life.stageErr()
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

func (s *streamSource) resident(key cache.Key) bool { return s.cache.Contains(key) }

func (s *streamSource) report() (m Metrics) {
	ps := s.planner.Stats()
	c := &m.Counters
	c.Streaming, c.Cached = true, s.cfg.Cache.Bytes > 0
	c.Decode = metrics.Lookups{Hits: ps.Hits, Joins: ps.Joins, Misses: ps.Misses}
	c.IOBusy, c.ReadBytes = s.lanes.Totals()
	cs := s.cache.Stats()
	c.Mgmt, c.SlotWait = cs.Mgmt, cs.WaitTime
	m.ODirect = s.files.ODirect()
	m.Speculation = ps
	m.WarmStarted, m.Warm = s.spec.warm, s.planner.WarmStats()
	m.Fill = s.planner.FillStats()
	return m
}

func (s *streamSource) stop() {
	if s.lanes != nil {
		s.lanes.Close()
	}
}

func (s *streamSource) close() error {
	if s.planner != nil {
		s.planner.Close()
	}
	var errs []error
	if s.cache != nil {
		errs = append(errs, s.cache.Close())
	}
	if s.files != nil {
		errs = append(errs, s.files.Close())
	}
	return errors.Join(errs...)
}
