package main

import (
	"context"
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// fakePeerArg makes the test binary another engine: it prints its
// arguments on stderr and the file after the flag on stdout.
const fakePeerArg = "-fake-peer"

func fakePeer(args []string) int {
	fmt.Fprintf(os.Stderr, "fake peer args: %q\n", args)
	if len(args) == 0 {
		return 2
	}
	b, err := os.ReadFile(args[0])
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		return 1
	}
	os.Stdout.Write(b)
	return 0
}

// TestBenchPeer: pipe bench runs the tiny model and a fake bmoe-cli
// interleaved for two rounds and writes the ratio table, with the rate
// read from the peer's output; a --peer-regex that matches nothing, a
// regex for no peer and a peer that is not there fail with the peer named.
func TestBenchPeer(t *testing.T) {
	t.Setenv(mainEnv, "1") // pipe's children are this test binary acting as pipe
	exe, err := os.Executable()
	if err != nil {
		t.Fatal(err)
	}
	out, err := filepath.Abs("../../tools/bench/testdata/peer/bmoe-cli.stdout")
	if err != nil {
		t.Fatal(err)
	}
	const tiny = "../../testdata/golden/models/tiny-qwen3moe-Q8_0.gguf"
	peer := fmt.Sprintf("bmoe='%s' %s '%s' -m {model} -n {n} --moe-stream", exe, fakePeerArg, out)
	dir := t.TempDir()
	bench := func(outDir string, args ...string) (int, string) {
		var buf syncBuffer
		base := []string{"--log-format", "json", "bench", "-m", tiny, "-n", "3", "--repeat", "2", "--out-dir", outDir, "--format", "text"}
		code := run(context.Background(), append(base, args...), &buf, &buf)
		return code, buf.String()
	}
	code, text := bench(filepath.Join(dir, "ok"), "--peer", peer)
	if code != 0 {
		t.Fatalf("exit %d:\n%s", code, text)
	}
	for _, want := range []string{"bmoe (peer)", "pipe ÷ peer", "default ÷ bmoe: min", "over 2 of 2 rounds"} {
		if !strings.Contains(text, want) {
			t.Errorf("table lacks %q:\n%s", want, text)
		}
	}
	b, err := os.ReadFile(filepath.Join(dir, "ok", "bench.json"))
	if err != nil {
		t.Fatal(err)
	}
	var rep struct {
		Runs []struct {
			Peer  string   `json:"peer"`
			TokS  float64  `json:"tok_s"`
			Args  []string `json:"args"`
			Label string   `json:"label"`
		} `json:"runs"`
		Ratios []struct {
			N      int     `json:"rounds_ok"`
			Median float64 `json:"median"`
			Rounds []struct {
				PipeTokS float64 `json:"pipe_tok_s"`
				Ratio    float64 `json:"ratio"`
			} `json:"rounds"`
		} `json:"peer_ratios"`
	}
	if err := json.Unmarshal(b, &rep); err != nil {
		t.Fatal(err)
	}
	if len(rep.Runs) != 4 || rep.Runs[1].Peer != "bmoe" || rep.Runs[1].TokS != 1.12 || rep.Runs[0].TokS <= 0 {
		t.Fatalf("runs: %+v", rep.Runs)
	}
	if got := strings.Join(rep.Runs[1].Args, " "); !strings.Contains(got, "tiny-qwen3moe-Q8_0.gguf -n 3 --moe-stream") || strings.Contains(got, "{") {
		t.Fatalf("placeholders not expanded: %s", got)
	}
	if len(rep.Ratios) != 1 || rep.Ratios[0].N != 2 {
		t.Fatalf("ratios: %+v", rep.Ratios)
	}
	for _, r := range rep.Ratios[0].Rounds {
		if r.Ratio != r.PipeTokS/1.12 {
			t.Fatalf("round ratio %v, want %v / 1.12", r.Ratio, r.PipeTokS)
		}
	}

	code, text = bench(filepath.Join(dir, "re"), "--peer", peer, "--peer-regex", `bmoe=speed (\S+)`)
	if code == 0 || !strings.Contains(text, "peer bmoe round 1") || !strings.Contains(text, "matches nothing") || !strings.Contains(text, "moe-cache: 41.3% hit") {
		t.Fatalf("a regex that matches nothing: exit %d:\n%s", code, text)
	}
	code, text = bench(filepath.Join(dir, "x"), "--peer", peer, "--peer-regex", `llama=(\S+) t/s`)
	if code == 0 || !strings.Contains(text, "--peer-regex llama") || strings.Contains(text, "bench_run") {
		t.Fatalf("a regex for no peer: exit %d:\n%s", code, text)
	}
	code, text = bench(filepath.Join(dir, "y"), "--peer", "llama=no-such-llama-bench -m {model}")
	if code == 0 || !strings.Contains(text, "--peer llama") || strings.Contains(text, "bench_run") {
		t.Fatalf("a missing program: exit %d:\n%s", code, text)
	}
}
