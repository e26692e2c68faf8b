package main

import (
	"bytes"
	"io"
	"os"
	"slices"
	"strings"
	"sync"

	"github.com/mattn/go-isatty"
	"github.com/rs/zerolog"
)

// Machine-readable stderr: when the log is JSON (stderr is not a terminal,
// or --log-format json), every line pipe writes on stderr is one JSON
// object. Packages that print plain progress or error lines get an
// eventLines writer in place of stderr, which logs each line as an event.

// isTerminal reports whether w is a terminal.
func isTerminal(w io.Writer) bool {
	f, ok := w.(*os.File)
	return ok && (isatty.IsTerminal(f.Fd()) || isatty.IsCygwinTerminal(f.Fd()))
}

// jsonLog is the log-format rule of newLogger: JSON unless the format is
// console, or auto on a terminal.
func jsonLog(format string, stderr io.Writer) bool {
	return format == "json" || (format == "auto" && !isTerminal(stderr))
}

// jsonLogArgs applies the rule before the command line is parsed (for its
// own errors), from a --log-format the arguments may hold.
func jsonLogArgs(args []string, stderr io.Writer) bool {
	format := "auto"
	for i, a := range args {
		if v, ok := strings.CutPrefix(a, "--log-format="); ok {
			format = v
		} else if a == "--log-format" && i+1 < len(args) {
			format = args[i+1]
		}
	}
	return jsonLog(format, stderr)
}

// jsonErrors reports whether command (kong's name for it, e.g. "run" or
// "bench <extra>") reports its error as a JSON event when the log is JSON:
// every command under an explicit --log-format json; under auto the
// decoding commands, whose stderr is a log stream, while inspect, report
// and replay keep a plain "pipe: …" line for the person who ran them.
func jsonErrors(command string, explicit bool) bool {
	if explicit {
		return true
	}
	name, _, _ := strings.Cut(command, " ")
	switch name {
	case "run", "serve", "gen", "bench", "perplexity":
		return true
	}
	return false
}

// explicitJSON reports whether args ask for --log-format json.
func explicitJSON(args []string) bool {
	for i, a := range args {
		if a == "--log-format=json" || a == "--log-format" && i+1 < len(args) && args[i+1] == "json" {
			return true
		}
	}
	return false
}

// commandOf is the subcommand named in args before they are parsed: the
// first argument that is neither a flag nor a global flag's value.
func commandOf(args []string) string {
	for i := 0; i < len(args); i++ {
		switch a := args[i]; {
		case a == "--log-format" || a == "--log-level":
			i++
		case !strings.HasPrefix(a, "-"):
			return a
		}
	}
	return ""
}

// eventLines logs every line written to it as one zerolog event (message =
// the line, without a "pipe: " prefix). It is safe for concurrent use.
type eventLines struct {
	mu    sync.Mutex
	log   zerolog.Logger
	level zerolog.Level
	event string
	buf   []byte
}

func newEventLines(log zerolog.Logger, level zerolog.Level, event string) *eventLines {
	return &eventLines{log: log, level: level, event: event}
}

func (w *eventLines) Write(p []byte) (int, error) {
	w.mu.Lock()
	defer w.mu.Unlock()
	w.buf = append(w.buf, p...)
	for {
		i := slices.IndexFunc(w.buf, func(b byte) bool { return b == '\n' || b == '\r' })
		if i < 0 {
			return len(p), nil
		}
		w.emit(w.buf[:i])
		w.buf = w.buf[i+1:]
	}
}

func (w *eventLines) emit(line []byte) {
	msg := strings.TrimSpace(string(bytes.TrimPrefix(line, []byte("pipe: "))))
	if msg != "" {
		w.log.WithLevel(w.level).Str("event", w.event).Msg(msg)
	}
}
