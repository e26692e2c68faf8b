package main

import (
	"bytes"
	"fmt"
	"math"
	"os"
	"path/filepath"
	"strconv"
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
	for _, k := range []string{`"mode":"kl-divergence"`, `"same_top_pct":100`, `"chunks":3`, `"scored_tokens":189`, `"kld":`, `"eval_read_MiB":`, `"status":"ok"`} {
		if !strings.Contains(sum, k) {
			t.Errorf("summary event lacks %s: %s", k, sum)
		}
	}
}

// pplNumbers parses llama-perplexity's result lines: the per-chunk values
// of "[i]x," and the final estimate and its uncertainty.
func pplNumbers(t *testing.T, out string) (chunks []float64, final, pm float64) {
	t.Helper()
	for _, l := range strings.Split(out, "\n") {
		switch {
		case strings.HasPrefix(l, "[1]"):
			for _, f := range strings.Split(strings.TrimSuffix(l, ","), ",") {
				_, v, _ := strings.Cut(f, "]")
				x, err := strconv.ParseFloat(v, 64)
				if err != nil {
					t.Fatalf("chunk value %q: %v", f, err)
				}
				chunks = append(chunks, x)
			}
		case strings.HasPrefix(l, "Final estimate: PPL = "):
			if _, err := fmt.Sscanf(l, "Final estimate: PPL = %f +/- %f", &final, &pm); err != nil {
				t.Fatalf("%q: %v", l, err)
			}
		}
	}
	if len(chunks) == 0 || final == 0 {
		t.Fatalf("no perplexity lines in %q", out)
	}
	return chunks, final, pm
}

func relDiff(a, b float64) float64 { return math.Abs(a-b) / math.Abs(b) }

// TestPerplexityMatchesLlama: pipe perplexity prints llama-perplexity's
// numbers for the same models, text and -c (testdata/perplexity/README.md
// has the commands, the measured agreement and why it is what it is). With
// an F32 KV cache the F32 models agree to the last printed digit
// (tiny-qwen3moe every number identical; tiny-gemma4 within 2.8e-6). With
// the F16 cache both programs round Q, K, V and the attention weights to
// F16, and with quantized weights every matmul rounds its input to 8 bits:
// each rounding turns the two programs' last-bit differences (their float
// orders differ in every matmul, rope, softmax and SiLU) into a one-step
// difference now and then, and those compound over the layers and
// positions. The bounds are the measured agreement with some margin: F32
// 3.3e-5 per chunk and 3.0e-5 final measured, quantized 4.3e-3 and 4.0e-4.
// With -short (the race pass; the arm64 runs do not select it) two of the
// six: qwen3moe F32 with the F32 cache and gemma4 Q4_K_M with the F16 one,
// both weight kinds, both caches and both families; all six took 162 s of
// the race run at load 37, and the plain pass runs them all.
func TestPerplexityMatchesLlama(t *testing.T) {
	short := map[string]bool{"tiny-qwen3moe-F32-kvf32": true, "tiny-gemma4-Q4_K_M": true}
	const lastDigit = 1.0001e-4 // one unit of the 4th decimal, as printed
	for _, c := range []struct {
		model, ref string
		args       []string
		chunkTol   float64 // relative; 0: within one unit of the last printed digit
		finalTol   float64
	}{
		{"tiny-qwen3moe-F32", "tiny-qwen3moe-F32-kvf32", []string{"--kv-type", "f32"}, 0, 0},
		{"tiny-gemma4-F32", "tiny-gemma4-F32-kvf32", []string{"--kv-type", "f32"}, 5e-6, 5e-6},
		{"tiny-qwen3moe-F32", "tiny-qwen3moe-F32", nil, 5e-5, 5e-5},
		{"tiny-gemma4-F32", "tiny-gemma4-F32", nil, 5e-5, 5e-5},
		{"tiny-qwen3moe-Q4_K_M", "tiny-qwen3moe-Q4_K_M", nil, 6e-3, 6e-4},
		{"tiny-gemma4-Q4_K_M", "tiny-gemma4-Q4_K_M", nil, 6e-3, 6e-4},
	} {
		t.Run(c.ref, func(t *testing.T) {
			if testing.Short() && !short[c.ref] {
				t.Skip("short: two of the six")
			}
			ref, err := os.ReadFile("../../testdata/perplexity/" + c.ref + ".ref")
			if err != nil {
				t.Fatal(err)
			}
			args := append([]string{"--log-level", "error", "perplexity", "-m", "../../testdata/golden/models/" + c.model + ".gguf", "-f", pplText, "-c", "128"}, c.args...)
			out := runPipe(t, args...)
			wc, wf, wpm := pplNumbers(t, string(ref))
			gc, gf, gpm := pplNumbers(t, out)
			off := func(got, want, tol float64) bool {
				if tol == 0 {
					return math.Abs(got-want) > lastDigit
				}
				return relDiff(got, want) > tol
			}
			bound := fmt.Sprintf("relative %g", c.chunkTol)
			if c.chunkTol == 0 {
				bound = "one unit of the last printed digit"
			}
			if len(gc) != len(wc) {
				t.Fatalf("%d chunks, llama-perplexity %d", len(gc), len(wc))
			}
			for i := range wc {
				if off(gc[i], wc[i], c.chunkTol) {
					t.Errorf("chunk %d: %.4f, llama-perplexity %.4f (relative %.2g; bound: %s)", i+1, gc[i], wc[i], relDiff(gc[i], wc[i]), bound)
				}
			}
			if off(gf, wf, c.finalTol) || relDiff(gpm, wpm) > max(10*c.finalTol, 1e-5) {
				t.Errorf("final PPL %.4f +/- %.5f, llama-perplexity %.4f +/- %.5f (relative bound %g; 0: one unit of the last digit)", gf, gpm, wf, wpm, c.finalTol)
			}
		})
	}
}

