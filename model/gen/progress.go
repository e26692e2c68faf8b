package gen

import (
	"fmt"
	"io"
	"time"

	"github.com/pipe-engine/pipe/internal/status"
)

// progress shows generation progress: a bar on a terminal's status line, or
// a plain line on a writer every 10 % otherwise. A nil *progress draws
// nothing. Not safe for concurrent use (only the writing goroutine calls it).
type progress struct {
	line      *status.Line // the terminal's status line, or nil
	w         io.Writer    // plain lines, when line is nil
	total     int64
	label     string
	start     time.Time
	lastDecil int64
	done      int64
}

func newProgress(line *status.Line, w io.Writer, total int64, label string) *progress {
	if line == nil && w == nil {
		return nil
	}
	return &progress{line: line, w: w, total: max(total, 1), label: label, start: time.Now()}
}

func (p *progress) set(n int64) {
	if p == nil {
		return
	}
	p.done = n
	if p.line != nil {
		p.line.Update(p.bar)
		return
	}
	if d := min(n*10/p.total, 10); d > p.lastDecil {
		p.lastDecil = d
		p.plain()
	}
}

func (p *progress) rate() (mibps float64, eta time.Duration) {
	el := time.Since(p.start).Seconds()
	if el <= 0 {
		return 0, 0
	}
	bps := float64(p.done) / el
	if bps > 0 && p.done < p.total {
		eta = time.Duration(float64(p.total-p.done) / bps * float64(time.Second))
	}
	return bps / (1 << 20), eta
}

func (p *progress) bar() string {
	frac := min(float64(p.done)/float64(p.total), 1)
	mib, eta := p.rate()
	return fmt.Sprintf("%s %s %5.1f%% %7.2f/%.2f GiB %6.0f MiB/s ETA %s", p.label, status.Bar(frac, 30), 100*frac,
		float64(p.done)/(1<<30), float64(p.total)/(1<<30), mib, eta.Round(time.Second))
}

func (p *progress) plain() {
	mib, eta := p.rate()
	fmt.Fprintf(p.w, "gen %s: %3d%% %.2f/%.2f GiB %.0f MiB/s ETA %s\n", p.label, min(p.done*100/p.total, 100),
		float64(p.done)/(1<<30), float64(p.total)/(1<<30), mib, eta.Round(time.Second))
}

// finish shows the final state: the bar, kept on screen, or the 100 % line.
func (p *progress) finish() {
	if p == nil {
		return
	}
	if p.line != nil {
		p.line.Set(p.bar())
		p.line.Done()
	} else if p.lastDecil < 10 {
		p.lastDecil = 10
		p.plain()
	}
}
