package main

import (
	"bufio"
	"encoding/json"
	"io"
	"net/http"
	"os"
	"os/exec"
	"slices"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/pipe-engine/pipe/gguf"
	"github.com/pipe-engine/pipe/tokenizer"
	"github.com/rs/zerolog"
)

// TestServeProcess runs a real `pipe serve` process: it logs where it
// listens, answers a streamed chat completion, answers /slots with 501 under
// --no-slots, and on SIGTERM shuts down and exits 0, every stderr line a JSON
// object.
func TestServeProcess(t *testing.T) {
	exe, err := os.Executable()
	if err != nil {
		t.Fatal(err)
	}
	cmd := exec.Command(exe, "serve", "-m", "../../testdata/golden/models/tiny-qwen3moe-Q8_0.gguf", "--port", "0",
		"-c", "256", "--temp", "0", "--cache-mb", "4", "-t", "2", "--no-slots")
	cmd.Env = append(os.Environ(), mainEnv+"=1")
	stderr, err := cmd.StderrPipe()
	if err != nil {
		t.Fatal(err)
	}
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	defer cmd.Process.Kill()
	var mu sync.Mutex
	var lines []string
	addr := make(chan string, 1)
	readDone := make(chan struct{})
	go func() {
		defer close(readDone)
		sc := bufio.NewScanner(stderr)
		for sc.Scan() {
			mu.Lock()
			lines = append(lines, sc.Text())
			mu.Unlock()
			var ev struct{ Event, Addr string }
			if json.Unmarshal(sc.Bytes(), &ev) == nil && ev.Event == "listening" {
				addr <- ev.Addr
			}
		}
	}()
	var url string
	select {
	case a := <-addr:
		url = "http://" + a
	case <-time.After(time.Minute):
		t.Fatal("no listening event in a minute")
	}
	resp, err := http.Post(url+"/v1/chat/completions", "application/json",
		strings.NewReader(`{"messages":[{"role":"user","content":"hi"}],"max_tokens":5,"stream":true}`))
	if err != nil {
		t.Fatal(err)
	}
	body, _ := io.ReadAll(resp.Body)
	resp.Body.Close()
	if resp.StatusCode != 200 || !strings.HasSuffix(string(body), "data: [DONE]\n\n") {
		t.Fatalf("status %d, body %q", resp.StatusCode, body)
	}
	// --no-slots turns /slots off (501); /metrics is off without --metrics,
	// as llama-server's
	for path, want := range map[string]int{"/slots": 501, "/metrics": 501} {
		r, err := http.Get(url + path)
		if err != nil {
			t.Fatal(err)
		}
		r.Body.Close()
		if r.StatusCode != want {
			t.Errorf("GET %s: %d, want %d", path, r.StatusCode, want)
		}
	}
	if err := cmd.Process.Signal(syscall.SIGTERM); err != nil {
		t.Fatal(err)
	}
	<-readDone
	if err := cmd.Wait(); err != nil {
		t.Fatalf("exit after SIGTERM: %v; stderr:\n%s", err, strings.Join(lines, "\n"))
	}
	events := map[string]bool{}
	for _, l := range lines {
		var ev map[string]any
		if err := json.Unmarshal([]byte(l), &ev); err != nil {
			t.Fatalf("stderr line is not JSON: %q", l)
		}
		events[ev["event"].(string)] = true
	}
	for _, e := range []string{"load", "listening", "request", "shutdown", "summary"} {
		if !events[e] {
			t.Errorf("no %q event on stderr", e)
		}
	}
}

// TestSummaryWindows: pipe serve's sink keeps a bounded summary window (a
// server does not grow with every token), pipe run's keeps every token so
// its CSV trailer is exactly what pipe report computes from the rows.
func TestSummaryWindows(t *testing.T) {
	var cli CLI
	k, err := parser(&cli, io.Discard, io.Discard, func(int) {})
	if err != nil {
		t.Fatal(err)
	}
	g := &Globals{Ctx: t.Context(), Stderr: io.Discard}
	if _, err := k.Parse([]string{"serve", "-m", chatModel}); err != nil {
		t.Fatal(err)
	}
	so, err := cli.Serve.options(g, chatModel, false)
	if err != nil {
		t.Fatal(err)
	}
	if so.Sink.SummaryWindow != serveSummaryWindow || serveSummaryWindow <= 0 {
		t.Errorf("serve: summary window %d, want %d > 0", so.Sink.SummaryWindow, serveSummaryWindow)
	}
	if _, err := k.Parse([]string{"run", "-m", chatModel}); err != nil {
		t.Fatal(err)
	}
	ro, err := cli.Run.options(g, chatModel, false, 1)
	if err != nil {
		t.Fatal(err)
	}
	if ro.Sink.SummaryWindow != 0 {
		t.Errorf("run: summary window %d, want 0 (every token)", ro.Sink.SummaryWindow)
	}
}

