// Package bench runs `pipe run` side by side: a matrix of configurations
// (--vary io-threads=1,2,4 --vary overlap=true,false …) as child processes,
// interleaved A B A B so that drift of the machine (other load, thermal state,
// page cache) hits every configuration alike, each optionally under a memory
// cap (a cgroup v1 or v2 made and removed by bench) and after dropping the page
// cache. It reads each run's per-token CSV `# summary` trailer and the child's
// rusage, and reports mean and steady-window tok/s, the ratio to the first
// configuration, hit rate, MiB read per token, peak RSS and major faults per
// token. With a Roofline (roofline.go) it also puts each run against the
// tok/s this machine allows it, and names the term that sets it: the
// slowest of the weight bytes of a token at the memory read rate measured
// just before the run, the kernels' time over those bytes at the rates
// measured then on cached rows of each weight format (compute.go) plus
// the state its attention, recurrent and convolution blocks read and write
// at the run's depth, as the model's family counts it (blocks.go), and
// under a cap the bytes the run read per token at the O_DIRECT rate
// measured then.
//
// Peers (peer.go) are other engines' command lines run after the matrix in
// every round, under the same cap and cache drop: their tok/s is read from
// their own output, and the report pairs every pipe configuration with
// every peer round by round (pipe ÷ peer, min/median/max) beside the disk
// rate measured before each run. Every child runs in a process group of
// its own that a timeout or cancel kills whole, and carries a mark in its
// environment: when it ends, its group and every marked process still
// running (a helper that started its own session) are killed. A peer's
// output goes to files and is read back as a bounded tail, whose lines
// are shortened before they reach an error or bench.json. Every run's
// bytes read from disk come from its rusage, one definition for pipe and
// peers.
//
// Role in the pipeline: bench is a driver beside the engine; it never imports
// the engine's packages and only talks to the child through flags, the CSV
// file and the exit status. Runs are sequential (one child at a time) so they
// never compete with each other. A run that is OOM-killed under the cap is a
// result, not a bench failure.
//
// Concurrency: Run is safe to call from several goroutines with different
// options, but concurrent benches disturb each other's measurements.
package bench

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"math"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"time"
	"unicode/utf8"

	"github.com/pipe-engine/pipe/gguf"
	"github.com/pipe-engine/pipe/internal/safefile"
)

// ErrBadVary reports a malformed --vary.
var ErrBadVary = errors.New("bad --vary")

// Axis is one --vary: a run flag and the values it takes.
type Axis struct {
	Flag   string
	Values []string
}

// ParseVary parses "flag=v1,v2,…" (a leading "--" on the flag is allowed).
func ParseVary(s string) (Axis, error) {
	k, v, ok := strings.Cut(s, "=")
	k = strings.TrimLeft(strings.TrimSpace(k), "-")
	if !ok || k == "" || v == "" {
		return Axis{}, fmt.Errorf("%w %q: want flag=value1,value2", ErrBadVary, s)
	}
	var vals []string
	for _, x := range strings.Split(v, ",") {
		x = strings.TrimSpace(x)
		if x == "" {
			return Axis{}, fmt.Errorf("%w %q: empty value", ErrBadVary, s)
		}
		vals = append(vals, x)
	}
	return Axis{Flag: k, Values: vals}, nil
}

// ExeAxis is the axis name that varies the binary instead of a run flag:
// --vary exe=/path/pipe-old,/path/pipe-new runs the same matrix with each
// build, interleaved (an A/B of two builds on one machine state).
const ExeAxis = "exe"

// Config is one point of the matrix, or a peer.
type Config struct {
	Label string   // "io-threads=2 overlap=false"
	Flags []string // "--io-threads=2", "--overlap=false"
	Exe   string   // the binary, from the exe axis ("" = Options.Exe)
	Peer  *Peer    // another engine's command line instead of pipe run
}

