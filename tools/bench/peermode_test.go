package bench

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"math"
	"os"
	"path/filepath"
	"runtime"
	"slices"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/pipe-engine/pipe/internal/sysmem"
)

// fakePeerSpec is a --peer running this test binary as the fake peer.
func fakePeerSpec(t *testing.T, name string, args ...string) Peer {
	t.Helper()
	exe, err := os.Executable()
	if err != nil {
		t.Fatal(err)
	}
	line := "'" + exe + "' peer"
	for _, a := range args {
		if strings.HasSuffix(a, ".json") || strings.HasSuffix(a, ".stdout") || strings.HasSuffix(a, ".stderr") || strings.HasSuffix(a, ".md") {
			abs, err := filepath.Abs(filepath.Join("testdata", "peer", a))
			if err != nil {
				t.Fatal(err)
			}
			a = abs
		}
		line += " '" + a + "'"
	}
	p, err := ParsePeer(name + "=" + line)
	if err != nil {
		t.Fatal(err)
	}
	return p
}

// TestPeerMode runs two pipe configurations and two peers (bmoe-cli's and
// llama-bench's outputs) for three rounds: interleaved, the placeholders
// expanded, each peer's rate read from its output, the ratio table round
// by round with its spread, and the tables and JSON carrying all of it.
func TestPeerMode(t *testing.T) {
	o := fakeOptions(t)
	o.Repeat = 3
	ax, _ := ParseVary("io-threads=1,2")
	o.Axes = []Axis{ax}
	o.Peers = []Peer{
		fakePeerSpec(t, "bmoe", "--stdout", "bmoe-cli.stdout", "-m", "{model}", "-n", "{n}", "-p", "{prompt}", "--csv", "{out}.csv"),
		fakePeerSpec(t, "llama", "--stdout", "llama-bench.json", "--stderr", "llama-completion.stderr"),
	}
	o.Prompt = "two words"
	var log bytes.Buffer
	o.Log = &log
	rep, err := Run(context.Background(), o)
	if err != nil {
		t.Fatal(err)
	}
	if len(rep.Configs) != 4 || len(rep.Runs) != 12 {
		t.Fatalf("%d configs, %d runs", len(rep.Configs), len(rep.Runs))
	}
	for i, r := range rep.Runs {
		if r.Config != i%4 || r.Rep != i/4+1 || !r.OK() {
			t.Fatalf("run %d: config %d rep %d ok %v err %q (%s)", i, r.Config, r.Rep, r.OK(), r.Err, r.LastLog)
		}
		if runtime.GOOS == "linux" && math.IsNaN(r.DiskReadMiB) {
			t.Errorf("run %d: no disk read count", i)
		}
	}
	bmoe := rep.Runs[2]
	wantArgs := []string{"peer", "--stdout", bmoe.Args[2], "-m", "m.gguf", "-n", "4", "-p", "two words", "--csv", filepath.Join(o.OutDir, "02-bmoe-1") + ".csv"}
	if bmoe.Peer != "bmoe" || !slices.Equal(bmoe.Args, wantArgs) || bmoe.TokS != 1.12 || bmoe.Tokens != 64 || bmoe.TokSource != "bmoe-cli generation" {
		t.Fatalf("bmoe run: %+v\nargs %q, want %q", bmoe, bmoe.Args, wantArgs)
	}
	if b, err := os.ReadFile(filepath.Join(o.OutDir, "02-bmoe-1.log")); err != nil || !strings.Contains(string(b), `"two words"`) {
		t.Fatalf("the peer's stderr is not kept in its log: %q %v", b, err)
	}
	// llama-bench's JSON on stdout wins over the eval-time line on stderr
	if l := rep.Runs[3]; l.TokS != 13.440012 || l.TokSource != "llama-bench json" {
		t.Fatalf("llama run: %+v", l)
	}
	if c := rep.Configs[2]; !c.Peer || c.TokS != 1.12 || c.TokSMin != 1.12 || c.TokSMax != 1.12 || !math.IsNaN(c.SteadyTokS) || !math.IsNaN(c.Ratio) || c.OK != 3 {
		t.Fatalf("bmoe row: %+v", c)
	}
	if len(rep.Ratios) != 4 {
		t.Fatalf("%d ratio rows, want 2 pipe × 2 peers", len(rep.Ratios))
	}
	for _, pr := range rep.Ratios {
		lanes := 1.0
		if strings.Contains(pr.Pipe, "=2") {
			lanes = 2
		}
		peer := map[string]float64{"bmoe": 1.12, "llama": 13.440012}[pr.Peer]
		want := 1.5 * lanes * 0.9 / peer // the fake's tok_s
		if pr.N != 3 || len(pr.Rounds) != 3 || math.Abs(pr.Median-want) > 1e-3*want || math.Abs(pr.Min-want) > 1e-3*want || math.Abs(pr.Max-want) > 1e-3*want {
			t.Errorf("%s ÷ %s: %+v, want %.4f every round", pr.Pipe, pr.Peer, pr, want)
		}
	}
	var text, md, js bytes.Buffer
	for _, x := range []struct {
		b      *bytes.Buffer
		format string
	}{{&text, "text"}, {&md, "markdown"}, {&js, "json"}} {
		if err := rep.Write(x.b, x.format); err != nil {
			t.Fatal(err)
		}
	}
	for _, want := range []string{"bmoe (peer)", "pipe ÷ peer", "io-threads=2 ÷ llama: min", "disk GB/s before", "1.120 (1.120–1.120)"} {
		if !strings.Contains(text.String(), want) || !strings.Contains(md.String(), want) {
			t.Errorf("text or markdown lacks %q:\n%s\n%s", want, text.String(), md.String())
		}
	}
	if !strings.Contains(md.String(), "| round | pipe | tok/s | disk GB/s | peer | tok/s | disk GB/s | pipe ÷ peer |") {
		t.Errorf("markdown ratio table header missing:\n%s", md.String())
	}
	var back struct {
		Peers  []map[string]any `json:"peers"`
		Ratios []struct {
			Median float64 `json:"median"`
			Rounds []struct {
				Ratio    float64  `json:"ratio"`
				PipeDisk *float64 `json:"pipe_disk_GB_s"`
			} `json:"rounds"`
		} `json:"peer_ratios"`
		Runs []RunResult `json:"runs"`
	}
	if err := json.Unmarshal(js.Bytes(), &back); err != nil {
		t.Fatalf("json: %v\n%s", err, js.String())
	}
	if len(back.Peers) != 2 || len(back.Ratios) != 4 || len(back.Ratios[0].Rounds) != 3 || back.Ratios[0].Rounds[0].PipeDisk != nil || back.Runs[2].TokSource == "" {
		t.Fatalf("json lacks the peers, ratios or runs:\n%.3000s", js.String())
	}
	if !strings.Contains(log.String(), "peer bmoe rep 3: ok, 1.120 tok/s (bmoe-cli generation)") {
		t.Errorf("log:\n%s", log.String())
	}
}

