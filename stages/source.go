package stages

import (
	"context"
	"fmt"

	"github.com/pipe-engine/pipe/cache"
	"github.com/pipe-engine/pipe/dense"
	"github.com/pipe-engine/pipe/expert"
	"github.com/pipe-engine/pipe/ffn"
)

// An expertSource is where a layer's routed experts come from: the seam
// between the pipeline (router → FFN) and the bytes. The engine has one for
// its life: a mappedSource when nothing streams, a streamSource (cache,
// reader lanes, planner, speculation) with --moe-stream.
type expertSource interface {
	// run hands the FFN stage every expert of job (job.Order, planned and
	// begun) and returns once each is computed or on the first error; no
	// expert it handed on is left pinned. routerIn is the layer's router
	// input, for speculation; decode: every row is a decode step's token
	// (a batch of decode steps speculates as decode steps do).
	run(ctx context.Context, job *ffn.Job, routerIn [][]float32, decode bool, st *ffn.Stats) error
	// resident reports whether the bytes of (layer, expert) are in memory
	// now, so a lookup would hit.
	resident(key cache.Key) bool
	// report returns the source's part of the engine's metrics: lookups
	// (all in Counters.Decode), bytes read, I/O and bookkeeping time,
	// speculation and warm start. (A value, not a pointer to fill: that
	// would escape through the interface and allocate on every token.)
	report() Metrics
	// stop ends the source's own workers (the reader lanes) once the
	// engine's context is cancelled, before the engine waits for its
	// goroutines; close then frees what the source holds.
	stop()
	close() error
}

// mappedSource hands the FFN stage slices of the whole-file mapping
// (--moe-stream=false): every expert is there, as the page cache has it.
type mappedSource struct {
	weights *dense.Weights
	layout  expertLayout
	ffn     *ffn.Stage
	parts   [][][][]byte // [layer][expert] projection slices, made on first use
	ready   []expert.Ready
}

func newMappedSource(w *dense.Weights, l expertLayout, f *ffn.Stage) *mappedSource {
	return &mappedSource{weights: w, layout: l, ffn: f, parts: make([][][][]byte, len(l.ranges))}
}

func (m *mappedSource) run(ctx context.Context, job *ffn.Job, _ [][]float32, _ bool, st *ffn.Stats) error {
	rs := m.ready[:0]
	for _, x := range job.Order {
		parts, err := m.expertParts(job.Layer, x)
		if err != nil {
			return fmt.Errorf("layer %d expert %d: %w", job.Layer, x, err)
		}
		rs = append(rs, expert.Ready{Expert: x, Parts: parts})
	}
	m.ready = rs
	err := m.ffn.Compute(ctx, job, rs, st)
	clear(rs)
	return err
}

// expertParts returns (and keeps) the projection slices of an expert in the
// whole-file mapping.
func (m *mappedSource) expertParts(layer, x int) ([][]byte, error) {
	row := m.parts[layer]
	if row == nil {
		row = make([][][]byte, len(m.layout.ranges[layer]))
		m.parts[layer] = row
	}
	if row[x] != nil {
		return row[x], nil
	}
	rs := m.layout.ranges[layer][x]
	parts := make([][]byte, len(rs))
	for i, r := range rs {
		b, err := m.weights.Mapped(r.Shard, r.Off, r.Len)
		if err != nil {
			return nil, err
		}
		parts[i] = b
	}
	row[x] = parts
	return parts, nil
}

func (m *mappedSource) resident(cache.Key) bool { return false }

func (m *mappedSource) report() Metrics { return Metrics{} }

func (m *mappedSource) stop() {}

func (m *mappedSource) close() error { return nil }
