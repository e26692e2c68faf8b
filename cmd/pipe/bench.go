package main

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"time"

	"github.com/rs/zerolog"

	"github.com/pipe-engine/pipe/internal/safefile"
	"github.com/pipe-engine/pipe/internal/size"
	"github.com/pipe-engine/pipe/tools/bench"
)

// BenchCmd is `pipe bench`: run a matrix of `pipe run` configurations side by
// side (interleaved), optionally under a memory cap, and tabulate them.
type BenchCmd struct {
	Model         string        `short:"m" type:"path" help:"GGUF model file for every run (default: pipe run's demo model)."`
	Prompt        string        `short:"p" default:"Write a short story about a lighthouse keeper who finds a message in a bottle." help:"Prompt of every run."`
	N             int           `short:"n" default:"64" help:"Tokens to generate per run."`
	Vary          []string      `sep:"none" help:"A run flag and its values, e.g. io-threads=1,2,4,8 (repeatable; the matrix is their product); exe=PATH1,PATH2 varies the pipe binary (A/B of two builds)." placeholder:"FLAG=V1,V2"`
	Repeat        int           `default:"2" help:"Rounds of the matrix; runs are interleaved A B A B (each --peer after pipe's runs in every round)."`
	MemCap        string        `name:"mem-cap" help:"Run each child in a memory cgroup of this size (e.g. 8G; root only; cgroup v1 or v2, made and removed by bench)."`
	Cold          bool          `help:"Drop the page cache before every run (root only)."`
	OutDir        string        `name:"out-dir" type:"path" help:"Folder for each run's CSV and log, bench.json and bench.md (default: bench-<time>)."`
	Format        string        `enum:"auto,text,markdown,json" default:"auto" help:"Table format on stdout: text, markdown, json (one line) or auto (text on a terminal, else json)."`
	Timeout       time.Duration `default:"0s" help:"Kill a run, with its whole process group, after this long (0 = never)."`
	Roofline      bool          `help:"Measure the roofline of -m on this machine (bytes per token by weight format; before every run the memory read rate and the kernels' rate on cached rows of each format, at 1 and 2 threads; the state its attention, recurrent and convolution blocks read and write per token at a depth of -n positions, at the F32 kernel's rate; O_DIRECT expert reads, before every run under --mem-cap) and report each run's steady tok/s as a fraction of its bound, the slowest of memory, compute and (capped) disk, and which of them bounds it."`
	RooflineDisk  time.Duration `name:"roofline-disk" default:"10s" help:"How long --roofline reads experts with O_DIRECT (0 = skip the disk)."`
	RooflineLanes int           `name:"roofline-lanes" default:"4" help:"Concurrent O_DIRECT readers of --roofline (pipe run's --io-threads)."`
	Peer          []string      `sep:"none" placeholder:"NAME=COMMAND" help:"Another engine's command line, run after pipe's runs in every round under the same --mem-cap and --cold (repeatable), e.g. bmoe='bmoe-cli -m {model} -n {n} -p {prompt} --moe-stream'. Split into arguments like a shell would, but no shell runs it; {model} {n} {prompt} and {out} (this run's file prefix in --out-dir) are replaced per run. Its tok/s is read from its output: bmoe-cli's generation line, llama-bench's tg test, llama.cpp's eval time line, or --peer-regex."`
	PeerRegex     []string      `name:"peer-regex" sep:"none" placeholder:"NAME=REGEX" help:"Read peer NAME's tok/s with this regular expression (its first group; the last match in stdout then stderr) instead of the built-in parsers."`
	Clients       int           `help:"Load mode: instead of the matrix, run this many concurrent streaming clients (each -p, -n tokens, /completion) against the server at --url and report the aggregate and per-client tok/s, TTFT p50/p95 and expert MiB read per token (load.go)." default:"0"`
	ClientPrompts string        `name:"client-prompts" help:"With --clients: a file of prompts, one per line; client i sends line i modulo their number (default: every client -p)." type:"existingfile" placeholder:"FILE"`
	URL           string        `name:"url" help:"The server of --clients (pipe serve, llama-server), e.g. http://127.0.0.1:8080; PIPE_API_KEY is sent as its key." placeholder:"URL"`
	Extra         []string      `arg:"" optional:"" passthrough:"" help:"Arguments after -- go to every run (e.g. -- --temp 0.8 --seed 1)."`
}

