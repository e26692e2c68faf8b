package sink

import (
	"fmt"
	"strings"
	"sync"
	"time"

	"github.com/pipe-engine/pipe/internal/status"
	"github.com/pipe-engine/pipe/metrics"
)

// Progress is the `--progress` live status line: a status.Line redrawn
// after every token:
//
//	token 12/256  4.93 tok/s (this 5.01)  hit 45.2%  read 218 MiB/tok  ETA 49s
//
// It keeps running sums only (tokens, wall time), so a long run costs it
// nothing per token. A nil *Progress is valid and does nothing. Progress is
// safe for concurrent use.
type Progress struct {
	mu     sync.Mutex
	line   *status.Line
	tokens int
	wallMS float64
}

// NewProgress returns a per-token status line drawn on line, or nil when
// line is nil (no terminal: redirected stderr never fills with carriage
// returns).
func NewProgress(line *status.Line) *Progress {
	if line == nil {
		return nil
	}
	return &Progress{line: line}
}

// Update counts token m and redraws the line.
func (p *Progress) Update(m metrics.Token) {
	if p == nil {
		return
	}
	p.mu.Lock()
	defer p.mu.Unlock()
	p.tokens++
	p.wallMS += m.WallMS
	var b strings.Builder
	if m.Steps > 0 {
		fmt.Fprintf(&b, "token %d/%d", m.Step, m.Steps)
	} else {
		fmt.Fprintf(&b, "token %d", m.Step)
	}
	if p.wallMS > 0 {
		fmt.Fprintf(&b, "  %.2f tok/s", float64(p.tokens)*1000/p.wallMS)
	}
	if m.WallMS > 0 {
		fmt.Fprintf(&b, " (this %.2f)", 1000/m.WallMS)
	}
	if m.CacheHitPct >= 0 {
		fmt.Fprintf(&b, "  hit %.1f%%", m.CacheHitPct)
	}
	fmt.Fprintf(&b, "  read %.0f MiB/tok", float64(m.ReadBytes)/(1<<20))
	if left := m.Steps - m.Step; left > 0 && p.wallMS > 0 {
		eta := time.Duration(float64(left) * p.wallMS / float64(p.tokens) * float64(time.Millisecond))
		fmt.Fprintf(&b, "  ETA %s", eta.Round(time.Second))
	}
	p.line.Set(b.String())
}

// Done ends the status line (a newline), leaving the last state visible.
func (p *Progress) Done() {
	if p == nil {
		return
	}
	p.line.Done()
}
