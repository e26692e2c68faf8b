package stages

import (
	"time"

	"github.com/pipe-engine/pipe/metrics"
	"github.com/pipe-engine/pipe/model"
	"github.com/pipe-engine/pipe/prefetch"
	"github.com/pipe-engine/pipe/warmstart"
)

// Metrics is a snapshot of the engine's cumulative counters since Open
// (Engine.Metrics), one value for every reader.
type Metrics struct {
	// Counters are the expert counters every front end reports (hit rate,
	// bytes read, stall; see metrics.Counters).
	Counters metrics.Counters
	// Profile is where the decode goroutine's time went.
	Profile Profile
	// Speculation are the planner's counters, Warm the warm start's
	// (WarmStarted: one was started), Fill the cache fill's (--cache-fill);
	// zero when nothing streams.
	Speculation prefetch.Stats
	Warm        warmstart.Stats
	WarmStarted bool
	Fill        warmstart.Stats
	// ODirect: expert and dense reads use O_DIRECT.
	ODirect bool
	// Load is how long Open took.
	Load time.Duration
}

// Profile is where the decode goroutine's time went: the model's sections
// and the FFN stage's compute (routing, expert FFNs and the weighted sum);
// its waits are Counters.Stall.
type Profile struct {
	model.Timings
	Experts time.Duration
}

// Metrics returns the engine's counters. Call it on the goroutine that
// drives the engine, between forward passes; it allocates nothing.
func (e *Engine) Metrics() Metrics {
	m := e.src.report()
	c := &m.Counters
	c.Decode = c.Decode.Sub(e.meter.prompt)
	c.Prompt, c.Stall = e.meter.prompt, e.meter.stall
	c.Skipped = e.pipe.skips()
	m.Profile = Profile{Timings: e.meter.timings, Experts: e.meter.experts}
	m.Load = e.meter.load
	return m
}

// lookups are the source's demand lookups since Open, of every pass.
func (e *Engine) lookups() metrics.Lookups {
	return e.src.report().Counters.Decode
}