// Matrix is the cartesian product of the axes, the first axis varying
// slowest. No axes gives one configuration with no extra flags.
func Matrix(axes []Axis) []Config {
	cfgs := []Config{{}}
	for _, ax := range axes {
		var next []Config
		for _, c := range cfgs {
			for _, v := range ax.Values {
				n := Config{Label: strings.TrimSpace(c.Label + " " + ax.Flag + "=" + v), Exe: c.Exe}
				n.Flags = append([]string(nil), c.Flags...)
				if ax.Flag == ExeAxis {
					n.Exe = v
				} else {
					n.Flags = append(n.Flags, "--"+ax.Flag+"="+v)
				}
				next = append(next, n)
			}
		}
		cfgs = next
	}
	for i := range cfgs {
		if cfgs[i].Label == "" {
			cfgs[i].Label = "default"
		}
	}
	return cfgs
}

// Options describe a bench.
type Options struct {
	Exe     string   // the pipe binary (os.Executable())
	Command []string // arguments before the run flags; default ["run"]
	Model   string   // -m (empty: pipe run's default demo model)
	Prompt  string   // -p
	N       int      // -n
	Axes    []Axis
	// Peers run after the matrix in every round, under the same cap and
	// page-cache drop (peer mode): their tok/s is read from their output.
	Peers   []Peer
	Repeat  int      // rounds of the interleaved matrix (>= 1)
	MemCap  int64    // bytes; 0 = no cap
	Cold    bool     // drop the page cache before every run
	OutDir  string   // CSVs and bench.json go here
	Extra   []string // passed to every run after the config flags
	Timeout time.Duration
	Env     []string // extra environment for the children (peers too)

	// Roofline, if set (MeasureRoofline), puts each run's steady tok/s
	// against the bound it allows (RunResult.BoundTokS, BoundFrac).
	Roofline *Roofline

	// Log, if set, receives one line per run as it finishes, and the child's
	// stderr is appended to OutDir/<run>.log.
	Log io.Writer

	guard *safefile.Guard // the model's files: no log may overwrite them
}

// RunResult is one child run.
type RunResult struct {
	Config     int               `json:"config"`
	Label      string            `json:"label"`
	Rep        int               `json:"rep"`
	CSV        string            `json:"csv"`
	Peer       string            `json:"peer,omitempty"`         // the peer's name; "" for pipe
	TokSource  string            `json:"tok_s_source,omitempty"` // a peer's: which parser read its tok/s
	Stdout     string            `json:"stdout,omitempty"`       // a peer's stdout, kept in OutDir
	Args       []string          `json:"args"`
	ExitCode   int               `json:"exit_code"`
	Signal     string            `json:"signal,omitempty"`
	OOMKilled  bool              `json:"oom_killed"`
	Err        string            `json:"error,omitempty"`
	LastLog    string            `json:"last_log,omitempty"` // a failed run's last log line (its error)
	WallS      float64           `json:"wall_s"`
	Summary    map[string]string `json:"summary,omitempty"`
	Tokens     int               `json:"tokens"`
	TokS       float64           `json:"tok_s"`
	SteadyTokS float64           `json:"steady_tok_s"`
	HitPct     float64           `json:"cache_hit_pct"`
	MiBPerTok  float64           `json:"MiB_per_token"`
	TTFTms     float64           `json:"ttft_ms"` // NaN (null in JSON) when the trailer has none
	// WarmupTokens and First5Ms are the trailer's warmup_tokens and first5_wall_ms.
	WarmupTokens int     `json:"warmup_tokens"`
	First5Ms     float64 `json:"first5_wall_ms"`
	// PeakRSSMiB is a pipe run's own peak (its trailer's peak_rss_MiB),
	// else the child's rusage maxrss, which on Linux also counts the
	// memory of the process that started it.
	PeakRSSMiB float64 `json:"peak_rss_MiB"`
	CgroupPeak float64 `json:"cgroup_peak_MiB,omitempty"`
	// Leftovers is how many of the run's descendants outside its process
	// group were still running when it ended (bench killed them).
	Leftovers int   `json:"leftovers_killed,omitempty"`
	MajFlt    int64 `json:"majflt"`
	// DiskReadMiB is what the run's processes read from block devices
	// (rusage inblock: the kernel's read_bytes, O_DIRECT and page-cache
	// misses alike, of the child and the descendants it waited for; NaN
	// where the OS does not count it), DiskMiBs that over WallS. One
	// definition for pipe and peers.
	DiskReadMiB float64 `json:"disk_read_MiB"`
	DiskMiBs    float64 `json:"disk_read_MiB_s"`
	// BoundTokS is the roofline's tok/s for this run (its threads; under a
	// cap its MiB read per token at the disk's rate), BoundFrac the steady
	// tok/s as a fraction of it (NaN without a roofline) and BoundBy the
	// term that sets it: memory, compute or disk ("" without a roofline).
	BoundTokS float64   `json:"bound_tok_s"`
	BoundFrac float64   `json:"bound_frac"`
	BoundBy   string    `json:"bound_by,omitempty"`
	Roofline  *Roofline `json:"roofline,omitempty"` // measured just before this run (memory; capped: disk too)
}

