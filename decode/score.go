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
// during the call). It samples nothing and writes no CSV row; progress is
// reported as a prompt pass's. `pipe perplexity` (package quality) drives
// it. A session of size 0 is sized to len(ids).
func (s *Session) Score(ctx context.Context, ids []int32, from int, fn func(pos int, logits []float32) error) (time.Duration, error) {
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
	d, err := s.st.Score(ctx, ids, from, fn)
	s.m.forwards++
	if err != nil {
		return d, err
	}
	s.hist = append(s.hist, ids...)
	return d, nil
}

// SetSummary adds (or replaces) a key of the run summary: the CSV's
// `# summary` trailer and the `summary` event written at Close.
func (m *Model) SetSummary(key string, value any) { m.sink.Set(key, value) }