// TestPeerUnreadable: a peer that exits 0 without a rate stops the bench
// with an error naming it and showing its last lines; one that fails is
// a failed run with its last lines, and a peer whose every run failed
// fails the bench at the end.
func TestPeerUnreadable(t *testing.T) {
	o := fakeOptions(t)
	o.Repeat = 2
	o.Peers = []Peer{fakePeerSpec(t, "noisy", "--stdout", "no-rate.stdout")}
	rep, err := Run(context.Background(), o)
	if !errors.Is(err, ErrPeerOutput) || !strings.Contains(err.Error(), "peer noisy round 1") || !strings.Contains(err.Error(), "stdout|   -n, --n-predict N") {
		t.Fatalf("unreadable peer: %v", err)
	}
	if rep == nil || len(rep.Runs) != 2 || rep.Runs[1].OK() || rep.Runs[1].TokS != 0 || !strings.Contains(rep.Runs[1].Err, "no tok/s") {
		t.Fatalf("the unreadable run is not reported: %+v", rep)
	}

	o = fakeOptions(t)
	o.Repeat = 2
	o.Peers = []Peer{fakePeerSpec(t, "broken", "--stdout", "bmoe-cli.stdout", "--exit", "3")}
	rep, err = Run(context.Background(), o)
	if err != nil {
		t.Fatal(err)
	}
	r := rep.Runs[1]
	if r.OK() || r.ExitCode != 3 || !strings.Contains(r.LastLog, "stdout| moe-cache: 41.3% hit") {
		t.Fatalf("failed peer run: %+v", r)
	}
	if err := rep.AllFailed(); !errors.Is(err, ErrAllFailed) || !strings.Contains(err.Error(), "broken") {
		t.Fatalf("AllFailed: %v", err)
	}
	if pr := rep.Ratios[0]; pr.N != 0 || !math.IsNaN(pr.Median) || !math.IsNaN(pr.Rounds[0].Ratio) {
		t.Fatalf("ratios of failed peer runs: %+v", pr)
	}
	var b bytes.Buffer
	if err := rep.Write(&b, "json"); err != nil {
		t.Fatalf("json with NaN ratios: %v", err)
	}
}

