package main

import (
	"bytes"
	"context"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
)

func TestTranslateArgs(t *testing.T) {
	for _, c := range []struct {
		in, want []string
	}{
		{[]string{"run", "-sys", "be brief", "-cnv", "-ctk", "f32", "-ctv", "f32"},
			[]string{"run", "--system-prompt", "be brief", "--interactive", "--cache-type-k", "f32", "--cache-type-v", "f32"}},
		{[]string{"run", "-no-cnv", "--no-display-prompt", "--conversation"}, []string{"run", "--interactive=false", "--echo=false", "--interactive"}},
		{[]string{"run", "--moe-stream"}, []string{"run", "--moe-stream=true"}},
		{[]string{"run", "--moe-stream", "-p", "x"}, []string{"run", "--moe-stream=true", "-p", "x"}},
		{[]string{"run", "--moe-stream", "false"}, []string{"run", "--moe-stream", "false"}},
		{[]string{"run", "--moe-stream=auto"}, []string{"run", "--moe-stream=auto"}},
		{[]string{"run", "-p", "x", "--", "-ngl"}, []string{"run", "-p", "x", "--", "-ngl"}},
	} {
		got, err := translateArgs(c.in)
		if err != nil || !slices.Equal(got, c.want) {
			t.Errorf("%q → %q (%v), want %q", c.in, got, err, c.want)
		}
	}
	for _, bad := range []string{"-ngl", "--n-gpu-layers=99", "-ot", "--n-cpu-moe", "-b", "--mlock", "-fa", "--no-mmap", "-np"} {
		_, err := translateArgs([]string{"run", bad, "1"})
		name, _, _ := strings.Cut(bad, "=")
		if err == nil || !strings.Contains(err.Error(), name+" is a llama.cpp flag pipe cannot honour: ") {
			t.Errorf("%s: err %v", bad, err)
		}
	}
}

func TestProcessEscapes(t *testing.T) {
	for in, want := range map[string]string{
		`plain`:        "plain",
		`a\nb\tc\rd`:   "a\nb\tc\rd",
		`q\'\"\\`:      `q'"\`,
		`\x41\x4a!`:    "AJ!",
		`\xZZ \q end\`: `\xZZ \q end\`,
	} {
		if got := processEscapes(in); got != want {
			t.Errorf("%q → %q, want %q", in, got, want)
		}
	}
}

func TestParseCacheSize(t *testing.T) {
	for in, want := range map[string]int64{"0": 0, "512": 512 << 20, "6G": 6 << 30, "512M": 512 << 20, "1.5G": 3 << 29, "64MiB": 64 << 20} {
		if got, err := parseCacheSize(in); err != nil || got != want {
			t.Errorf("%q → %d (%v), want %d", in, got, err, want)
		}
	}
	for _, in := range []string{"-1", "lots", "", "6X"} {
		if _, err := parseCacheSize(in); err == nil || !strings.Contains(err.Error(), "--cache-mb") {
			t.Errorf("%q: err %v", in, err)
		}
	}
}

func TestKVType(t *testing.T) {
	for _, c := range []struct{ kv, k, v, want string }{
		{"f16", "", "", "f16"}, {"f16", "f32", "", "f32"}, {"f16", "", "f32", "f32"}, {"f32", "f16", "f16", "f16"},
	} {
		if got, err := kvType(c.kv, c.k, c.v); err != nil || got != c.want {
			t.Errorf("%+v → %q (%v)", c, got, err)
		}
	}
	for _, c := range [][3]string{{"f16", "f16", "f32"}, {"f16", "q8_0", ""}} {
		if _, err := kvType(c[0], c[1], c[2]); err == nil {
			t.Errorf("%v: no error", c)
		}
	}
}

// TestLlamaFlagsRun: llama.cpp's spellings drive a real run: -f reads the
// prompt, -e (default) turns \n into a newline, --no-escape keeps it, and
// an unsupported flag fails before anything loads.
func TestLlamaFlagsRun(t *testing.T) {
	dir := t.TempDir()
	const tiny = "../../testdata/golden/models/tiny-qwen3moe-Q8_0.gguf"
	promptIDs := func(args ...string) string {
		t.Helper()
		out := filepath.Join(dir, "ids")
		var stdout, stderr bytes.Buffer
		base := []string{"--log-level", "error", "run", "-m", tiny, "--predict", "2", "--temperature", "0", "-s", "1",
			"--moe-stream", "--cache-mb", "4M", "-ctk", "f32", "-ctv", "f32", "--tokens-out", out}
		if code := run(context.Background(), append(base, args...), &stdout, &stderr); code != 0 {
			t.Fatalf("%q: exit %d: %s", args, code, stderr.String())
		}
		b, err := os.ReadFile(out)
		if err != nil {
			t.Fatal(err)
		}
		return strings.SplitN(string(b), "\n", 2)[0]
	}
	file := filepath.Join(dir, "prompt.txt")
	if err := os.WriteFile(file, []byte("one\ntwo"), 0o644); err != nil {
		t.Fatal(err)
	}
	newline := promptIDs("-p", "one\ntwo", "--no-escape")
	if got := promptIDs("-p", `one\ntwo`); got != newline {
		t.Errorf(`-p 'one\ntwo' gave ids %s, a real newline %s`, got, newline)
	}
	if got := promptIDs("-f", file); got != newline {
		t.Errorf("-f gave ids %s, -p %s", got, newline)
	}
	if got := promptIDs("-p", `one\ntwo`, "--no-escape"); got == newline {
		t.Error("--no-escape still turned \\n into a newline")
	}
	var stdout, stderr bytes.Buffer
	if code := run(context.Background(), []string{"run", "-m", tiny, "-ngl", "99"}, &stdout, &stderr); code != 2 ||
		strings.Count(stderr.String(), "\n") != 1 || !strings.Contains(stderr.String(), "-ngl") {
		t.Fatalf("-ngl: exit %d, stderr %q", code, stderr.String())
	}
}