// Run executes the bench.
func (c *BenchCmd) Run(g *Globals) error {
	if c.Clients != 0 || c.URL != "" {
		return c.load(g)
	}
	switch {
	case c.Repeat < 1:
		return fmt.Errorf("%w: --repeat %d must be >= 1", errFlag, c.Repeat)
	case c.N < 0 || c.N > maxPositions:
		return fmt.Errorf("%w: -n %d must be in 0..%d (0: pipe run's default)", errFlag, c.N, maxPositions)
	case c.Timeout < 0:
		return fmt.Errorf("%w: --timeout %v must be >= 0", errFlag, c.Timeout)
	}
	exe, err := os.Executable()
	if err != nil {
		return fmt.Errorf("bench: %w", err)
	}
	o := bench.Options{Exe: exe, Model: c.Model, Prompt: c.Prompt, N: c.N, Repeat: c.Repeat, Cold: c.Cold,
		OutDir: c.OutDir, Timeout: c.Timeout, Log: g.Stderr}
	if g.JSONLog {
		o.Log = newEventLines(g.Log, zerolog.InfoLevel, "bench_run")
	}
	if len(c.Extra) > 0 && c.Extra[0] == "--" {
		c.Extra = c.Extra[1:]
	}
	o.Extra = c.Extra
	for _, v := range c.Vary {
		ax, err := bench.ParseVary(v)
		if err != nil {
			return fmt.Errorf("bench: --vary: %w", err)
		}
		o.Axes = append(o.Axes, ax)
	}
	if err := checkMatrix(g, &o); err != nil {
		return err
	}
	if o.Peers, err = c.peers(); err != nil {
		return fmt.Errorf("bench: %w", err)
	}
	if c.MemCap != "" {
		if o.MemCap, err = size.Parse(c.MemCap); err != nil {
			return fmt.Errorf("bench: --mem-cap: %w", err)
		}
	}
	if o.OutDir == "" {
		o.OutDir = "bench-" + time.Now().Format("20060102-150405")
	}
	if c.Roofline {
		if c.Model == "" {
			return fmt.Errorf("bench: --roofline needs -m (the model whose bytes per token it bounds)")
		}
		if c.RooflineLanes < 1 {
			return fmt.Errorf("bench: --roofline-lanes %d: want at least 1", c.RooflineLanes)
		}
		if o.Roofline, err = bench.MeasureRoofline(g.Ctx, c.Model, c.RooflineLanes, c.RooflineDisk, c.N); err != nil {
			return fmt.Errorf("bench: --roofline: %w", err)
		}
		g.Log.Info().Str("event", "roofline").Int64("token_bytes", o.Roofline.TokenBytes).
			Float64("mem_GB_s_t1", o.Roofline.MemGBs[0]).Float64("mem_GB_s_t2", o.Roofline.MemGBs[1]).
			Float64("disk_GB_s", o.Roofline.DiskGBs).Msg(o.Roofline.String(o.MemCap > 0))
	}
	rep, err := bench.Run(g.Ctx, o)
	if rep != nil && len(rep.Runs) > 0 {
		guard := modelGuard(c.Model)
		for _, x := range []struct{ name, format string }{{"bench.json", "json"}, {"bench.md", "markdown"}} {
			err = errors.Join(err, writeReport(guard, filepath.Join(o.OutDir, x.name), rep, x.format))
		}
		if werr := c.writeTable(g, rep); werr != nil {
			err = errors.Join(err, fmt.Errorf("stdout: %w", werr))
		}
	}
	if err != nil {
		return err
	}
	if err := rep.AllFailed(); err != nil {
		return err
	}
	g.Log.Info().Str("event", "bench_done").Str("out_dir", o.OutDir).Int("runs", len(rep.Runs)).Msg("bench finished")
	return nil
}