// OK reports whether the run completed and produced a summary (a peer: a
// tok/s read from its output).
func (r *RunResult) OK() bool {
	return r.ExitCode == 0 && r.Err == "" && (r.Summary != nil || r.Peer != "" && r.TokS > 0)
}

// Run executes the matrix: for rep in 1..Repeat, every configuration in
// order (A B A B …), one child at a time.
func Run(ctx context.Context, o Options) (*Report, error) {
	if o.Exe == "" {
		return nil, errors.New("bench: no executable")
	}
	if o.Repeat < 1 {
		o.Repeat = 1
	}
	if o.Command == nil {
		o.Command = []string{"run"}
	}
	if o.OutDir == "" {
		o.OutDir = "bench-" + time.Now().Format("20060102-150405")
	}
	if err := os.MkdirAll(o.OutDir, 0o755); err != nil {
		return nil, fmt.Errorf("bench: --out-dir: %w", err)
	}
	o.guard = &safefile.Guard{}
	if o.Model != "" {
		for _, p := range gguf.ShardPaths(o.Model) {
			o.guard.Protect("the model -m", p)
		}
	}
	if o.MemCap > 0 && os.Geteuid() != 0 {
		return nil, fmt.Errorf("bench: --mem-cap %w (it makes a memory cgroup); run as root or drop --mem-cap", ErrNotRoot)
	}
	if o.Cold && os.Geteuid() != 0 {
		return nil, fmt.Errorf("bench: --cold %w (it writes /proc/sys/vm/drop_caches)", ErrNotRoot)
	}
	cfgs := Matrix(o.Axes)
	if err := checkPeers(&o, cfgs); err != nil {
		return nil, err
	}
	for i := range o.Peers {
		cfgs = append(cfgs, Config{Label: o.Peers[i].Name, Peer: &o.Peers[i]})
	}
	rep := &Report{Peers: o.Peers, Configs: make([]ConfigStats, len(cfgs)), MemCapBytes: o.MemCap, Cold: o.Cold, Repeat: o.Repeat,
		Model: o.Model, Prompt: o.Prompt, N: o.N, Extra: o.Extra, OutDir: o.OutDir, Started: time.Now(), Roofline: o.Roofline}
	for i, c := range cfgs {
		rep.Configs[i] = ConfigStats{Label: c.Label, Flags: c.Flags}
		if c.Peer != nil {
			rep.Configs[i].Peer = true
			rep.Configs[i].Flags = c.Peer.Args
		}
	}
	for r := 0; r < o.Repeat; r++ {
		for ci, c := range cfgs {
			if err := ctx.Err(); err != nil {
				rep.aggregate()
				return rep, err
			}
			var rf *Roofline
			if o.Roofline != nil {
				var err error
				if rf, err = o.Roofline.Remeasure(ctx, o.MemCap > 0); err != nil {
					return rep, fmt.Errorf("bench: --roofline: %w", err)
				}
			}
			res, err := runOne(ctx, &o, ci, c, r)
			if res != nil {
				res.Roofline = rf
				rep.Runs = append(rep.Runs, *res)
			}
			if err != nil { // a bench failure (cgroup, drop caches, exec, a peer's unreadable output), not a run failure
				rep.aggregate()
				return rep, err
			}
			if o.Log != nil {
				logRun(o.Log, res, len(rep.Runs), o.Repeat*len(cfgs))
			}
		}
	}
	rep.aggregate()
	return rep, nil
}