// TestPeerChecks: peers are refused before any run when their name is
// taken, a placeholder has no value or the program is missing.
func TestPeerChecks(t *testing.T) {
	for name, c := range map[string]struct {
		peer  string
		model string
		n     int
	}{
		"taken":      {"default=true", "m", 4},
		"no model":   {"x=true -m {model}", "", 4},
		"no n":       {"x=true -n {n}", "m", 0},
		"no program": {"x=no-such-engine-here -n 1", "m", 4},
	} {
		o := fakeOptions(t)
		o.Model, o.N = c.model, c.n
		p, err := ParsePeer(c.peer)
		if err != nil {
			t.Fatal(err)
		}
		o.Peers = []Peer{p}
		if rep, err := Run(context.Background(), o); !errors.Is(err, ErrBadPeer) || rep != nil {
			t.Errorf("%s: %v", name, err)
		}
	}
}

// dead reports whether pid has exited (gone, or a zombie nobody reaped).
func dead(pid int) bool {
	if b, err := os.ReadFile(fmt.Sprintf("/proc/%d/stat", pid)); err == nil {
		_, rest, _ := strings.Cut(string(b), ") ")
		return strings.HasPrefix(rest, "Z")
	}
	return errors.Is(syscall.Kill(pid, 0), syscall.ESRCH)
}

// TestPeerKilledWithItsGroup: a timeout, and a cancel (Ctrl-C), kill the
// peer's process group, the helper it started included.
func TestPeerKilledWithItsGroup(t *testing.T) {
	for _, how := range []string{"timeout", "cancel"} {
		o := fakeOptions(t)
		pidFile := filepath.Join(t.TempDir(), "grandchild.pid")
		o.Peers = []Peer{fakePeerSpec(t, "hang", "--spawn", pidFile, "--hang", "1")}
		o.Command = []string{"notrun"} // pipe's run fails at once
		if how == "timeout" {
			if rep := runTimedOut(t, o, pidFile); len(rep.Runs) != 2 {
				t.Fatalf("timeout: %+v", rep)
			}
		} else {
			ctx, cancel := context.WithCancel(context.Background())
			o.Timeout = 0
			go func() {
				// cancel once the helper runs (or after a minute, a hang
				// guard: readPid below then fails)
				for deadline := time.Now().Add(time.Minute); time.Now().Before(deadline); time.Sleep(10 * time.Millisecond) {
					if _, err := os.Stat(pidFile); err == nil {
						break
					}
				}
				cancel()
			}()
			_, err := Run(ctx, o)
			cancel()
			if !errors.Is(err, context.Canceled) {
				t.Fatalf("cancel: %v", err)
			}
		}
		waitDead(t, how, readPid(t, pidFile))
	}
}

