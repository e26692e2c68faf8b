// Package status draws one transient status line on a terminal: progress of
// long work (generating a model, loading one, a prompt pass) and the live
// per-token line of `pipe run --progress`.
//
// A Line is one line of text redrawn in place with a carriage return. Other
// output to the same terminal (the console log) goes through Writer, which
// erases the line, writes, and draws the line again below what was written,
// so log lines never end up inside the status line. Clear erases the line
// and leaves the cursor at the start of an empty line: a caller clears it
// before printing generated text, so progress is never drawn over text.
// Done ends the line with a newline, keeping its last state on screen.
// Hold makes Writer keep what it is given until Release, for the time
// generated text streams onto the same terminal: log lines then follow the
// text instead of cutting into it.
//
// Lines are erased with spaces, not escape sequences, so any terminal (and a
// test's buffer) shows the same thing; Fit keeps a line within the
// terminal's width so a carriage return always reaches its start.
//
// A nil *Line is valid and does nothing (no terminal). A Line is safe for
// concurrent use (one mutex); it never buffers, so after Clear returns
// nothing of the line is pending.
package status

import (
	"io"
	"os"
	"strings"
	"sync"
	"time"
	"unicode/utf8"

	"golang.org/x/term"
)

// Line is a status line on a terminal.
type Line struct {
	mu    sync.Mutex
	w     io.Writer
	width int              // terminal columns (0: unknown)
	text  string           // the line to show ("" = none)
	shown int              // runes of the line on screen
	last  time.Time        // last draw by Update
	now   func() time.Time // the clock Update throttles by (time.Now; tests set their own)
	held  []byte           // Writer's output kept by Hold
	hold  bool
	out   io.Writer // where held output goes (Writer's w)
}

// MaxHeld is how much output Hold keeps at most; beyond it, it is written.
const MaxHeld = 64 << 10

// New returns a Line on w if w is a terminal, else nil.
func New(w io.Writer) *Line {
	f, ok := w.(*os.File)
	if !ok || !term.IsTerminal(int(f.Fd())) {
		return nil
	}
	width, _, err := term.GetSize(int(f.Fd()))
	if err != nil {
		width = 0
	}
	return NewTo(w, width)
}

// NewTo returns a Line on w unconditionally (New once w is known to be a
// terminal, tests, or a caller that has decided itself), width columns wide
// (0: unknown).
func NewTo(w io.Writer, width int) *Line { return &Line{w: w, width: width, now: time.Now} }

// Interval is how often Update redraws at most.
const Interval = 100 * time.Millisecond

// Set shows text now.
func (l *Line) Set(text string) {
	if l == nil {
		return
	}
	l.mu.Lock()
	defer l.mu.Unlock()
	l.text = l.fit(text)
	l.draw()
	l.last = l.now()
}

// Update shows text unless the line was drawn less than Interval ago (text
// is built by the caller only when it will be shown: pass a function).
func (l *Line) Update(text func() string) {
	if l == nil {
		return
	}
	l.mu.Lock()
	defer l.mu.Unlock()
	if now := l.now(); now.Sub(l.last) >= Interval {
		l.text = l.fit(text())
		l.draw()
		l.last = now
	}
}

// Clear erases the line.
func (l *Line) Clear() {
	if l == nil {
		return
	}
	l.mu.Lock()
	defer l.mu.Unlock()
	l.erase()
	l.text = ""
	l.last = time.Time{}
}

// Done ends the line with a newline if one is shown, leaving it on screen.
func (l *Line) Done() {
	if l == nil {
		return
	}
	l.mu.Lock()
	defer l.mu.Unlock()
	if l.shown > 0 {
		io.WriteString(l.w, "\n")
	}
	l.shown, l.text, l.last = 0, "", time.Time{}
}

// Writer returns a writer for other output to the same terminal: each write
// erases the line, writes p, and draws the line again when p ends a line.
// With a nil Line it returns w itself.
func (l *Line) Writer(w io.Writer) io.Writer {
	if l == nil {
		return w
	}
	return passWriter{l: l, w: w}
}

type passWriter struct {
	l *Line
	w io.Writer
}

func (p passWriter) Write(b []byte) (int, error) {
	l := p.l
	l.mu.Lock()
	defer l.mu.Unlock()
	if l.hold && len(l.held)+len(b) <= MaxHeld {
		l.held = append(l.held, b...)
		l.out = p.w
		return len(b), nil
	}
	l.erase()
	n, err := p.w.Write(b)
	if l.text != "" && len(b) > 0 && b[len(b)-1] == '\n' {
		l.draw()
	}
	return n, err
}

// Hold keeps Writer's output until Release.
func (l *Line) Hold() {
	if l == nil {
		return
	}
	l.mu.Lock()
	defer l.mu.Unlock()
	l.hold = true
}

// Release writes what was held and lets Writer's output through again.
func (l *Line) Release() {
	if l == nil {
		return
	}
	l.mu.Lock()
	defer l.mu.Unlock()
	l.hold = false
	if len(l.held) > 0 {
		l.erase()
		l.out.Write(l.held)
		l.held = l.held[:0]
		if l.text != "" {
			l.draw()
		}
	}
}

// draw writes the current text over what is shown (l.mu held).
func (l *Line) draw() {
	n := utf8.RuneCountInString(l.text)
	pad := ""
	if l.shown > n {
		pad = strings.Repeat(" ", l.shown-n)
	}
	io.WriteString(l.w, "\r"+l.text+pad)
	l.shown = n
}

// erase blanks what is shown and returns the cursor to the line's start
// (l.mu held).
func (l *Line) erase() {
	if l.shown == 0 {
		return
	}
	io.WriteString(l.w, "\r"+strings.Repeat(" ", l.shown)+"\r")
	l.shown = 0
}

// fit cuts text to one column less than the terminal's width.
func (l *Line) fit(text string) string {
	if l.width <= 1 || utf8.RuneCountInString(text) < l.width {
		return text
	}
	r := []rune(text)
	return string(r[:l.width-1])
}

// Bar is a progress bar of width cells for frac in [0, 1].
func Bar(frac float64, width int) string {
	full := int(min(max(frac, 0), 1) * float64(width))
	return strings.Repeat("█", full) + strings.Repeat("░", width-full)
}
