package stages

import "github.com/pipe-engine/pipe/metrics"

// Counters are the engine's cumulative expert counters since Open (see
// metrics.Counters for what each counts). Read them on the goroutine that
// drives the engine, between forward passes.
func (e *Engine) Counters() metrics.Counters {
	c := metrics.Counters{Stall: e.meter.stall, Prompt: e.meter.prompt}
	if e.io == nil {
		return c
	}
	c.Streaming, c.Cached = true, e.cfg.Cache.Bytes > 0
	c.Decode = e.lookups().Sub(e.meter.prompt)
	c.IOBusy, c.ReadBytes = e.io.lanes.Totals()
	c.Mgmt = e.io.cache.Stats().Mgmt
	return c
}

// lookups are the planner's demand lookups since Open, of every pass.
func (e *Engine) lookups() metrics.Lookups {
	if e.io == nil {
		return metrics.Lookups{}
	}
	ps := e.io.planner.Stats()
	return metrics.Lookups{Hits: ps.Hits, Joins: ps.Joins, Misses: ps.Misses}
}