// TestSpread: min, median and max of the rounds' ratios.
func TestSpread(t *testing.T) {
	for _, c := range []struct {
		in          []float64
		lo, med, hi float64
	}{
		{[]float64{3}, 3, 3, 3},
		{[]float64{4, 1, 2}, 1, 2, 4},
		{[]float64{4, 1, 2, 10}, 1, 3, 10},
	} {
		lo, med, hi := spread(c.in)
		if lo != c.lo || med != c.med || hi != c.hi {
			t.Errorf("spread(%v) = %v %v %v", c.in, lo, med, hi)
		}
	}
	if lo, med, hi := spread(nil); !math.IsNaN(lo) || !math.IsNaN(med) || !math.IsNaN(hi) {
		t.Error("spread of nothing is not NaN")
	}
	// ratios: round by round, a failed round left out of the spread, the
	// disk rate measured before each run carried along
	disk := func(g float64) *Roofline { return &Roofline{DiskGBs: g} }
	ok := map[string]string{}
	r := &Report{Repeat: 3, Configs: []ConfigStats{{Label: "pipe"}, {Label: "peer", Peer: true}}, Runs: []RunResult{
		{Config: 0, Rep: 1, TokS: 5.46, Summary: ok, Roofline: disk(1.9)}, {Config: 1, Rep: 1, Peer: "peer", TokS: 1.12, Roofline: disk(2.3)},
		{Config: 0, Rep: 2, TokS: 4.0, Summary: ok, Roofline: disk(0.9)}, {Config: 1, Rep: 2, Peer: "peer", TokS: 2.0, Roofline: disk(1.0)},
		{Config: 0, Rep: 3, TokS: 6.0, Summary: ok}, {Config: 1, Rep: 3, Peer: "peer", ExitCode: 1, Err: "exit status 1"},
	}}
	pr := r.ratios()
	if len(pr) != 1 || pr[0].N != 2 || len(pr[0].Rounds) != 3 {
		t.Fatalf("%+v", pr)
	}
	p := pr[0]
	if math.Abs(p.Rounds[0].Ratio-5.46/1.12) > 1e-12 || p.Rounds[1].Ratio != 2 || !math.IsNaN(p.Rounds[2].Ratio) ||
		p.Rounds[0].PipeDisk != 1.9 || p.Rounds[0].PeerDisk != 2.3 || !math.IsNaN(p.Rounds[2].PipeDisk) {
		t.Fatalf("rounds %+v", p.Rounds)
	}
	if p.Min != 2 || math.Abs(p.Max-5.46/1.12) > 1e-12 || math.Abs(p.Median-(2+5.46/1.12)/2) > 1e-12 {
		t.Fatalf("spread %v %v %v", p.Min, p.Median, p.Max)
	}
}