// refValue is the first number after label in a KL report.
func refValue(t *testing.T, report, label string) float64 {
	t.Helper()
	for _, l := range strings.Split(report, "\n") {
		if rest, ok := strings.CutPrefix(l, label); ok {
			f := strings.Fields(strings.TrimLeft(rest, " :"))
			x, err := strconv.ParseFloat(strings.TrimSuffix(f[0], "%"), 64)
			if err != nil {
				t.Fatalf("%q: %v", l, err)
			}
			return x
		}
	}
	t.Fatalf("no %q in\n%s", label, report)
	return 0
}

// TestKLDivergenceReadsLlamaBase: pipe reads llama-perplexity's
// --kl-divergence-base file: the base's perplexity, computed from the file
// alone, is llama-perplexity's to the last printed digit, and the KL report
// of the Q4_K_M model against it agrees with llama-perplexity's.
func TestKLDivergenceReadsLlamaBase(t *testing.T) {
	ref, err := os.ReadFile("../../testdata/perplexity/tiny-qwen3moe-Q4_K_M-vs-F32.kl.ref")
	if err != nil {
		t.Fatal(err)
	}
	out := runPipe(t, "--log-level", "error", "perplexity", "-m", "../../testdata/golden/models/tiny-qwen3moe-Q4_K_M.gguf",
		"--kl-divergence-base", "../../testdata/perplexity/tiny-qwen3moe-F32.kld", "--kl-divergence")
	r, g := string(ref), out
	if w, got := refValue(t, r, "Mean PPL(base)"), refValue(t, g, "Mean PPL(base)"); w != got {
		t.Errorf("PPL(base) %v, llama-perplexity %v", got, w)
	}
	for _, c := range []struct {
		label string
		tol   float64 // relative
	}{{"Mean PPL(Q)  ", 1e-3}, {"Mean    KLD", 2e-2}, {"Median  KLD", 2e-2}, {"Same top p", 1e-2}, {"RMS Δp", 0.1}} {
		w, got := refValue(t, r, c.label), refValue(t, g, c.label)
		if relDiff(got, w) > c.tol {
			t.Errorf("%s: %v, llama-perplexity %v", strings.TrimSpace(c.label), got, w)
		}
	}
}
