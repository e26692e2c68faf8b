package main

import (
	"fmt"
	"io"
	"os"
	"slices"
	"syscall"

	"github.com/pipe-engine/pipe/decode"
	"github.com/pipe-engine/pipe/internal/status"
)

// Progress on a terminal: when stderr is a terminal and the log is for a
// person (not JSON), Globals.Status is a status line on it (package
// status), which the console log writes through. Long work draws on it —
// generating the demo model, loading the dense weights, a prompt pass — and
// it is cleared before any generated text is printed, so progress is never
// drawn over text; when stdout is the same terminal, log lines written
// while a reply streams wait for its end (status.Line.Hold). With a JSON log there is no status line at all: every
// line on stderr stays one JSON object.

// newStatusLine is the status line of a run whose stderr is stderr.
func newStatusLine(stderr io.Writer, jsonLog bool) *status.Line {
	if jsonLog {
		return nil
	}
	return status.New(stderr)
}

// showProgress draws the decode loop's progress of the given phases (all
// when none) on line; nil when there is no line.
func showProgress(line *status.Line, phases ...decode.Phase) func(decode.Progress) {
	if line == nil {
		return nil
	}
	return func(p decode.Progress) {
		if len(phases) > 0 && !slices.Contains(phases, p.Phase) {
			return
		}
		if p.Done >= p.Total {
			line.Clear()
			return
		}
		line.Update(func() string { return progressText(p) })
	}
}

// progressText is one progress line.
func progressText(p decode.Progress) string {
	frac := float64(p.Done) / float64(max(p.Total, 1))
	bar := status.Bar(frac, 24)
	switch p.Phase {
	case decode.PhaseLoad:
		return fmt.Sprintf("loading  %s %5.1f%%  %.2f/%.2f GiB of dense weights", bar, 100*frac,
			float64(p.Done)/(1<<30), float64(p.Total)/(1<<30))
	case decode.PhasePrefill:
		return fmt.Sprintf("prompt   %s %5.1f%%  %d tokens", bar, 100*frac, p.Tokens)
	}
	return fmt.Sprintf("%s %s %5.1f%%", p.Phase, bar, 100*frac)
}

// sameTerminal reports whether a and b are the same terminal (stdout and
// stderr of a run typed at a shell): a per-token status line on b would be
// drawn over the text written to a.
func sameTerminal(a, b io.Writer) bool {
	if !isTerminal(a) || !isTerminal(b) {
		return false
	}
	sa, sb := fileStat(a), fileStat(b)
	return sa != nil && sb != nil && sa.Rdev == sb.Rdev
}

func fileStat(w io.Writer) *syscall.Stat_t {
	f, ok := w.(*os.File)
	if !ok {
		return nil
	}
	fi, err := f.Stat()
	if err != nil {
		return nil
	}
	st, _ := fi.Sys().(*syscall.Stat_t)
	return st
}
