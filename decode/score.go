package decode

import (
	"context"
	"fmt"
	"time"

	"github.com/pipe-engine/pipe/model"
)

// Score evaluates ids as a new sequence from position 0 — whatever the
// session held is dropped — in one prompt pass, and calls fn with the
// logits of every position from `from` on, in order (a row is valid only
// during the call). batch is the tokens of one forward pass (<= 0: as a
// prompt pass; 1: one token a pass, as decode runs — the lossy routing
// modes apply only to such passes). It samples nothing and writes no CSV row; progress is
// reported as a prompt pass's. `pipe perplexity` (package quality) drives
// it. A session of size 0 is sized to len(ids).
func (s *Session) Score(ctx context.Context, ids []int32, from, batch int, fn func(pos int, logits []float32) error) (time.Duration, error) {
	if len(ids) == 0 {
		return 0, ErrEmptyPrompt
	}
	if s.st == nil {
		if err := s.size(len(ids)); err != nil {
			return 0, err
		}
	}
	if len(ids) > s.st.State.NCtx {
		return 0, fmt.Errorf("%w: %d tokens to score, -c is %d", model.ErrContextFull, len(ids), s.st.State.NCtx)
	}
	s.hist, s.unfed = s.hist[:0], -1
	s.m.active = s
	s.inPrefill = true
	s.prefill0, s.prefillN = 0, len(ids)
	defer func() { s.m.active, s.inPrefill = nil, false; s.turn++ }()
	d, err := s.st.Score(ctx, ids, from, batch, fn)
	s.m.forwards.Add(1)
	if err != nil {
		return d, err
	}
	s.hist = append(s.hist, ids...)
	return d, nil
}

// SetSummary adds (or replaces) a key of the run summary: the CSV's
// `# summary` trailer and the `summary` event written at Close.
func (m *Model) SetSummary(key string, value any) { m.sink.Set(key, value) }

// setLossy names the lossy modes that are on in the summary (moe_drop,
// moe_substitute, moe_dynamic_k; none when every mode is off).
func (m *Model) setLossy() {
	l := m.eng.Config().Lossy
	for _, f := range []struct {
		key string
		v   float32
	}{{"moe_drop", l.Drop}, {"moe_substitute", l.Substitute}, {"moe_dynamic_k", l.DynamicK}} {
		if f.v != 0 {
			m.sink.Set(f.key, f.v)
		}
	}
}

// setSkips adds what the lossy modes skipped since Open to the summary.
func (m *Model) setSkips() {
	if !m.eng.Config().Lossy.On() {
		return
	}
	k := m.eng.Metrics().Counters.Skipped
	m.sink.Set("moe_routed", k.Routed)
	m.sink.Set("moe_dropped", k.Dropped)
	m.sink.Set("moe_substituted", k.Substituted)
	m.sink.Set("moe_trimmed", k.Trimmed)
}
