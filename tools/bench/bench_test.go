package bench

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"math"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/pipe-engine/pipe/internal/sysmem"
)

const fakeEnv = "PIPE_BENCH_FAKE_RUN"

// TestMain turns the test binary into a fake `pipe run` when fakeEnv is set:
// it parses the flags bench passes, optionally allocates and touches
// --alloc-mb of memory, and writes a CSV whose summary depends on the flags
// (tok_s = 1.5 × --io-threads, halved with --overlap=false).
func TestMain(m *testing.M) {
	if os.Getenv(fakeEnv) == "1" {
		if len(os.Args) > 1 && os.Args[1] == "peer" {
			os.Exit(fakePeer(os.Args[2:]))
		}
		os.Exit(fakeRun(os.Args[1:]))
	}
	// The tests check that a memory rate is measured, not its value: a
	// 4 MiB probe instead of 256 MiB (whose filling and ten reads took
	// most of this package's time under -race).
	memProbeBytes = 4 << 20
	os.Exit(m.Run())
}

// fakePeer is another engine: it writes its arguments to stderr, then
// --alloc-mb touches memory, --stdout and --stderr copy a file to the
// stream, --spawn starts a copy of itself with --hang
// and writes that grandchild's pid to the file named, --hang sleeps until
// killed, and --exit sets the status.
func fakePeer(args []string) int {
	fmt.Fprintf(os.Stderr, "fake peer args: %q\n", args)
	code := 0
	for i := 0; i+1 < len(args); i += 2 {
		switch v := args[i+1]; args[i] {
		case "--alloc-mb":
			mb, _ := strconv.Atoi(v)
			b := make([]byte, mb<<20)
			for i := 0; i < len(b); i += 4096 {
				b[i] = 1 // over a cap, the fault that passes it OOM-kills
			}
			_ = b[len(b)-1]
		case "--stdout", "--stderr":
			b, err := os.ReadFile(v)
			if err != nil {
				fmt.Fprintln(os.Stderr, err)
				return 1
			}
			if args[i] == "--stdout" {
				os.Stdout.Write(b)
			} else {
				os.Stderr.Write(b)
			}
		case "--spawn":
			exe, _ := os.Executable()
			cmd := exec.Command(exe, "peer", "--hang", "1")
			if err := cmd.Start(); err != nil {
				fmt.Fprintln(os.Stderr, err)
				return 1
			}
			if err := writePid(v, cmd.Process.Pid); err != nil {
				fmt.Fprintln(os.Stderr, err)
				return 1
			}
		case "--spawn-setsid":
			// a helper that leaves the peer's process group and session
			exe, _ := os.Executable()
			cmd := exec.Command(exe, "peer", "--hang", "1")
			cmd.SysProcAttr = &syscall.SysProcAttr{Setsid: true}
			if err := cmd.Start(); err != nil {
				fmt.Fprintln(os.Stderr, err)
				return 1
			}
			if err := writePid(v, cmd.Process.Pid); err != nil {
				fmt.Fprintln(os.Stderr, err)
				return 1
			}
		case "--long-line":
			// one line of v MiB, no newline
			mb, _ := strconv.Atoi(v)
			line := bytes.Repeat([]byte("y"), 1<<20)
			for range mb {
				os.Stdout.Write(line)
			}
		case "--hang":
			for {
				time.Sleep(time.Hour)
			}
		case "--exit":
			code, _ = strconv.Atoi(v)
		}
	}
	return code
}

func fakeRun(args []string) int {
	if len(args) == 0 || args[0] != "run" {
		fmt.Fprintln(os.Stderr, "fake: want run")
		return 2
	}
	flags := map[string]string{}
	for i := 1; i < len(args); i++ {
		a := args[i]
		if k, v, ok := strings.Cut(strings.TrimLeft(a, "-"), "="); ok {
			flags[k] = v
			continue
		}
		if i+1 < len(args) {
			flags[strings.TrimLeft(a, "-")] = args[i+1]
			i++
		}
	}
	if mb, _ := strconv.Atoi(flags["alloc-mb"]); mb > 0 {
		b := make([]byte, mb<<20)
		for i := 0; i < len(b); i += 4096 {
			b[i] = 1 // over a cap, the fault that passes it OOM-kills
		}
		_ = b[len(b)-1]
	}
	lanes, _ := strconv.Atoi(flags["io-threads"])
	if lanes == 0 {
		lanes = 4
	}
	tokS := 1.5 * float64(lanes)
	if flags["overlap"] == "false" {
		tokS /= 2
	}
	n, _ := strconv.Atoi(flags["n"])
	f, err := os.Create(flags["csv"])
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		return 1
	}
	defer f.Close()
	fmt.Fprintln(f, "step,steps,wall_ms,io_ms,compute_ms,read_bytes,cache_hit_pct,stall_ms,mgmt_ms,majflt,cpu_ms,resident_frac")
	for i := 0; i < n; i++ {
		fmt.Fprintf(f, "%d,1,%.1f,0,0,0,50,0,0,0,0,-1\n", i, 1000/tokS)
	}
	// none with --overlap=false: bench falls back on rusage for the peak
	ttft := fmt.Sprintf(" ttft_ms=%.1f peak_rss_MiB=%.1f", 1000/float64(lanes), 7.5*float64(lanes))
	if flags["overlap"] == "false" {
		ttft = ""
	}
	fmt.Fprintf(f, "# summary tokens=%d tok_s=%.3f steady_tok_s=%.3f warmup_tokens=%d first5_wall_ms=%.1f read_MiB=10 MiB_per_token=%.1f cache_hit_pct=%.1f%s status=ok\n",
		n, tokS*0.9, tokS, lanes/2, 2000/tokS, 100/float64(lanes), 10*float64(lanes), ttft)
	return 0
}

