// Command pipe runs Mixture-of-Experts language models that are larger than
// the device's RAM by streaming their routed experts from flash.
//
// Flags are parsed here and only here (kong); every subcommand turns its flags
// into the options structs of the packages below it and calls them.
package main

import (
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"os/signal"
	"strings"
	"sync"
	"syscall"

	"github.com/alecthomas/kong"
	"github.com/rs/zerolog"

	"github.com/pipe-engine/pipe/internal/status"
	_ "github.com/pipe-engine/pipe/model/archs" // registers every architecture
	"github.com/pipe-engine/pipe/model/gen"
	"github.com/pipe-engine/pipe/sink"
)

// version is stamped at build time with -ldflags "-X main.version=…".
var version = "dev"

// CLI is the whole command line. Each subcommand lives in its own file.
type CLI struct {
	LogFormat string `help:"Log format on stderr: auto (console on a terminal, else json), json or console." enum:"auto,json,console" default:"auto"`
	LogLevel  string `help:"Minimum log level: debug, info, warn or error." enum:"debug,info,warn,error" default:"info"`
	Kernels   string `help:"Kernel set: auto (the measured table's for this CPU, else the fastest in a short calibration cached under the user cache directory) or a set this CPU runs (amd64: avx2, avx512vnni; arm64: sdot, neon; everywhere: purego). Every set computes the same bits; only the speed differs." env:"PIPE_KERNELS" default:"auto"`

	Version kong.VersionFlag `help:"Print the version and exit."`

	Run        RunCmd        `cmd:"" help:"Decode a prompt, streaming routed experts from flash (the main job)."`
	Serve      ServeCmd      `cmd:"" help:"Serve the model over an OpenAI-compatible HTTP API (chat and text completions, streaming)."`
	Gen        GenCmd        `cmd:"" help:"Write a synthetic model with the shapes, names, metadata and quantization mix of a real one."`
	Bench      BenchCmd      `cmd:"" help:"Run a matrix of pipe run configurations, and other engines' command lines (--peer), side by side (interleaved), optionally under a memory cap, and tabulate them."`
	Perplexity PerplexityCmd `cmd:"" help:"Perplexity of a model over a text, or its KL divergence from saved logits, as llama-perplexity computes them (streaming and capped like run)."`
	Inspect    InspectCmd    `cmd:"" help:"Show a GGUF model's architecture, hyper-parameters, tensors and expert/dense split."`
	Replay     ReplayCmd     `cmd:"" help:"Replay expert-routing traces through cache policies: hit % and MiB read per token per budget."`
	HotSet     HotSetCmd     `cmd:"" name:"hotset" help:"Build a model's hot set (for --warm-start) from a route trace."`
	Report     ReportCmd     `cmd:"" help:"Analyse per-token CSVs: mean and steady-window tok/s, warm-up, hit rate, regime verdict; compare runs; plot."`
}

// Globals are what every subcommand receives from main.
type Globals struct {
	Ctx    context.Context
	Log    zerolog.Logger
	Stdout io.Writer
	Stderr io.Writer
	// JSONLog: the log is JSON lines, so nothing may write plain lines on
	// stderr (wrap such writers with newEventLines).
	JSONLog bool
	// Status is the status line on a terminal stderr (nil: none; see
	// progress.go).
	Status *status.Line
	// SyncLog waits until every log line logged so far is on stderr (nil:
	// the log is written synchronously), so that what a command writes
	// to stderr directly comes after them.
	SyncLog func()
}

// logLines is how many log lines may wait for a slow stderr.
const logLines = 1024

// newLogger logs to out, as JSON lines when json (jsonLog's rule) says so,
// else in console format.
// The console format is coloured only when color (stderr is a terminal).
func newLogger(out io.Writer, json, color bool, level string) (zerolog.Logger, error) {
	lvl, err := zerolog.ParseLevel(level)
	if err != nil {
		return zerolog.Logger{}, fmt.Errorf("--log-level: %w", err)
	}
	if !json {
		out = zerolog.ConsoleWriter{Out: out, TimeFormat: "15:04:05.000", NoColor: !color}
	}
	return zerolog.New(out).Level(lvl).With().Timestamp().Logger(), nil
}

// parser builds the kong parser; tests use it to check the README's flag reference.
func parser(cli *CLI, stdout, stderr io.Writer, exit func(int)) (*kong.Kong, error) {
	return kong.New(cli,
		kong.Name("pipe"),
		kong.Description("Run Mixture-of-Experts models larger than RAM by streaming routed experts from flash."),
		kong.UsageOnError(),
		kong.Vars{"version": versionString(), "presets": strings.Join(gen.PresetNames(), ", ")},
		engineVars(),
		kong.Writers(stdout, stderr),
		kong.Exit(exit),
		kong.ConfigureHelp(kong.HelpOptions{WrapUpperBound: 100}),
	)
}

