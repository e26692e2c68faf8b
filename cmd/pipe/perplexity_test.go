package main

import (
	"bytes"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

const pplText = "../../testdata/perplexity/text.txt"

// TestPerplexityFlagErrors: bad input ends with a message naming the flag
// or file and a non-zero exit, never a crash, and no output destroys an
// input.
func TestPerplexityFlagErrors(t *testing.T) {
	dir := t.TempDir()
	short := filepath.Join(dir, "short.txt")
	if err := os.WriteFile(short, []byte("too short"), 0o644); err != nil {
		t.Fatal(err)
	}
	junk := filepath.Join(dir, "junk.kld")
	if err := os.WriteFile(junk, []byte("not a base file at all"), 0o644); err != nil {
		t.Fatal(err)
	}
	text, err := os.ReadFile(pplText)
	if err != nil {
		t.Fatal(err)
	}
	for _, c := range []struct {
		args []string
		want string
	}{
		{[]string{"-m", tinyModel}, "-f FILE"},
		{[]string{"-m", tinyModel, "-f", pplText, "--kl-divergence"}, "--kl-divergence needs --kl-divergence-base"},
		{[]string{"-m", tinyModel, "-f", short, "-c", "128"}, "at least 256 tokens"},
		{[]string{"-m", tinyModel, "-f", pplText, "-c", "2"}, "-c 2"},
		{[]string{"-m", tinyModel, "-f", pplText, "--chunks", "0"}, "--chunks 0"},
		{[]string{"-m", tinyModel, "--kl-divergence", "--kl-divergence-base", junk}, junk},
		{[]string{"-m", tinyModel, "--kl-divergence", "--kl-divergence-base", filepath.Join(dir, "missing")}, "missing"},
		{[]string{"-m", tinyModel, "-f", pplText, "-c", "128", "--kl-divergence-base", pplText}, "refusing to write it"},
		{[]string{"-m", filepath.Join(dir, "none.gguf"), "-f", pplText}, "none.gguf"},
	} {
		code, stderr := runCode(t, nil, append([]string{"perplexity"}, c.args...)...)
		noStack(t, stderr)
		if code == 0 || !strings.Contains(stderr, c.want) {
			t.Errorf("pipe perplexity %s: exit %d, stderr lacks %q:\n%s", strings.Join(c.args, " "), code, c.want, stderr)
		}
	}
	if after, _ := os.ReadFile(pplText); !bytes.Equal(after, text) {
		t.Fatal("the text -f was modified")
	}
}

// TestPerplexitySaveThenKL: a base saved by one run and compared by another
// run of the same model agrees with itself (KL from the 16-bit log-prob
// quantization only, the same top token everywhere), and the summary event
// carries the numbers.
func TestPerplexitySaveThenKL(t *testing.T) {
	base := filepath.Join(t.TempDir(), "base.kld")
	out := runPipe(t, "perplexity", "-m", tinyModel, "-f", pplText, "-c", "128", "--chunks", "3", "--kl-divergence-base", base)
	if !strings.Contains(out, "[3]") || !strings.Contains(out, "Final estimate: PPL = ") {
		t.Fatalf("perplexity output:\n%s", out)
	}
	var stdout bytes.Buffer
	code, stderr := runCode(t, &stdout, "--log-format", "json", "perplexity", "-m", tinyModel, "--kl-divergence-base", base, "--kl-divergence")
	if code != 0 {
		t.Fatalf("exit %d:\n%s", code, stderr)
	}
	if !strings.Contains(stdout.String(), "Same top p: 100.000 ± 0.000 %") {
		t.Fatalf("KL output:\n%s", stdout.String())
	}
	var sum string
	for _, l := range strings.Split(stderr, "\n") {
		if strings.Contains(l, `"event":"summary"`) {
			sum = l
		}
	}
	for _, k := range []string{`"mode":"kl-divergence"`, `"same_top_pct":100`, `"chunks":3`, `"scored_tokens":189`, `"kld":`, `"status":"ok"`} {
		if !strings.Contains(sum, k) {
			t.Errorf("summary event lacks %s: %s", k, sum)
		}
	}
}