// logRun writes a finished run's one-line account.
func logRun(w io.Writer, res *RunResult, i, n int) {
	status := "ok"
	switch {
	case res.OOMKilled:
		status = "OOM-killed"
	case !res.OK():
		status = "failed: " + res.Err
		if res.LastLog != "" {
			status += ": " + res.LastLog
		}
	}
	disk := ""
	if !math.IsNaN(res.DiskReadMiB) {
		disk = fmt.Sprintf(", read %.0f MiB at %.0f MiB/s", res.DiskReadMiB, res.DiskMiBs)
	}
	if res.Peer != "" {
		fmt.Fprintf(w, "bench: [%d/%d] peer %s rep %d: %s, %.3f tok/s (%s)%s, %.0fs\n",
			i, n, res.Label, res.Rep, status, res.TokS, res.TokSource, disk, res.WallS)
		return
	}
	fmt.Fprintf(w, "bench: [%d/%d] %s rep %d: %s, %.3f tok/s (steady %.3f)%s, %.0fs\n",
		i, n, res.Label, res.Rep, status, res.TokS, res.SteadyTokS, disk, res.WallS)
}

// checkPeers refuses, before any run, peers whose names collide, whose
// command lines need a value bench does not have, or whose program is not
// found.
func checkPeers(o *Options, cfgs []Config) error {
	names := map[string]bool{}
	for _, c := range cfgs {
		names[c.Label] = true
	}
	for _, p := range o.Peers {
		switch {
		case len(p.Args) == 0:
			return fmt.Errorf("bench: --peer %s: %w: empty command line", p.Name, ErrBadPeer)
		case names[p.Name]:
			return fmt.Errorf("bench: --peer %s: %w: the name is taken by another row", p.Name, ErrBadPeer)
		case p.Uses("model") && o.Model == "":
			return fmt.Errorf("bench: --peer %s: %w: {model} needs -m", p.Name, ErrBadPeer)
		case p.Uses("n") && o.N <= 0:
			return fmt.Errorf("bench: --peer %s: %w: {n} needs -n > 0", p.Name, ErrBadPeer)
		}
		names[p.Name] = true
		if _, err := exec.LookPath(p.Args[0]); err != nil {
			return fmt.Errorf("bench: --peer %s: %w: %w", p.Name, ErrBadPeer, err)
		}
	}
	return nil
}

// ErrAllFailed: every run of a configuration failed.
var ErrAllFailed = errors.New("every run failed")

// AllFailed names the first configuration none of whose runs completed,
// with its last run's last log line (the child's error); nil when every
// configuration has a completed run. A report with failed runs is still a
// report (Run returns it without an error); `pipe bench` exits non-zero
// on this.
func (r *Report) AllFailed() error {
	for i, c := range r.Configs {
		if c.Runs == 0 || c.OK > 0 {
			continue
		}
		last := ""
		for _, run := range r.Runs {
			if run.Config == i {
				last = run.LastLog
				if last == "" {
					last = run.Err
				}
			}
		}
		return fmt.Errorf("bench: %s: %w (%d of %d): %s", c.Label, ErrAllFailed, c.Runs, c.Runs, last)
	}
	return nil
}

func fileLabel(s string) string {
	r := strings.NewReplacer(" ", "_", "=", "-", "/", "-", ",", "-")
	return r.Replace(s)
}

// command sets the run's arguments and output files (a peer's, or pipe's
// with config c) and returns the executable; base names the files.
func (res *RunResult) command(o *Options, c Config, base string) (exe string) {
	if c.Peer != nil {
		argv := c.Peer.Expand(map[string]string{"model": o.Model, "n": strconv.Itoa(o.N), "prompt": o.Prompt,
			"out": filepath.Join(o.OutDir, base)})
		res.Args = argv[1:]
		res.Peer = c.Peer.Name
		res.Stdout = filepath.Join(o.OutDir, base+".out")
		return argv[0]
	}
	exe, res.Args = o.Exe, pipeArgs(o, c, filepath.Join(o.OutDir, base+".csv"))
	if c.Exe != "" {
		exe = c.Exe
	}
	res.CSV = filepath.Join(o.OutDir, base+".csv")
	_ = os.Remove(res.CSV)
	return exe
}

