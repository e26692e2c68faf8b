package main

import (
	"bytes"
	"os"
	"path/filepath"
	"reflect"
	"strings"
	"testing"

	"github.com/rs/zerolog"

	"github.com/pipe-engine/pipe/stages"
)

// TestOutputInvarianceCLI is a smoke test of the determinism invariant
// through the command line (flags, tokenizer, sampler, --logits-out): the
// logits of a streamed run with a cache below the working set and
// next-layer prefetch, and of an mmap run on one thread, equal those of the
// default mmap run. The full matrix of I/O settings is stages'
// TestOutputInvariance, on Config values.
func TestOutputInvarianceCLI(t *testing.T) {
	models := []string{"tiny-qwen3moe-Q4_K_M", "tiny-gemma4-Q4_K_M"}
	configs := [][]string{
		{"--moe-stream=true", "--cache-mb", "3", "--prefetch", "8", "--io-threads", "1"},
		{"--moe-stream", "true", "--cache-mb", "auto", "--dense-weights", "warm"},
		{"--moe-stream=false", "-t", "1"},
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
		{[]string{"--io-threads=-1"}, "--io-threads -1"},
		{[]string{"--moe-stream=auto"}, "auto, which always streamed, is gone"},
		{[]string{"--threads=-1"}, "-t -1"},
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

// TestFlagDefaultsAreTheLibrarys: the engine flags left alone give the
// configuration a library caller gets from a zero stages.Config: the flags
// read their defaults from EnsureDefaults, so the two cannot drift apart
// (--prefetch-policy was next-layer on the command line and temporal in the
// library).
func TestFlagDefaultsAreTheLibrarys(t *testing.T) {
	rc, err := parseRun([]string{"run", "-p", "x"})
	if err != nil {
		t.Fatal(err)
	}
	got, err := rc.EngineFlags.config("", 0, zerolog.Nop())
	if err != nil {
		t.Fatal(err)
	}
	want := stages.Config{Log: zerolog.Nop()}
	if !reflect.DeepEqual(*got.EnsureDefaults(), *want.EnsureDefaults()) {
		t.Errorf("flags' defaults\n %+v\nlibrary's\n %+v", got, want)
	}
}