// TestServeReasoningFlags: --reasoning takes llama.cpp's spellings of on,
// off and auto (off, or --no-think, renders without thinking; -rea is its
// short form), --reasoning-budget -1 or more, --chat-template-kwargs a JSON
// object (enable_thinking a bool); anything else is an error naming the
// flag before the model is opened.
func TestServeReasoningFlags(t *testing.T) {
	var cli CLI
	k, err := parser(&cli, io.Discard, io.Discard, func(int) {})
	if err != nil {
		t.Fatal(err)
	}
	for _, c := range []struct {
		args    []string
		noThink bool
	}{
		{nil, false}, {[]string{"--reasoning", "on"}, false}, {[]string{"--reasoning=-1"}, false},
		{[]string{"--reasoning", "off"}, true}, {[]string{"--reasoning", "disabled"}, true},
		{[]string{"--reasoning", "auto", "--no-think"}, true},
	} {
		args, err := translateArgs(append([]string{"serve", "-m", chatModel}, c.args...))
		if err == nil {
			_, err = k.Parse(args)
		}
		if err != nil || cli.Serve.validate() != nil || cli.Serve.noThink() != c.noThink {
			t.Errorf("%q: %v, noThink %v, want %v", c.args, err, cli.Serve.noThink(), c.noThink)
		}
	}
	if out, err := translateArgs([]string{"serve", "-rea", "off"}); err != nil || out[1] != "--reasoning" {
		t.Errorf("-rea: %q %v", out, err)
	}
	if _, err := k.Parse([]string{"serve", "-m", chatModel, "--chat-template-kwargs", `{"enable_thinking": false, "x": [1]}`}); err != nil {
		t.Fatal(err)
	}
	if kw, err := cli.Serve.templateKwargs(); err != nil || string(kw["enable_thinking"]) != "false" || string(kw["x"]) != "[1]" {
		t.Errorf("--chat-template-kwargs: %v %v", kw, err)
	}
	for _, c := range []struct {
		args []string
		flag string
	}{
		{[]string{"serve", "-m", tinyModel, "--port", "0", "--reasoning", "maybe"}, "--reasoning"},
		{[]string{"serve", "-m", tinyModel, "--port", "0", "--reasoning-budget=-2"}, "--reasoning-budget"},
		{[]string{"serve", "-m", tinyModel, "--port", "0", "--chat-template-kwargs", "[1]"}, "--chat-template-kwargs"},
		{[]string{"serve", "-m", tinyModel, "--port", "0", "--chat-template-kwargs", `{"enable_thinking":"no"}`}, "--chat-template-kwargs"},
	} {
		code, stderr := runCode(t, io.Discard, c.args...)
		if code == 0 || !strings.Contains(stderr, c.flag) || strings.Contains(stderr, `"event":"load"`) {
			t.Errorf("pipe %s: exit %d, want an error naming %s before loading; stderr:\n%.600s", strings.Join(c.args, " "), code, c.flag, stderr)
		}
	}
}

// TestServeAliases: --alias takes comma-separated names as llama-server's;
// the first in sorted order is the model's id, and --tags are trimmed and
// deduplicated the same way.
func TestServeAliases(t *testing.T) {
	c := ServeCmd{Alias: []string{"tinyllama-2", " fim", "code", "fim", ""}, Tags: []string{"small", "chat"}}
	if got := c.modelID("/m/x.gguf"); got != "code" {
		t.Errorf("modelID %q, want code", got)
	}
	if got := c.aliases(); !slices.Equal(got, []string{"code", "fim", "tinyllama-2"}) {
		t.Errorf("aliases %q", got)
	}
	if got := cleanList(c.Tags); !slices.Equal(got, []string{"chat", "small"}) {
		t.Errorf("tags %q", got)
	}
	if got := (&ServeCmd{}).modelID("/m/x.gguf"); got != "x" {
		t.Errorf("modelID without --alias %q, want the file name", got)
	}
}

// TestServeVerboseFlag: llama-server's -v/--verbose on pipe serve is
// --log-level debug and --verbose-answers (__verbose in the answers); on
// pipe run only the log level.
func TestServeVerboseFlag(t *testing.T) {
	for _, v := range []string{"-v", "--verbose", "--log-verbose"} {
		out, err := translateArgs([]string{"serve", v})
		if err != nil || strings.Join(out, " ") != "serve --log-level=debug --verbose-answers" {
			t.Errorf("serve %s: %q %v", v, out, err)
		}
		out, err = translateArgs([]string{"run", v})
		if err != nil || strings.Join(out, " ") != "run --log-level=debug" {
			t.Errorf("run %s: %q %v", v, out, err)
		}
	}
}

// TestServeJinjaDefault: pipe serve runs the GGUF's chat template as Jinja
// by default, as llama-server's --jinja is on by default; --no-jinja keeps
// the built-in renderer, and so does a model without a template (a
// warning, not an error).
func TestServeJinjaDefault(t *testing.T) {
	tok := func(t *testing.T, noTemplate bool) *tokenizer.Tokenizer {
		f, err := gguf.Open(chatModel)
		if err != nil {
			t.Fatal(err)
		}
		cfg, err := tokenizer.FromGGUF(f)
		if err != nil {
			t.Fatal(err)
		}
		if noTemplate {
			cfg.ChatTemplate = ""
		}
		tk, err := tokenizer.New(cfg)
		if err != nil {
			t.Fatal(err)
		}
		return tk
	}
	var cli CLI
	k, err := parser(&cli, io.Discard, io.Discard, func(int) {})
	if err != nil {
		t.Fatal(err)
	}
	for _, c := range []struct {
		args       []string
		noTemplate bool
		want       string
	}{
		{nil, false, "jinja"}, {[]string{"--no-jinja"}, false, "chatml"}, {nil, true, ""}, // "": the built-in detection, no template
		{[]string{"--chat-template", "llama3"}, false, "llama3"},
	} {
		if _, err := k.Parse(append([]string{"serve", "-m", chatModel}, c.args...)); err != nil {
			t.Fatal(err)
		}
		tk := tok(t, c.noTemplate)
		var logs strings.Builder
		if err := cli.Serve.applyTemplate(tk, zerolog.New(&logs)); err != nil || tk.ChatFormat() != c.want {
			t.Errorf("%q (no template %v): format %q, %v; want %q", c.args, c.noTemplate, tk.ChatFormat(), err, c.want)
		}
		if c.noTemplate && !strings.Contains(logs.String(), "no tokenizer.chat_template") {
			t.Errorf("no template: no warning: %s", logs.String())
		}
	}
}