// measured takes the finished child's exit, resource use and signal from ps
// (nil: it never ran) and the cgroup's peak and OOM kills (cg nil: no
// --mem-cap; oomBefore is the cgroup's OOM kills before the start).
func (res *RunResult) measured(ps *os.ProcessState, cg *cgroup, oomBefore int64) {
	res.DiskReadMiB, res.DiskMiBs = math.NaN(), math.NaN()
	if ps != nil {
		res.ExitCode = ps.ExitCode()
		if ru, ok := ps.SysUsage().(*syscall.Rusage); ok && ru != nil {
			res.PeakRSSMiB = maxrssMiB(ru)
			res.MajFlt = ru.Majflt
			res.DiskReadMiB = inblockMiB(ru)
			res.DiskMiBs = res.DiskReadMiB / res.WallS
		}
		if ws, ok := ps.Sys().(syscall.WaitStatus); ok && ws.Signaled() {
			res.Signal = ws.Signal().String()
			if ws.Signal() == syscall.SIGKILL && cg != nil {
				after := cg.oomKills()
				res.OOMKilled = after < 0 || after > oomBefore || oomBefore < 0
			}
		}
	}
	if cg != nil {
		if p := cg.peak(); p > 0 {
			res.CgroupPeak = float64(p) / (1 << 20)
		}
	}
}

// runOne runs configuration ci (c) for the r-th time and measures it.
func runOne(ctx context.Context, o *Options, ci int, c Config, r int) (*RunResult, error) {
	base := fmt.Sprintf("%02d-%s-%d", ci, fileLabel(c.Label), r+1)
	res := &RunResult{Config: ci, Label: c.Label, Rep: r + 1}
	exe := res.command(o, c, base)
	if o.Cold {
		if err := dropCaches(); err != nil {
			return nil, err
		}
	}
	var cg *cgroup
	if o.MemCap > 0 {
		var err error
		if cg, err = newCgroup(o.MemCap); err != nil {
			return nil, err
		}
		defer func() { _ = cg.close() }()
	}

	rctx := ctx
	if o.Timeout > 0 {
		var cancel context.CancelFunc
		rctx, cancel = context.WithTimeout(ctx, o.Timeout)
		defer cancel()
	}
	cmd := exec.CommandContext(rctx, exe, res.Args...)
	mark := newRunMark()
	cmd.Env = append(append(os.Environ(), o.Env...), runMarkEnv+"="+mark)
	ownGroup(cmd) // a timeout or Ctrl-C kills the child's whole process group
	cmd.Stdout = io.Discard
	if res.Stdout != "" {
		outf, err := o.guard.Create("--out-dir", res.Stdout)
		if err != nil {
			return nil, fmt.Errorf("bench: %w", err)
		}
		defer outf.Close()
		cmd.Stdout = outf
	}
	logf, err := o.guard.Create("--out-dir", filepath.Join(o.OutDir, base+".log"))
	if err != nil {
		return nil, fmt.Errorf("bench: %w", err)
	}
	defer logf.Close()
	cmd.Stderr = logf
	oomBefore := int64(-1)
	if cg != nil {
		oomBefore = cg.oomKills()
	}
	start := time.Now()
	if err := cmd.Start(); err != nil {
		return nil, fmt.Errorf("bench: start %s: %w", exe, err)
	}
	if cg != nil {
		if err := cg.add(cmd.Process.Pid); err != nil {
			_ = cmd.Cancel()
			_ = cmd.Wait()
			killLeftovers(cmd.Process.Pid, mark)
			return nil, fmt.Errorf("bench: --mem-cap: %w", err)
		}
	}
	werr := cmd.Wait()
	// A child's background processes die with it, also when it exited
	// normally and when they left its group (issue 35).
	res.Leftovers = killLeftovers(cmd.Process.Pid, mark)
	res.WallS = time.Since(start).Seconds()
	res.measured(cmd.ProcessState, cg, oomBefore)
	switch {
	case rctx.Err() == context.DeadlineExceeded:
		res.Err = fmt.Sprintf("timed out after %s", o.Timeout)
		res.OOMKilled = false // bench killed it
	case ctx.Err() != nil:
		return res, ctx.Err()
	case res.OOMKilled:
		res.Err = "OOM-killed under --mem-cap"
	case werr != nil:
		res.Err = werr.Error()
	}
	if c.Peer != nil {
		return res, peerResult(res, c.Peer, logf.Name())
	}
	pipeResult(res)
	if !res.OK() {
		res.LastLog = lastLogLine(logf.Name())
	}
	return res, nil
}

