package stages

import (
	"time"

	"github.com/pipe-engine/pipe/metrics"
)

// layerLog records a prompt pass layer by layer (metrics.Layer rows):
// Session.Prefill turns it on for the pass, the pipeline adds a row at the
// end of every MoE layer. The marks are the cumulative values at the end of
// the last row, so each row is a difference of the quantities the engine's
// counters and the meter already define: no second definition.
type layerLog struct {
	on    bool
	rows  []metrics.Layer
	pass  int
	last  int              // layer of the last row (-1: none in this pass)
	t0    time.Time        // end of the last row, or the pass's start
	c0    metrics.Counters // the source's counters (stall the meter's) then
	comp0 time.Duration    // the meter's compute then (model sections + FFN stage)
}

// start begins a prompt pass's rows (the previous pass's are dropped).
func (l *layerLog) start(p *pipeline) {
	*l = layerLog{on: true, rows: l.rows[:0], last: -1, pass: -1}
	l.mark(p, time.Now())
}

// stop ends the recording; the rows stay until the next start.
func (l *layerLog) stop() { l.on = false }

// mark takes the cumulative values a row is measured from.
func (l *layerLog) mark(p *pipeline, now time.Time) {
	l.t0 = now
	l.c0 = counters(p)
	l.comp0 = p.meter.modelTime() + p.meter.experts
}

// counters are the source's cumulative counters with the meter's stall.
func counters(p *pipeline) metrics.Counters {
	c := p.src.report().Counters
	c.Stall = p.meter.stall
	return c
}

// row adds layer's row: the span since the last mark.
func (l *layerLog) row(p *pipeline, layer, tokens int) {
	if l.pass < 0 || layer <= l.last {
		l.pass++
	}
	now := time.Now()
	c1 := counters(p)
	d := c1.Sub(l.c0)
	d.Prompt, d.Decode = d.Decode, metrics.Lookups{} // the source counts every lookup as Decode
	comp := p.meter.modelTime() + p.meter.experts
	l.rows = append(l.rows, metrics.Layer{Pass: l.pass, Layer: layer, Tokens: tokens,
		Wall: now.Sub(l.t0), Compute: comp - l.comp0, Counters: d})
	l.last = layer
	l.t0, l.c0, l.comp0 = now, c1, comp
}
