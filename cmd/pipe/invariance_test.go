package main

import (
	"bytes"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// TestOutputInvariance is the determinism invariant: the logits are
// bit-identical whatever the I/O settings. The tiny F32 golden model has
// 4 layers × top-2 of 8 experts of ~0.8 MB each, so one token's working set
// is ~6.3 MB and all experts ~25 MB: --cache-mb 3 is below the working set
// (the LRU cliff), 12 about half the experts, 30 all of them. The gemma4
// files (3 layers × top-2 of 8 experts of 0.75 MB at F32: a 4.5 MB working
// set, 18 MB in all) run the same settings: per-layer geometry, the dense
// MLP beside the experts and the router on the attention output (what
// next-layer prefetch peeks with) must not change a bit either.
func TestOutputInvariance(t *testing.T) {
	models := []string{"tiny-qwen3moe-F32", "tiny-qwen3moe-Q4_K_M", "tiny-gemma4-F32", "tiny-gemma4-Q4_K_M"}
	if testing.Short() {
		models = []string{"tiny-qwen3moe-Q4_K_M", "tiny-gemma4-Q4_K_M"}
	}
	configs := [][]string{
		{"--moe-stream=true", "--io-threads", "1"},
		{"--moe-stream=true", "--io-threads", "2"},
		{"--moe-stream=true", "--io-threads", "8"},
		{"--moe-stream=true", "--cache-mb", "0"},
		{"--moe-stream=true", "--cache-mb", "3"},
		{"--moe-stream=true", "--cache-mb", "12"},
		{"--moe-stream=true", "--cache-mb", "30", "--overlap=false"},
		{"--moe-stream=true", "--cache-mb", "3", "--overlap=false", "--io-threads", "1"},
		{"--moe-stream=true", "--dense-weights", "warm"},
		{"--moe-stream=true", "--dense-weights", "mmap", "-t", "1"},
		{"--moe-stream=true", "--cache-mb", "12", "--prefetch", "2"},
		{"--moe-stream=true", "--cache-mb", "12", "--prefetch", "2", "--prefetch-policy", "temporal"},
		{"--moe-stream=true", "--cache-mb", "3", "--prefetch", "8", "--prefetch-policy", "next-layer", "--io-threads", "1"},
		{"--moe-stream=true", "--cache-mb", "12", "--prefetch", "4", "--prefetch-policy", "popular"},
		{"--moe-stream=true", "--cache-mb", "12", "--prefetch", "8", "--prefetch-lanes", "0", "--io-threads", "4"},
		{"--moe-stream=true", "--cache-mb", "3", "--no-huge-pages", "--prefetch", "8", "--prefetch-lanes", "2"},
		{"--moe-stream=true", "--no-odirect", "-t", "2"},
		{"--moe-stream=false", "-t", "1"},
		{"--moe-stream=false", "--dense-weights", "mmap"},
	}
	prompt, err := os.ReadFile("../../testdata/golden/prompts/p1_village.txt")
	if err != nil {
		t.Fatal(err)
	}
	for _, m := range models {
		path := filepath.Join("../../testdata/golden/models", m+".gguf")
		logits := func(extra ...string) []byte {
			out := filepath.Join(t.TempDir(), "l.bin")
			args := append([]string{"--log-level", "error", "run", "-m", path, "-p", string(prompt), "-n", "12",
				"--temp", "0", "--ignore-eos", "--cache-mb", "20", "--logits-out", out}, extra...)
			runPipe(t, args...)
			b, err := os.ReadFile(out)
			if err != nil {
				t.Fatal(err)
			}
			return b
		}
		base := logits("--moe-stream=false")
		if len(base) == 0 {
			t.Fatal("no logits")
		}
		for _, c := range configs {
			t.Run(m+"/"+strings.Join(c, " "), func(t *testing.T) {
				if got := logits(c...); !bytes.Equal(got, base) {
					t.Fatalf("logits differ from the mmap baseline (%d vs %d bytes)", len(got), len(base))
				}
			})
		}
	}
}

// TestRunFlagErrors: a bad run flag is a one-line error naming the flag and a
// non-zero exit, before any model is opened.
func TestRunFlagErrors(t *testing.T) {
	model := filepath.Join("../../testdata/golden/models", "tiny-qwen3moe-F32.gguf")
	for _, c := range []struct {
		args []string
		want string
	}{
		{[]string{"--io-threads", "0"}, "--io-threads 0"},
		{[]string{"--io-threads", "300"}, "--io-threads 300"},
		{[]string{"--prefetch=-1"}, "--prefetch -1"},
		{[]string{"--prefetch-lanes=-2"}, "--prefetch-lanes -2"},
		{[]string{"--n-predict=-3"}, "-n -3"},
		{[]string{"--n-expert-used=-1"}, "--n-expert-used -1"},
		{[]string{"--cpus", "3-1"}, "--cpus"},
		{[]string{"--cpus", "1023"}, "--cpus"},
		{[]string{"--prefetch-lanes", "-2"}, "--prefetch-lanes"}, // kong: a short flag, not a value
	} {
		args := append([]string{"run", "-m", model, "-p", "hi"}, c.args...)
		out, errOut, code := inspectRun(t, args...)
		if code == 0 || out != "" || !strings.Contains(errOut, c.want) || strings.Count(strings.TrimSpace(errOut), "\n") != 0 {
			t.Errorf("%v: exit %d, stdout %q, stderr %q; want a one-line error naming %q", c.args, code, out, errOut, c.want)
		}
	}
}