// TestPeerMemCap runs a peer under the cap: one that fits completes with
// the cgroup's peak recorded, one that does not is OOM-killed and
// reported as such (a result, not a bench failure), one that leaves a
// helper behind is cleaned up with its cgroup.
func TestPeerMemCap(t *testing.T) {
	needMemCgroup(t)
	o := fakeOptions(t)
	o.MemCap = 128 << 20
	o.Peers = []Peer{
		fakePeerSpec(t, "fits", "--alloc-mb", "16", "--stdout", "bmoe-cli.stdout"),
		fakePeerSpec(t, "big", "--alloc-mb", "512", "--stdout", "bmoe-cli.stdout"),
		fakePeerSpec(t, "leaves", "--spawn", filepath.Join(t.TempDir(), "helper.pid"), "--stdout", "bmoe-cli.stdout"),
	}
	rep, err := Run(context.Background(), o)
	if err != nil {
		t.Fatal(err)
	}
	byName := map[string]RunResult{}
	for _, r := range rep.Runs {
		byName[r.Label] = r
	}
	if r := byName["fits"]; !r.OK() || r.CgroupPeak <= 0 || r.TokS != 1.12 {
		t.Errorf("fits: %+v", r)
	}
	if r := byName["big"]; r.OK() || !r.OOMKilled {
		t.Errorf("big: ok %v oom %v err %q", r.OK(), r.OOMKilled, r.Err)
	}
	if r := byName["leaves"]; !r.OK() {
		t.Errorf("leaves: %+v", r)
	}
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

// waitDead fails the test when pid outlives a hang guard of a minute (a
// killed helper dies at once; the poll is for a process outside the test).
func waitDead(t *testing.T, what string, pid int) {
	t.Helper()
	for deadline := time.Now().Add(time.Minute); !dead(pid); time.Sleep(10 * time.Millisecond) {
		if time.Now().After(deadline) {
			_ = syscall.Kill(pid, syscall.SIGKILL)
			t.Fatalf("%s: helper %d outlived the run", what, pid)
		}
	}
}

func readPid(t *testing.T, path string) int {
	t.Helper()
	b, err := os.ReadFile(path)
	if err != nil {
		t.Fatalf("the peer did not start its helper: %v", err)
	}
	pid, err := strconv.Atoi(string(b))
	if err != nil {
		t.Fatal(err)
	}
	return pid
}

// TestPeerLeavesNoChildren: a peer that exits normally leaves no
// background process behind, neither one in its group nor one that started
// its own session; nor does a timed-out one (issue 35, defect 12).
func TestPeerLeavesNoChildren(t *testing.T) {
	dir := t.TempDir()
	grp, sess := filepath.Join(dir, "group.pid"), filepath.Join(dir, "session.pid")
	o := fakeOptions(t)
	o.Peers = []Peer{
		fakePeerSpec(t, "group", "--spawn", grp, "--stdout", "bmoe-cli.stdout"),
		fakePeerSpec(t, "session", "--spawn-setsid", sess, "--stdout", "bmoe-cli.stdout"),
	}
	rep, err := Run(context.Background(), o)
	if err != nil {
		t.Fatal(err)
	}
	for _, r := range rep.Runs {
		if r.Peer == "session" && (!r.OK() || r.Leftovers < 1) {
			t.Errorf("session peer: ok %v, leftovers killed %d", r.OK(), r.Leftovers)
		}
	}
	waitDead(t, "normal exit, same group", readPid(t, grp))
	waitDead(t, "normal exit, own session", readPid(t, sess))

	o = fakeOptions(t)
	o.Command = []string{"notrun"}
	timed := filepath.Join(dir, "timeout.pid")
	o.Peers = []Peer{fakePeerSpec(t, "hang", "--spawn-setsid", timed, "--hang", "1")}
	runTimedOut(t, o, timed)
	waitDead(t, "timeout, own session", readPid(t, timed))
}

// runTimedOut runs o, whose last peer hangs, under a timeout that kills it,
// and checks the run says so. The timeout starts at 2 s and doubles (up to
// 32 s) while the peer was killed before it wrote pidFile (a loaded machine
// starting it slowly): the test is of what the kill leaves behind, which
// needs the helper started.
func runTimedOut(t *testing.T, o Options, pidFile string) *Report {
	t.Helper()
	for d := 2 * time.Second; ; d *= 2 {
		o.Timeout = d
		rep, err := Run(context.Background(), o)
		if err != nil || !strings.Contains(rep.Runs[len(rep.Runs)-1].Err, "timed out") {
			t.Fatalf("timeout: %v %+v", err, rep)
		}
		if _, err := os.Stat(pidFile); err == nil || d >= 32*time.Second {
			return rep
		}
		t.Logf("the peer was killed after %v, before it started its helper: again with twice the timeout", d)
	}
}

// TestPeerLongLineBounded: a peer that prints one enormous line gets an
// error and a bench.json entry of a few lines, not the line (issue 35,
// defect 11). The line is longer than maxOutputRead (16 MiB); with -short
// (the race pass, where scanning it took two minutes) 1 MiB, still 2048
// times maxTailLine.
func TestPeerLongLineBounded(t *testing.T) {
	o := fakeOptions(t)
	mib := "20"
	if testing.Short() {
		mib = "1"
	}
	o.Peers = []Peer{fakePeerSpec(t, "flood", "--long-line", mib)}
	rep, err := Run(context.Background(), o)
	if !errors.Is(err, ErrPeerOutput) {
		t.Fatalf("err %v, want ErrPeerOutput", err)
	}
	if n := len(err.Error()); n > 8<<10 {
		t.Errorf("the error is %d bytes", n)
	}
	r := rep.Runs[len(rep.Runs)-1]
	if n := len(r.LastLog); n > 8<<10 || !strings.Contains(r.LastLog, "more bytes)") {
		t.Errorf("last_log is %d bytes: %.200q", n, r.LastLog)
	}
	var b bytes.Buffer
	if err := rep.Write(&b, "json"); err != nil || b.Len() > 1<<20 {
		t.Errorf("bench.json: %d bytes, %v", b.Len(), err)
	}
}
