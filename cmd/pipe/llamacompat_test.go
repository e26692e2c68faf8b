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
		// negative numbers after a space are the flag's value
		{[]string{"run", "-n", "-1", "--seed", "-1", "--repeat-last-n", "-1", "-s", "-7", "--temp", "-0.5"},
			[]string{"run", "-n-1", "--seed=-1", "--repeat-last-n=-1", "-s-7", "--temp=-0.5"}},
		{[]string{"run", "--n-predict=-1", "-p", "-1"}, []string{"run", "--n-predict=-1", "-p-1"}},
		{[]string{"run", "-p", "x", "-n", "-abc"}, []string{"run", "-p", "x", "-n", "-abc"}},
		// llama.cpp's spellings are run's and serve's only; negative numbers everyone's
		{[]string{"report", "--warmup", "2", "-v", "x.csv"}, []string{"report", "--warmup", "2", "-v", "x.csv"}},
		{[]string{"report", "--warmup", "-1"}, []string{"report", "--warmup=-1"}},
		// -v, -st, and the switches pipe accepts and ignores
		{[]string{"run", "-v", "--verbose", "-st"}, []string{"run", "--log-level=debug", "--log-level=debug", "--single-turn"}},
		{[]string{"run", "--no-warmup", "-co", "-p", "x", "--color", "off", "--warmup"}, []string{"run", "-p", "x"}},
		// llama.cpp reads '_' in a long flag's name as '-' (llama-server's tests pass
		// --backend_sampling); --backend-sampling changes no output and is accepted
		// -b is serve's --batch-size (llama-server's n_batch)
		{[]string{"serve", "-b", "64", "-ub", "32"}, []string{"serve", "--batch-size", "64", "--ubatch-size", "32"}},
		{[]string{"serve", "--backend_sampling", "--ctx_size=64", "-bs", "-p", "--not_a_flag"}, []string{"serve", "--ctx-size=64", "-p", "--not_a_flag"}},
	} {
		got, err := translateArgs(c.in)
		if err != nil || !slices.Equal(got, c.want) {
			t.Errorf("%q → %q (%v), want %q", c.in, got, err, c.want)
		}
	}
	for _, bad := range []string{"-ngl", "--n-gpu-layers=99", "-ot", "--n-cpu-moe", "--mlock", "-fa", "--no-mmap", "-nocb", "-hf", "--hf-repo", "-hff", "-mu"} {
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

// TestHFRefused: -hf is refused by name with what to do (kong read it as
// -h -f and printed help with status 0).
func TestHFRefused(t *testing.T) {
	var stdout, stderr bytes.Buffer
	code := run(context.Background(), []string{"--log-format", "console", "run", "-hf", "Qwen/Qwen3-30B-A3B-GGUF"}, &stdout, &stderr)
	if code != 2 || stdout.Len() != 0 || !strings.Contains(stderr.String(), "-hf is a llama.cpp flag") ||
		!strings.Contains(stderr.String(), "download the GGUF") || !strings.Contains(stderr.String(), "-m") {
		t.Fatalf("exit %d, stdout %q, stderr %q", code, stdout.String(), stderr.String())
	}
}

func TestReversePrompts(t *testing.T) {
	r := newReversePrompts([]string{"User:", ""})
	for i, tok := range []string{"Hi", " there.", "\nUs", "er", ":"} {
		if got := r.add(tok); got != (i == 4) {
			t.Fatalf("token %d %q: stop %v", i, tok, got)
		}
	}
	r.reset()
	if r.add("er:") {
		t.Fatal("a stop split across a reset matched")
	}
	if newReversePrompts(nil).add("anything") {
		t.Fatal("no -r stopped a reply")
	}
}

// TestLlamaHabitsRun: llama.cpp users' spellings run as they meant them:
// -n -1 and --seed -1 after a space, --repeat-last-n -1; -r stops the reply
// at the text; -sys without --chat renders the chat template (the ids equal
// --chat --system-prompt's); -st with -p is one chat turn; -v, --no-warmup
// and -co are accepted.
func TestLlamaHabitsRun(t *testing.T) {
	dir := t.TempDir()
	const tiny = "../../testdata/golden/models/tiny-qwen3moe-Q8_0.gguf"
	gen := func(args ...string) (prompt, gen []string, text string) {
		t.Helper()
		out := filepath.Join(dir, "ids")
		var stdout, stderr bytes.Buffer
		base := []string{"--log-level", "error", "run", "-m", tiny, "--temp", "0", "--hot-set", "none",
			"--moe-stream", "--cache-mb", "4M", "--tokens-out", out}
		if code := run(context.Background(), append(base, args...), &stdout, &stderr); code != 0 {
			t.Fatalf("%q: exit %d: %s", args, code, stderr.String())
		}
		b, err := os.ReadFile(out)
		if err != nil {
			t.Fatal(err)
		}
		lines := strings.SplitN(string(b), "\n", 3)
		return strings.Split(lines[0], ","), strings.Split(lines[1], ","), stdout.String()
	}
	_, all, _ := gen("-p", "hello", "-n", "-1", "-c", "24", "--seed", "-1", "--repeat-last-n", "-1", "-v", "--no-warmup", "-co", "auto")
	if len(all) < 8 {
		t.Fatalf("-n -1 -c 24 generated %d tokens, want the context's rest", len(all))
	}
	_, eight, text := gen("-p", "hello", "-n", "8", "-s", "-1")
	text = strings.TrimSuffix(text, "\n")
	stop := text[len(text)/2:][:2]
	_, some, out := gen("-p", "hello", "-n", "8", "-r", stop)
	if len(some) >= len(eight) || !strings.Contains(out, stop) || !strings.HasPrefix(text, strings.TrimSuffix(out, "\n")) {
		t.Errorf("-r %q: %d tokens %q; without -r %d tokens %q", stop, len(some), out, len(eight), text)
	}
	chatIDs, _, _ := gen("-p", "hello", "-n", "1", "--chat", "--system-prompt", "be brief")
	sysIDs, _, _ := gen("-p", "hello", "-n", "1", "-sys", "be brief")
	if !slices.Equal(chatIDs, sysIDs) {
		t.Errorf("-sys without --chat: prompt ids %v, --chat -sys %v", sysIDs, chatIDs)
	}
	stIDs, _, _ := gen("-p", "hello", "-n", "1", "-st", "-sys", "be brief")
	if !slices.Equal(chatIDs, stIDs) {
		t.Errorf("-st -p: prompt ids %v, --chat -sys %v", stIDs, chatIDs)
	}
}

// TestTemplateFlags: --jinja runs the GGUF's own template (and takes any
// --chat-template that is no built-in or file as Jinja source) and
// --chat-template-file a Jinja file, giving the built-in ChatML renderer's
// prompt ids for a Qwen3 chat; --chat-template names a built-in; a bad
// one stops the run with the flag's name.
func TestTemplateFlags(t *testing.T) {
	dir := t.TempDir()
	const tiny = "../../testdata/golden/models/tiny-qwen3moe-Q8_0.gguf"
	ids := func(args ...string) (string, int, string) {
		t.Helper()
		out := filepath.Join(dir, "ids")
		var stdout, stderr bytes.Buffer
		base := []string{"--log-level", "error", "--log-format", "console", "run", "-m", tiny, "-n", "1", "--temp", "0", "--hot-set", "none",
			"--cache-mb", "4M", "--tokens-out", out, "-p", "hello", "-sys", "be brief"}
		code := run(context.Background(), append(base, args...), &stdout, &stderr)
		b, _ := os.ReadFile(out)
		return strings.SplitN(string(b), "\n", 2)[0], code, stderr.String()
	}
	builtin, code, errs := ids()
	if code != 0 || builtin == "" {
		t.Fatalf("built-in: exit %d: %s", code, errs)
	}
	for _, args := range [][]string{
		{"--jinja"},
		{"--chat-template-file", "../../testdata/chat-templates/Qwen-Qwen3-0.6B.jinja"},
		{"--chat-template", "../../testdata/chat-templates/Qwen3-Coder.jinja"},
		{"--chat-template", "chatml"},
		{"--chat-template", "{% for m in messages %}<|im_start|>{{ m.role }}\n{{ m.content }}<|im_end|>\n{% endfor %}<|im_start|>assistant\n"},
	} {
		if got, code, errs := ids(args...); code != 0 || got != builtin {
			t.Errorf("%q: exit %d, prompt ids %s, built-in %s: %s", args, code, got, builtin, errs)
		}
	}
	for _, name := range []string{"gemma4", "llama3", "mistral-v7"} {
		if got, code, errs := ids("--chat-template", name); code != 0 || got == builtin {
			t.Errorf("--chat-template %s: exit %d, ids %s equal ChatML's: %s", name, code, got, errs)
		}
	}
	// with --jinja, a string that names nothing is Jinja source, as llama.cpp's
	text, code, errs := ids("--jinja", "--chat-template", "This is not a chat template, it is")
	if want, _, _ := ids("--chat-template", "{{ 'This is not a chat template, it is' }}"); code != 0 || text != want {
		t.Errorf("--jinja --chat-template TEXT: exit %d, ids %s, want %s: %s", code, text, want, errs)
	}
	for _, c := range []struct{ arg, want string }{
		{"llama5", "--chat-template \"llama5\": not a built-in"},
		{"{% for m in messages %}", "--chat-template"},
	} {
		if _, code, errs := ids("--chat-template", c.arg); code == 0 || !strings.Contains(errs, c.want) {
			t.Errorf("--chat-template %q: exit %d: %s", c.arg, code, errs)
		}
	}
}
