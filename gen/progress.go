package gen

import (
	"fmt"
	"io"
	"strings"
	"time"
)

// progress draws generation progress on a writer (stderr): a bar redrawn in
// place on a terminal, or a plain line every 10 % otherwise. A nil *progress
// or a nil writer draws nothing. Not safe for concurrent use (only the writing
// goroutine calls it).
type progress struct {
	w         io.Writer
	tty       bool
	total     int64
	label     string
	start     time.Time
	lastDraw  time.Time
	lastDecil int64
	done      int64
}

func newProgress(w io.Writer, tty bool, total int64, label string) *progress {
	if w == nil {
		return nil
	}
	return &progress{w: w, tty: tty, total: max(total, 1), label: label, start: time.Now()}
}

func (p *progress) set(n int64) {
	if p == nil {
		return
	}
	p.done = n
	if p.tty {
		if now := time.Now(); now.Sub(p.lastDraw) >= 200*time.Millisecond {
			p.lastDraw = now
			p.draw(false)
		}
		return
	}
	if d := min(n*10/p.total, 10); d > p.lastDecil {
		p.lastDecil = d
		p.line()
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

func (p *progress) draw(final bool) {
	frac := min(float64(p.done)/float64(p.total), 1)
	const width = 30
	full := int(frac * width)
	bar := strings.Repeat("█", full) + strings.Repeat("░", width-full)
	mib, eta := p.rate()
	end := ""
	if final {
		end = "\n"
	}
	fmt.Fprintf(p.w, "\r%s %s %5.1f%% %7.2f/%.2f GiB %6.0f MiB/s ETA %-8s%s", p.label, bar, 100*frac,
		float64(p.done)/(1<<30), float64(p.total)/(1<<30), mib, eta.Round(time.Second), end)
}

func (p *progress) line() {
	mib, eta := p.rate()
	fmt.Fprintf(p.w, "gen %s: %3d%% %.2f/%.2f GiB %.0f MiB/s ETA %s\n", p.label, min(p.done*100/p.total, 100),
		float64(p.done)/(1<<30), float64(p.total)/(1<<30), mib, eta.Round(time.Second))
}

func (p *progress) finish() {
	if p == nil {
		return
	}
	if p.tty {
		p.draw(true)
	} else if p.lastDecil < 10 {
		p.lastDecil = 10
		p.line()
	}
}