// pipeArgs is a pipe run's command line: Command, -m -p -n, the CSV, the
// configuration's flags, then Extra.
func pipeArgs(o *Options, c Config, csv string) []string {
	args := append([]string(nil), o.Command...)
	if o.Model != "" {
		args = append(args, "-m", o.Model)
	}
	if o.Prompt != "" {
		args = append(args, "-p", o.Prompt)
	}
	if o.N > 0 {
		args = append(args, "-n", strconv.Itoa(o.N))
	}
	args = append(args, "--csv", csv)
	args = append(args, c.Flags...)
	return append(args, o.Extra...)
}

// pipeResult fills a pipe run's numbers from its CSV's summary trailer.
func pipeResult(res *RunResult) {
	sum, err := readSummary(res.CSV)
	if err != nil {
		if res.Err == "" {
			res.Err = err.Error()
		}
		return
	}
	res.Summary = sum
	res.Tokens = int(num(sum, "tokens"))
	res.TokS = num(sum, "tok_s")
	res.SteadyTokS = num(sum, "steady_tok_s")
	res.HitPct = math.NaN() // no cache: the trailer has none (an older pipe wrote -1)
	if v, err := strconv.ParseFloat(sum["cache_hit_pct"], 64); err == nil && v >= 0 {
		res.HitPct = v
	}
	// pipe's own peak: the child's rusage also counts the memory of the
	// process that started it (Linux keeps the pre-exec peak), which for a
	// test binary that just generated a model is larger than the run's
	if v, err := strconv.ParseFloat(sum["peak_rss_MiB"], 64); err == nil && v > 0 {
		res.PeakRSSMiB = v
	}
	res.MiBPerTok = num(sum, "MiB_per_token")
	res.WarmupTokens = int(num(sum, "warmup_tokens"))
	res.First5Ms = num(sum, "first5_wall_ms")
	res.TTFTms = math.NaN()
	if v, err := strconv.ParseFloat(sum["ttft_ms"], 64); err == nil {
		res.TTFTms = v
	}
}

// peerTail is how many lines of each of a peer's streams an error shows.
const peerTail = 6

// peerResult reads a peer run's tok/s from its stdout and stderr. A peer
// that failed (exit status, OOM kill, timeout) is a failed run, with the
// last lines of its output; one that exited 0 but printed no rate is a
// bench error (its command line or --peer-regex is wrong: every round
// would fail alike).
func peerResult(res *RunResult, p *Peer, stderrPath string) error {
	res.SteadyTokS, res.HitPct, res.MiBPerTok, res.TTFTms, res.First5Ms = math.NaN(), math.NaN(), math.NaN(), math.NaN(), math.NaN()
	stdout, err1 := readTail(res.Stdout, maxOutputRead)
	stderr, err2 := readTail(stderrPath, maxOutputRead)
	if err := errors.Join(err1, err2); err != nil {
		return fmt.Errorf("bench: peer %s: %w", p.Name, err)
	}
	tail := fmt.Sprintf("last lines of its output (%s, %s):\n%s", res.Stdout, stderrPath, outputTail(stdout, stderr))
	if res.Err != "" {
		res.LastLog = tail
		return nil
	}
	r, err := ParsePeerOutput(stdout, stderr, p.Regex)
	if err != nil {
		res.Err = err.Error()
		res.LastLog = tail
		return fmt.Errorf("bench: peer %s round %d: %w; %s", p.Name, res.Rep, err, tail)
	}
	res.TokS, res.Tokens, res.TokSource = r.TokS, r.Tokens, r.Source
	return nil
}