// peers parses --peer and attaches each --peer-regex to its peer.
func (c *BenchCmd) peers() ([]bench.Peer, error) {
	var peers []bench.Peer
	for _, s := range c.Peer {
		p, err := bench.ParsePeer(s)
		if err != nil {
			return nil, fmt.Errorf("--peer: %w", err)
		}
		peers = append(peers, p)
	}
	for _, s := range c.PeerRegex {
		name, expr, ok := strings.Cut(s, "=")
		i := slices.IndexFunc(peers, func(p bench.Peer) bool { return p.Name == name })
		switch {
		case !ok || expr == "":
			return nil, fmt.Errorf("--peer-regex %q: %w: want NAME=REGEX", s, bench.ErrBadPeer)
		case i < 0:
			return nil, fmt.Errorf("--peer-regex %s: %w: no --peer of that name", name, bench.ErrBadPeer)
		}
		if err := peers[i].SetRegex(expr); err != nil {
			return nil, err
		}
	}
	return peers, nil
}

// writeReport writes the bench report to path through guard, checking every
// write and the close.
func writeReport(guard *safefile.Guard, path string, rep *bench.Report, format string) error {
	f, err := guard.Create("--out-dir", path)
	if err != nil {
		return fmt.Errorf("bench: --out-dir: %w", err)
	}
	werr := rep.Write(f, format)
	if cerr := f.Close(); werr == nil {
		werr = cerr
	}
	if werr != nil {
		return fmt.Errorf("bench: %s: %w", path, werr)
	}
	return nil
}

// writeTable writes the table on stdout; --format auto is text on a terminal
// and one line of JSON elsewhere, so `pipe bench … 2>&1 | jq` reads it.
func (c *BenchCmd) writeTable(g *Globals, rep *bench.Report) error {
	format := c.Format
	if format == "auto" {
		format = "text"
		if !isTerminal(g.Stdout) {
			format = "json"
		}
	}
	if format != "json" {
		return rep.Write(g.Stdout, format)
	}
	var buf, line bytes.Buffer
	if err := rep.Write(&buf, "json"); err != nil {
		return err
	}
	if err := json.Compact(&line, buf.Bytes()); err != nil {
		return err
	}
	line.WriteByte('\n')
	_, err := g.Stdout.Write(line.Bytes())
	return err
}

// streamingOnly are the run flags that do nothing when experts are not
// streamed (--moe-stream=false).
var streamingOnly = map[string]bool{"cache-mb": true, "cache-ceil-mb": true, "cache-floor-mb": true, "cache-policy": true, "cache-fill": true,
	"io-threads": true, "no-odirect": true, "overlap": true, "prefetch": true, "prefetch-lanes": true, "prefetch-policy": true, "prefetch-prompt": true,
	"warm-start": true, "hot-set": true}

// checkMatrix parses every configuration's command line as its child would,
// so a bad --vary value or passthrough flag fails before any child starts,
// and warns when an axis varies a flag that has no effect in the mode.
func checkMatrix(g *Globals, o *bench.Options) error {
	for _, cfg := range bench.Matrix(o.Axes) {
		if cfg.Exe != "" {
			continue // another build's flags are its own
		}
		args := append([]string{"run", "-p", "x"}, cfg.Flags...)
		rc, err := parseRun(append(args, o.Extra...))
		if err != nil {
			return fmt.Errorf("bench: %s: %w", cfg.Label, err)
		}
		if rc.MoeStream != "false" {
			continue
		}
		for _, ax := range o.Axes {
			if streamingOnly[ax.Flag] {
				g.Log.Warn().Str("event", "bench_vary_no_effect").Str("config", cfg.Label).Str("flag", ax.Flag).
					Msgf("--vary %s has no effect with --moe-stream=false (experts are mmap'd, not streamed)", ax.Flag)
			}
		}
	}
	return nil
}

// parseRun parses args as `pipe run`'s command line and checks its flags
// without loading anything.
func parseRun(args []string) (*RunCmd, error) {
	var cli CLI
	k, err := parser(&cli, io.Discard, io.Discard, func(int) {})
	if err != nil {
		return nil, err
	}
	if args, err = translateArgs(args); err != nil {
		return nil, err
	}
	if _, err := k.Parse(args); err != nil {
		return nil, err
	}
	rc := &cli.Run
	if err := rc.validate(); err != nil {
		return nil, err
	}
	return rc, nil
}