func fakeOptions(t *testing.T) Options {
	exe, err := os.Executable()
	if err != nil {
		t.Fatal(err)
	}
	return Options{Exe: exe, Model: "m.gguf", Prompt: "hi", N: 4, OutDir: t.TempDir(), Env: []string{fakeEnv + "=1"}, Timeout: time.Minute}
}

func TestMatrixInterleavedTable(t *testing.T) {
	o := fakeOptions(t)
	for _, v := range []string{"io-threads=1,2,4", "--overlap=true,false"} {
		ax, err := ParseVary(v)
		if err != nil {
			t.Fatal(err)
		}
		o.Axes = append(o.Axes, ax)
	}
	o.Repeat = 2
	var log bytes.Buffer
	o.Log = &log
	rep, err := Run(context.Background(), o)
	if err != nil {
		t.Fatal(err)
	}
	if len(rep.Configs) != 6 || len(rep.Runs) != 12 {
		t.Fatalf("%d configs, %d runs", len(rep.Configs), len(rep.Runs))
	}
	// interleaved: A B C … then A B C …
	for i, r := range rep.Runs {
		if r.Config != i%6 || r.Rep != i/6+1 {
			t.Fatalf("run %d is config %d rep %d: not interleaved", i, r.Config, r.Rep)
		}
		if !r.OK() {
			t.Fatalf("run %d failed: %s (%s)", i, r.Err, log.String())
		}
		if _, err := os.Stat(r.CSV); err != nil {
			t.Errorf("run %d CSV kept: %v", i, err)
		}
	}
	want := []struct {
		label  string
		steady float64
	}{{"io-threads=1 overlap=true", 1.5}, {"io-threads=1 overlap=false", 0.75}, {"io-threads=2 overlap=true", 3}, {"io-threads=2 overlap=false", 1.5}, {"io-threads=4 overlap=true", 6}, {"io-threads=4 overlap=false", 3}}
	for i, w := range want {
		c := rep.Configs[i]
		if c.Label != w.label || math.Abs(c.SteadyTokS-w.steady) > 1e-9 || math.Abs(c.Ratio-w.steady/1.5) > 1e-9 {
			t.Errorf("config %d: %s steady %.3f ratio %.3f, want %s %.3f ratio %.3f", i, c.Label, c.SteadyTokS, c.Ratio, w.label, w.steady, w.steady/1.5)
		}
		lanes := float64(int(1) << (i / 2))
		if c.PeakRSSMiB <= 0 || i%2 == 0 && c.PeakRSSMiB != 7.5*lanes {
			t.Errorf("config %d: peak RSS %v MiB, want the trailer's %v (overlap) or rusage's", i, c.PeakRSSMiB, 7.5*lanes)
		}
		wantTTFT := 1000 / lanes
		if i%2 == 1 {
			wantTTFT = math.NaN() // no ttft_ms in those trailers
		}
		if !(math.Abs(c.TTFTms-wantTTFT) < 1e-9 || math.IsNaN(wantTTFT) && math.IsNaN(c.TTFTms)) || c.WarmupTok != float64(int(lanes)/2) ||
			math.Abs(c.First5Ms-2000/w.steady) > 0.1 {
			t.Errorf("config %d: TTFT %v warm-up %v first-5 %v, want %v, %v, %v", i, c.TTFTms, c.WarmupTok, c.First5Ms, wantTTFT, int(lanes)/2, 2000/w.steady)
		}
	}
	for _, format := range []string{"text", "markdown", "json"} {
		var b bytes.Buffer
		if err := rep.Write(&b, format); err != nil {
			t.Fatal(err)
		}
		if !strings.Contains(b.String(), "io-threads=4 overlap=false") {
			t.Errorf("%s output lacks a config:\n%s", format, b.String())
		}
		if format == "json" {
			var back Report
			if err := json.Unmarshal(b.Bytes(), &back); err != nil || len(back.Runs) != 12 {
				t.Errorf("json does not round-trip: %v", err)
			}
		}
		if format == "markdown" && !strings.Contains(b.String(), "| config | tok/s | steady tok/s | ratio | TTFT ms | warm-up | first-5 ms |") {
			t.Errorf("markdown header missing:\n%s", b.String())
		}
	}
	if err := rep.Write(&bytes.Buffer{}, "xml"); !errors.Is(err, ErrFormat) {
		t.Errorf("format xml: %v", err)
	}
}

