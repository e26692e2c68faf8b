package replay

import (
	"bufio"
	"errors"
	"fmt"
	"io"
	"strconv"
	"strings"
)

// ErrWriter is wrapped by errors about arguments a TraceWriter cannot write.
var ErrWriter = errors.New("replay: trace writer")

// TraceWriter writes route_trace v1. The preamble is written by the first
// Route (or by Close for an empty trace). Each Route call writes one row per
// routed slot; expert_bytes is the layer's expert size for a non-resident
// expert the first time it appears in its lookup batch and 0 otherwise, as in
// the field's traces. Not safe for concurrent use.
type TraceWriter struct {
	w        *bufio.Writer
	hdr      Header
	started  bool
	err      error
	batch    [4]int // turn, phase, step (-1 for prefill), layer of the current batch
	inBatch  bool
	readOnce map[int]bool // experts already charged in the current batch
	buf      []byte
}

// NewTraceWriter returns a writer that emits hdr then rows to w.
func NewTraceWriter(w io.Writer, hdr Header) *TraceWriter {
	return &TraceWriter{w: bufio.NewWriterSize(w, 64*1024), hdr: hdr, readOnce: map[int]bool{}}
}

func (t *TraceWriter) start() error {
	if t.started {
		return t.err
	}
	t.started = true
	h := &t.hdr
	if len(h.Layers) != h.NLayer || h.NLayer <= 0 {
		t.err = fmt.Errorf("%w: header has %d layers, n_layer=%d", ErrWriter, len(h.Layers), h.NLayer)
		return t.err
	}
	for _, s := range []struct{ name, v string }{{"model", h.Model}, {"arch", h.Arch}} {
		if strings.ContainsAny(s.v, "\n\r") || strings.Contains(s.v, "=") {
			t.err = fmt.Errorf("%w: header %s %q contains a newline or '='", ErrWriter, s.name, s.v)
			return t.err
		}
	}
	fmt.Fprintf(t.w, "%s\n# model=%s arch=%s n_layer=%d n_expert=%d n_expert_used=%d\n",
		Magic, h.Model, h.Arch, h.NLayer, h.NExpert, h.NExpertUsed)
	for l, li := range h.Layers {
		fmt.Fprintf(t.w, "# layer=%d expert_bytes=%d dense_bytes=%d\n", l, li.ExpertBytes, li.DenseBytes)
	}
	_, t.err = t.w.WriteString(Columns + "\n")
	return t.err
}

// Route records the experts routed for one token at one layer: experts[i]
// with router weight weights[i], resident[i] telling whether it was cached
// when looked up. phase is PhasePrefill or PhaseDecode.
func (t *TraceWriter) Route(turn, phase, step, layer int, experts []int, weights []float32, resident []bool) error {
	if err := t.start(); err != nil {
		return err
	}
	if len(weights) != len(experts) || len(resident) != len(experts) {
		return fmt.Errorf("%w: %d experts, %d weights, %d residency flags", ErrWriter, len(experts), len(weights), len(resident))
	}
	if phase != PhasePrefill && phase != PhaseDecode {
		return fmt.Errorf("%w: phase %d (want 0 prefill or 1 decode)", ErrWriter, phase)
	}
	if layer < 0 || layer >= t.hdr.NLayer || turn < 0 || step < 0 {
		return fmt.Errorf("%w: turn %d step %d layer %d out of range (n_layer=%d)", ErrWriter, turn, step, layer, t.hdr.NLayer)
	}
	for _, e := range experts {
		if e < 0 || e >= t.hdr.NExpert {
			return fmt.Errorf("%w: expert %d out of range (n_expert=%d)", ErrWriter, e, t.hdr.NExpert)
		}
	}
	bs := step
	if phase == PhasePrefill {
		bs = -1
	}
	key := [4]int{turn, phase, bs, layer}
	if !t.inBatch || key != t.batch {
		t.batch, t.inBatch = key, true
		clear(t.readOnce)
	}
	eb := t.hdr.Layers[layer].ExpertBytes
	for i, e := range experts {
		var bytes int64
		if !resident[i] && !t.readOnce[e] {
			bytes = eb
			t.readOnce[e] = true
		}
		b := t.buf[:0]
		b = strconv.AppendInt(b, int64(turn), 10)
		b = append(b, ',')
		b = strconv.AppendInt(b, int64(phase), 10)
		b = append(b, ',')
		b = strconv.AppendInt(b, int64(step), 10)
		b = append(b, ',')
		b = strconv.AppendInt(b, int64(layer), 10)
		b = append(b, ',')
		b = strconv.AppendInt(b, int64(i), 10)
		b = append(b, ',')
		b = strconv.AppendInt(b, int64(e), 10)
		b = append(b, ',')
		b = strconv.AppendFloat(b, float64(weights[i]), 'g', -1, 32)
		if resident[i] {
			b = append(b, ",1,"...)
		} else {
			b = append(b, ",0,"...)
		}
		b = strconv.AppendInt(b, bytes, 10)
		b = append(b, '\n')
		t.buf = b
		if _, err := t.w.Write(b); err != nil {
			t.err = err
			return fmt.Errorf("replay: write trace: %w", err)
		}
	}
	return nil
}

// Close writes the preamble if nothing was routed and flushes. It does not
// close the underlying writer.
func (t *TraceWriter) Close() error {
	if err := t.start(); err != nil {
		return err
	}
	if err := t.w.Flush(); err != nil {
		return fmt.Errorf("replay: flush trace: %w", err)
	}
	return nil
}
