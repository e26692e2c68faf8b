package main

import (
	"bytes"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
)

// lossyRun runs the tiny model greedily with a cache below its working set
// and returns the logits file and the CSV.
func lossyRun(t *testing.T, extra ...string) (logits []byte, csv string) {
	t.Helper()
	dir := t.TempDir()
	lp, cp := filepath.Join(dir, "l.bin"), filepath.Join(dir, "run.csv")
	args := append([]string{"--log-level", "error", "run", "-m", tinyModel, "-p", "Once upon a time there was", "-n", "16",
		"--temp", "0", "--ignore-eos", "--moe-stream=true", "--cache-mb", "3", "--hot-set", "none",
		"--logits-out", lp, "--csv", cp}, extra...)
	runPipe(t, args...)
	l, err := os.ReadFile(lp)
	if err != nil {
		t.Fatal(err)
	}
	c, err := os.ReadFile(cp)
	if err != nil {
		t.Fatal(err)
	}
	return l, string(c)
}

// summaryValue is key's value in the CSV's `# summary` trailer ("" if absent).
func summaryValue(csv, key string) string {
	for _, l := range strings.Split(csv, "\n") {
		if !strings.HasPrefix(l, "# summary ") {
			continue
		}
		for _, f := range strings.Fields(l) {
			if k, v, ok := strings.Cut(f, "="); ok && k == key {
				return v
			}
		}
	}
	return ""
}

// columnSum is the sum of a CSV column over the token rows.
func columnSum(t *testing.T, csv, col string) int64 {
	t.Helper()
	lines := strings.Split(strings.TrimSpace(csv), "\n")
	idx := -1
	for i, h := range strings.Split(lines[0], ",") {
		if h == col {
			idx = i
		}
	}
	if idx < 0 {
		t.Fatalf("no column %s in %q", col, lines[0])
	}
	var s int64
	for _, l := range lines[1:] {
		if strings.HasPrefix(l, "#") {
			continue
		}
		v, err := strconv.ParseFloat(strings.Split(l, ",")[idx], 64)
		if err != nil {
			t.Fatal(err)
		}
		s += int64(v)
	}
	return s
}

// TestLossyModesThatSkipNothingAreLossless: with each mode on at a setting
// that skips nothing (a drop threshold below every weight, a dynamic k that
// needs every expert's mass), the logits are the lossless run's bit for bit
// and the skip columns count zero — the plumbing is transparent; the modes
// off leave the CSV's columns as they were.
func TestLossyModesThatSkipNothingAreLossless(t *testing.T) {
	base, csv := lossyRun(t)
	if strings.Contains(csv, "moe_dropped") || summaryValue(csv, "moe_drop") != "" {
		t.Fatal("a lossless run has lossy columns")
	}
	for _, mode := range [][]string{{"--moe-drop", "1e-9"}, {"--moe-dynamic-k", "0.99999994"}, {"--moe-drop", "1e-9", "--moe-dynamic-k", "0.99999994"}} {
		l, csv := lossyRun(t, mode...)
		if !bytes.Equal(l, base) {
			t.Errorf("%v: logits differ from the lossless run's", mode)
		}
		for _, col := range []string{"moe_dropped", "moe_substituted", "moe_trimmed"} {
			if s := columnSum(t, csv, col); s != 0 {
				t.Errorf("%v: %s sums to %d", mode, col, s)
			}
		}
		if summaryValue(csv, "moe_routed") == "0" || summaryValue(csv, "moe_routed") == "" {
			t.Errorf("%v: the modes looked at no routing", mode)
		}
	}
}

// TestLossyModesSkipAndCount: each mode at full strength under a cache below
// the working set skips slots, the per-token columns add up to the
// summary's count, and the summary names the mode; the output changes.
func TestLossyModesSkipAndCount(t *testing.T) {
	base, _ := lossyRun(t)
	for _, c := range []struct {
		flag, value, col, key string
	}{
		{"--moe-drop", "1", "moe_dropped", "moe_drop"},
		{"--moe-substitute", "0.5", "moe_substituted", "moe_substitute"},
		{"--moe-dynamic-k", "0.5", "moe_trimmed", "moe_dynamic_k"},
	} {
		l, csv := lossyRun(t, c.flag, c.value)
		n := columnSum(t, csv, c.col)
		if n == 0 || summaryValue(csv, c.col) != strconv.FormatInt(n, 10) || summaryValue(csv, c.key) != c.value {
			t.Errorf("%s %s: column %s sums to %d, summary %s=%q %s=%q", c.flag, c.value, c.col, n,
				c.col, summaryValue(csv, c.col), c.key, summaryValue(csv, c.key))
		}
		if bytes.Equal(l, base) {
			t.Errorf("%s %s: the logits did not change", c.flag, c.value)
		}
	}
}

// TestLossyFlagErrors: out-of-range values and the cache-aware modes without
// a cache are refused, naming the flag.
func TestLossyFlagErrors(t *testing.T) {
	for _, c := range []struct {
		args []string
		want string
	}{
		{[]string{"--moe-drop", "1.5"}, "--moe-drop 1.5"},
		{[]string{"--moe-dynamic-k", "1"}, "--moe-dynamic-k 1"},
		{[]string{"--moe-substitute=-1"}, "--moe-substitute -1"},
		{[]string{"--moe-drop", "0.5", "--moe-stream=false"}, "need the expert cache"},
		{[]string{"--moe-substitute", "0.5", "--cache-mb", "0"}, "need the expert cache"},
	} {
		code, stderr := runCode(t, nil, append([]string{"run", "-m", tinyModel, "-p", "hi", "-n", "2"}, c.args...)...)
		noStack(t, stderr)
		if code == 0 || !strings.Contains(stderr, c.want) {
			t.Errorf("%v: exit %d, stderr %q; want %q", c.args, code, stderr, c.want)
		}
	}
}