func TestFailedRunIsReported(t *testing.T) {
	o := fakeOptions(t)
	o.Command = []string{"notrun"} // the fake child exits 2 without a CSV
	rep, err := Run(context.Background(), o)
	if err != nil {
		t.Fatal(err)
	}
	if len(rep.Runs) != 1 || rep.Runs[0].OK() || rep.Runs[0].ExitCode != 2 || rep.Configs[0].Failed != 1 {
		t.Fatalf("%+v", rep.Runs)
	}
	var b bytes.Buffer
	_ = rep.Write(&b, "text")
	if !strings.Contains(b.String(), "1 failed") {
		t.Errorf("table does not say the run failed:\n%s", b.String())
	}
}

// needMemCgroup skips a test that needs a memory cgroup when the process is
// not root or none is writable (outside the code under test), and fails it
// instead under CI=true, where .ci/run runs as root.
func needMemCgroup(t *testing.T) {
	t.Helper()
	if os.Geteuid() != 0 {
		t.Skip("skipped: --mem-cap needs root (a memory cgroup)")
	}
	cg, err := newCgroup(128 << 20)
	if err != nil {
		if os.Getenv("CI") == "true" {
			t.Fatalf("no writable memory cgroup under CI=true: %v", err)
		}
		t.Skipf("skipped: no writable memory cgroup: %v", err)
	}
	_ = cg.remove()
}

// TestMemCap runs a 2×2 matrix under a 128 MiB memory cgroup: the runs that
// allocate 512 MiB are OOM-killed and reported as such, the others complete.
func TestMemCap(t *testing.T) {
	needMemCgroup(t)
	o := fakeOptions(t)
	o.MemCap = 128 << 20
	for _, v := range []string{"alloc-mb=16,512", "io-threads=1,2"} {
		ax, _ := ParseVary(v)
		o.Axes = append(o.Axes, ax)
	}
	rep, err := Run(context.Background(), o)
	if err != nil {
		t.Fatal(err)
	}
	for _, r := range rep.Runs {
		big := strings.Contains(r.Label, "alloc-mb=512")
		if big != r.OOMKilled || big == r.OK() {
			t.Errorf("%s: ok %v oom %v err %q signal %q", r.Label, r.OK(), r.OOMKilled, r.Err, r.Signal)
		}
		if !big && r.CgroupPeak <= 0 {
			t.Errorf("%s: no cgroup peak", r.Label)
		}
	}
	var b bytes.Buffer
	_ = rep.Write(&b, "text")
	if !strings.Contains(b.String(), "OOM-killed") {
		t.Errorf("table does not report OOM:\n%s", b.String())
	}
	// the cgroups are gone
	v2, v1 := sysmem.MemoryCgroupDirs()
	for _, d := range []string{v1, v2} {
		if d == "" {
			continue
		}
		m, _ := filepath.Glob(filepath.Join(d, fmt.Sprintf("pipe-bench-%d-*", os.Getpid())))
		if len(m) > 0 {
			t.Errorf("cgroups left behind: %v", m)
		}
	}
}

func TestParse(t *testing.T) {
	for _, s := range []string{"", "x", "=1", "a=", "a=1,,2"} {
		if _, err := ParseVary(s); !errors.Is(err, ErrBadVary) {
			t.Errorf("ParseVary(%q) = %v", s, err)
		}
	}
	if len(Matrix(nil)) != 1 || Matrix(nil)[0].Label != "default" {
		t.Error("empty matrix")
	}
}

// TestExeAxis: --vary exe=A,B runs the matrix with each binary, interleaved,
// and passes no --exe flag to the runs.
func TestExeAxis(t *testing.T) {
	o := fakeOptions(t)
	ax, err := ParseVary("exe=" + o.Exe + "," + filepath.Join(t.TempDir(), "missing-pipe"))
	if err != nil {
		t.Fatal(err)
	}
	cfgs := Matrix([]Axis{ax, {Flag: "io-threads", Values: []string{"1"}}})
	if len(cfgs) != 2 || cfgs[0].Exe != o.Exe || slices.Contains(cfgs[0].Flags, "--exe="+o.Exe) || len(cfgs[1].Flags) != 1 {
		t.Fatalf("matrix %+v", cfgs)
	}
	o.Axes = []Axis{ax}
	rep, err := Run(context.Background(), o)
	if err == nil || !strings.Contains(err.Error(), "missing-pipe") {
		t.Fatalf("a missing binary: err %v", err)
	}
	if len(rep.Runs) != 1 || !rep.Runs[0].OK() {
		t.Fatalf("the first binary's run: %+v", rep.Runs)
	}
}

// writePid writes pid to path whole or not at all (a temporary file
// renamed into place): the tests take the file's existence as "the helper
// runs" and read the pid at once, and a peer killed or observed between
// creating the file and writing it must not leave it empty.
func writePid(path string, pid int) error {
	tmp := path + ".tmp"
	if err := os.WriteFile(tmp, []byte(strconv.Itoa(pid)), 0o644); err != nil {
		return err
	}
	return os.Rename(tmp, path)
}