// run is main without os.Exit, for tests.
func run(ctx context.Context, args []string, stdout, stderr io.Writer) int {
	stdout, stderr = serialized(stdout, stderr)
	var cli CLI
	code := -1
	// errw is where error lines go: stderr, or JSON events when the log is
	// JSON (see jsonlines.go).
	errw := stderr
	if len(args) == 0 {
		// A bare `pipe`: what it can do, as --help says it.
		args = []string{"--help"}
	}
	if jsonLogArgs(args, stderr) && jsonErrors(commandOf(args), explicitJSON(args)) {
		errw = newEventLines(zerolog.New(stderr).With().Timestamp().Logger(), zerolog.ErrorLevel, "error")
	}
	k, err := parser(&cli, stdout, errw, func(c int) { code = c; panic(exitSignal{}) })
	if err != nil {
		fmt.Fprintf(errw, "pipe: %v\n", err)
		return 2
	}
	if args, err = translateArgs(args); err != nil {
		fmt.Fprintf(errw, "pipe: %v\n", err)
		return 2
	}
	var kctx *kong.Context
	func() {
		defer func() {
			if r := recover(); r != nil {
				if _, ok := r.(exitSignal); !ok {
					panic(r)
				}
			}
		}()
		kctx, err = k.Parse(args)
	}()
	if code >= 0 {
		return code
	}
	if err != nil {
		fmt.Fprintf(errw, "pipe: %v\n", err)
		return 2
	}
	// The log stage: log lines reach stderr through a bounded queue and a
	// goroutine, so a slow or blocked stderr does not stall decode.
	jl := jsonLog(cli.LogFormat, stderr)
	line := newStatusLine(stderr, jl)
	logs := sink.NewAsyncWriter(line.Writer(stderr), logLines)
	log, err := newLogger(logs, jl, isTerminal(stderr), cli.LogLevel)
	if err != nil {
		logs.Close()
		fmt.Fprintf(errw, "pipe: %v\n", err)
		return 2
	}
	g := &Globals{Ctx: ctx, Log: log, Stdout: stdout, Stderr: stderr, JSONLog: jl, Status: line, SyncLog: logs.Sync}
	if err = chooseKernels(cli.Kernels, log); err == nil {
		err = kctx.Run(g)
	}
	line.Release()
	logs.Close() // every log line before the exit message
	line.Clear()
	errw = stderr
	if g.JSONLog && jsonErrors(kctx.Command(), cli.LogFormat == "json") {
		errw = newEventLines(zerolog.New(stderr).With().Timestamp().Logger(), zerolog.ErrorLevel, "error")
	}
	if err != nil {
		return exitCode(ctx, err, errw)
	}
	return 0
}

// exitCode reports err and returns the exit status: 128+signal when a signal
// cancelled the run (130 for SIGINT, 143 for SIGTERM), 141 when stdout's
// reader went away, else 1.
func exitCode(ctx context.Context, err error, stderr io.Writer) int {
	var sig signalError
	switch {
	case errors.Is(err, context.Canceled) && errors.As(context.Cause(ctx), &sig):
		fmt.Fprintf(stderr, "pipe: interrupted by %v\n", sig.sig)
		return 128 + int(sig.sig)
	case errors.Is(err, context.Canceled):
		fmt.Fprintf(stderr, "pipe: interrupted\n")
		return 130
	case errors.Is(err, syscall.EPIPE):
		fmt.Fprintf(stderr, "pipe: %v\n", err)
		return 128 + int(syscall.SIGPIPE)
	}
	fmt.Fprintf(stderr, "pipe: %v\n", err)
	return 1
}

type exitSignal struct{}

// signalError is the cancellation cause of a run stopped by a signal.
type signalError struct{ sig syscall.Signal }

func (e signalError) Error() string { return "signal: " + e.sig.String() }

// handleSignals cancels the run on the first SIGINT, SIGTERM or SIGHUP (it
// stops within a layer, writes its outputs' trailers and exits 128+signal);
// a second one exits at once. A SIGINT during an interactive reply only
// stops that reply (interruptReply).
func handleSignals(cancel context.CancelCauseFunc, stderr io.Writer, exit func(int)) {
	ch := make(chan os.Signal, 2)
	signal.Notify(ch, os.Interrupt, syscall.SIGTERM, syscall.SIGHUP)
	go func() {
		first := (<-ch).(syscall.Signal)
		for first == syscall.SIGINT && interruptReply() {
			// Ctrl-C stopped an interactive reply; the session goes on.
			first = (<-ch).(syscall.Signal)
		}
		cancel(signalError{first})
		second := (<-ch).(syscall.Signal)
		fmt.Fprintf(stderr, "pipe: %v again: exiting now\n", second)
		exit(128 + int(second))
	}()
}

func main() {
	// A closed stdout (| head) is a write error that ends the run with its
	// CSV trailer, not a silent death by SIGPIPE.
	signal.Ignore(syscall.SIGPIPE)
	ctx, cancel := context.WithCancelCause(context.Background())
	handleSignals(cancel, os.Stderr, os.Exit)
	code := run(ctx, os.Args[1:], os.Stdout, os.Stderr)
	cancel(nil)
	os.Exit(code)
}

// serialized makes the writers safe for the goroutines that share them (the
// log stage writes stderr while the command writes stdout and stderr):
// files are already, other writers (a test's bytes.Buffer, possibly the same
// one for both) go through one mutex. Files are returned as they are, so
// terminal detection still sees them.
func serialized(stdout, stderr io.Writer) (io.Writer, io.Writer) {
	mu := &sync.Mutex{}
	wrap := func(w io.Writer) io.Writer {
		if _, ok := w.(*os.File); ok || w == nil {
			return w
		}
		return &lockedWriter{mu: mu, w: w}
	}
	return wrap(stdout), wrap(stderr)
}

// lockedWriter serializes writes to w.
type lockedWriter struct {
	mu *sync.Mutex
	w  io.Writer
}

func (l *lockedWriter) Write(p []byte) (int, error) {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.w.Write(p)
}