// maxOutputRead bounds how much of a run's stdout, stderr or log bench
// reads back: the rates and last messages it looks for are at the end, and
// a runaway child's output must not be loaded whole.
const maxOutputRead = 16 << 20

// readTail returns the last limit bytes of the file at path (all of it
// when shorter).
func readTail(path string, limit int64) ([]byte, error) {
	f, err := os.Open(path)
	if err != nil {
		return nil, err
	}
	defer f.Close()
	st, err := f.Stat()
	if err != nil {
		return nil, err
	}
	off := max(st.Size()-limit, 0)
	return io.ReadAll(io.NewSectionReader(f, off, st.Size()-off))
}

// outputTail is the last lines of a peer's stdout and stderr, each
// labelled.
func outputTail(stdout, stderr []byte) string {
	var b strings.Builder
	for _, s := range []struct {
		name string
		b    []byte
	}{{"stdout", stdout}, {"stderr", stderr}} {
		if len(bytes.TrimSpace(s.b)) == 0 {
			fmt.Fprintf(&b, "  %s: (empty)\n", s.name)
			continue
		}
		for _, l := range strings.Split(tailLines(s.b, peerTail), "\n") {
			fmt.Fprintf(&b, "  %s| %s\n", s.name, shortLine(l))
		}
	}
	return strings.TrimRight(b.String(), "\n")
}

// maxTailLine bounds each line of a peer's output that an error or
// bench.json carries: a peer printing one enormous line must not make a
// 100 MB report (issue 35).
const maxTailLine = 512

// shortLine is l cut to maxTailLine bytes (at a UTF-8 boundary), saying
// how much was cut.
func shortLine(l string) string {
	if len(l) <= maxTailLine {
		return l
	}
	cut := maxTailLine
	for cut > 0 && !utf8.RuneStart(l[cut]) {
		cut--
	}
	return fmt.Sprintf("%s… (%d more bytes)", l[:cut], len(l)-cut)
}

// lastLogLine is the last line of a run's log, as a message: a JSON log
// event's "message" (and "error") field, or the plain line.
func lastLogLine(path string) string {
	b, err := readTail(path, maxOutputRead)
	if err != nil {
		return ""
	}
	lines := strings.Split(strings.TrimSpace(string(b)), "\n")
	line := strings.TrimSpace(lines[len(lines)-1])
	var ev struct{ Message, Error string }
	if json.Unmarshal([]byte(line), &ev) == nil && ev.Message != "" {
		if ev.Error != "" {
			return shortLine(ev.Message + ": " + ev.Error)
		}
		return shortLine(ev.Message)
	}
	return shortLine(line)
}

func num(m map[string]string, k string) float64 {
	v, err := strconv.ParseFloat(m[k], 64)
	if err != nil {
		return 0
	}
	return v
}

// readSummary returns the key=value pairs of a per-token CSV's `# summary`
// trailer.
func readSummary(path string) (map[string]string, error) {
	f, err := os.Open(path)
	if err != nil {
		return nil, fmt.Errorf("no CSV: %w", err)
	}
	defer f.Close()
	sc := bufio.NewScanner(f)
	sc.Buffer(make([]byte, 64<<10), 1<<20)
	var sum map[string]string
	for sc.Scan() {
		line := sc.Text()
		rest, ok := strings.CutPrefix(line, "# summary")
		if !ok {
			continue
		}
		sum = map[string]string{}
		for _, fld := range strings.Fields(rest) {
			if k, v, ok := strings.Cut(fld, "="); ok {
				sum[k] = v
			}
		}
	}
	if err := sc.Err(); err != nil {
		return nil, err
	}
	if sum == nil {
		return nil, fmt.Errorf("%s has no '# summary' line", path)
	}
	return sum, nil
}

func syncFS() { syscall.Sync() }

// ownGroup starts cmd in a process group of its own and makes its
// cancellation (a --timeout, Ctrl-C) SIGKILL the whole group, so a peer's
// helper processes die with it.
func ownGroup(cmd *exec.Cmd) {
	cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true}
	cmd.Cancel = func() error { return syscall.Kill(-cmd.Process.Pid, syscall.SIGKILL) }
	cmd.WaitDelay = 10 * time.Second
}
