package sink

import (
	"fmt"
	"io"
	"os"
	"strings"
	"sync"
	"time"
	"unicode/utf8"

	"golang.org/x/term"

	"github.com/pipe-engine/pipe/metrics"
)

// Progress is the `--progress` live status line: one line on a terminal,
// rewritten in place with a carriage return after every token:
//
//	token 12/256  4.93 tok/s (this 5.01)  hit 45.2%  read 218 MiB/tok  ETA 49s
//
// A nil *Progress is valid and does nothing. Progress is safe for concurrent
// use.
type Progress struct {
	mu      sync.Mutex
	w       io.Writer
	lastLen int
	dirty   bool
}

// NewProgress returns a status line on w if w is a terminal, else nil (so
// redirected stderr never fills with carriage returns).
func NewProgress(w io.Writer) *Progress {
	f, ok := w.(*os.File)
	if !ok || !term.IsTerminal(int(f.Fd())) {
		return nil
	}
	return &Progress{w: w}
}

// NewProgressTo returns a status line on w unconditionally (tests, or a
// caller that has decided itself).
func NewProgressTo(w io.Writer) *Progress { return &Progress{w: w} }

// Update redraws the line for token m; rows are all tokens so far (m last).
func (p *Progress) Update(m metrics.Token, rows []metrics.Token) {
	if p == nil {
		return
	}
	var wall float64
	for _, r := range rows {
		wall += r.WallMS
	}
	var b strings.Builder
	if m.Steps > 0 {
		fmt.Fprintf(&b, "token %d/%d", m.Step, m.Steps)
	} else {
		fmt.Fprintf(&b, "token %d", m.Step)
	}
	if wall > 0 {
		fmt.Fprintf(&b, "  %.2f tok/s", float64(len(rows))*1000/wall)
	}
	if m.WallMS > 0 {
		fmt.Fprintf(&b, " (this %.2f)", 1000/m.WallMS)
	}
	if m.CacheHitPct >= 0 {
		fmt.Fprintf(&b, "  hit %.1f%%", m.CacheHitPct)
	}
	fmt.Fprintf(&b, "  read %.0f MiB/tok", float64(m.ReadBytes)/(1<<20))
	if left := m.Steps - m.Step; left > 0 && len(rows) > 0 && wall > 0 {
		eta := time.Duration(float64(left) * wall / float64(len(rows)) * float64(time.Millisecond))
		fmt.Fprintf(&b, "  ETA %s", eta.Round(time.Second))
	}
	line := b.String()
	p.mu.Lock()
	defer p.mu.Unlock()
	n := utf8.RuneCountInString(line)
	pad := ""
	if p.lastLen > n {
		pad = strings.Repeat(" ", p.lastLen-n)
	}
	p.lastLen = n
	p.dirty = true
	io.WriteString(p.w, "\r"+line+pad)
}

// Done ends the status line (a newline), leaving the last state visible.
func (p *Progress) Done() {
	if p == nil {
		return
	}
	p.mu.Lock()
	defer p.mu.Unlock()
	if p.dirty {
		io.WriteString(p.w, "\n")
		p.dirty = false
		p.lastLen = 0
	}
}
