package main

import (
	"bufio"
	"bytes"
	"context"
	"errors"
	"io"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"
)

// writeFile writes text to name in dir and returns its path.
func writeFile(t *testing.T, dir, name, text string) string {
	t.Helper()
	p := filepath.Join(dir, name)
	if err := os.WriteFile(p, []byte(text), 0o644); err != nil {
		t.Fatal(err)
	}
	return p
}

// intact fails the test when the file at p no longer holds want.
func intact(t *testing.T, what, p, want string) {
	t.Helper()
	if b, err := os.ReadFile(p); err != nil || string(b) != want {
		t.Fatalf("%s: %s now holds %q (%v), want %q", what, p, b, err, want)
	}
}

// TestOutputIsInputRefused: no output of a run may be its prompt file (-f)
// or its hot set (--hot-set, read at the start and saved at the end), and a
// --hot-set that names a file that is not a hot set is refused before the
// run, which leaves every file as it was.
func TestOutputIsInputRefused(t *testing.T) {
	dir := t.TempDir()
	const prompt = "The quick brown fox\n"
	for _, flag := range []string{"--csv", "--route-trace", "--cpuprofile", "--exec-trace", "--logits-out", "--tokens-out", "--hot-set"} {
		p := writeFile(t, dir, "p.txt", prompt)
		code, stderr := runCode(t, nil, "run", "-m", tinyModel, "-n", "2", "--temp", "0", "-f", p, flag, p)
		if code == 0 || !strings.Contains(stderr, flag) {
			t.Fatalf("-f p.txt %s p.txt: exit %d, stderr:\n%s", flag, code, stderr)
		}
		noStack(t, stderr)
		intact(t, "-f p.txt "+flag+" p.txt", p, prompt)
	}
	// A hot set that exists is an input of the run.
	hot := filepath.Join(dir, "tiny.hot")
	runPipe(t, "--log-level", "error", "run", "-m", tinyModel, "-n", "2", "--temp", "0", "--moe-stream=true", "--hot-set", hot)
	saved, err := os.ReadFile(hot)
	if err != nil {
		t.Fatalf("no hot set saved: %v", err)
	}
	for _, flag := range []string{"--csv", "--route-trace", "--cpuprofile", "--exec-trace"} {
		code, stderr := runCode(t, nil, "run", "-m", tinyModel, "-n", "2", "--temp", "0", "--hot-set", hot, flag, hot)
		if code == 0 || !strings.Contains(stderr, "--hot-set") {
			t.Fatalf("--hot-set h %s h: exit %d, stderr:\n%s", flag, code, stderr)
		}
		intact(t, flag+" over the hot set", hot, string(saved))
	}
	// A hot set that does not exist yet may not be an output either.
	out := filepath.Join(dir, "out.csv")
	code, stderr := runCode(t, nil, "run", "-m", tinyModel, "-n", "2", "--temp", "0", "--moe-stream=true", "--csv", out, "--hot-set", out)
	if code == 0 || !strings.Contains(stderr, "--hot-set") {
		t.Fatalf("--csv out.csv --hot-set out.csv: exit %d, stderr:\n%s", code, stderr)
	}
	if b, err := os.ReadFile(out); err == nil && bytes.HasPrefix(b, []byte("pipe hot set")) {
		t.Fatalf("the CSV was replaced by a hot set")
	}
	// Nor an ordinary file that is not a hot set.
	notes := writeFile(t, dir, "notes.txt", "my notes\n")
	code, stderr = runCode(t, nil, "run", "-m", tinyModel, "-n", "2", "--temp", "0", "--moe-stream=true", "--hot-set", notes)
	if code == 0 || !strings.Contains(stderr, "not a hot set") {
		t.Fatalf("--hot-set notes.txt: exit %d, stderr:\n%s", code, stderr)
	}
	intact(t, "--hot-set notes.txt", notes, "my notes\n")
	// pipe hotset -o (with or without --merge) never replaces one either.
	tr := filepath.Join(dir, "run.route.csv")
	runPipe(t, "--log-level", "error", "run", "-m", tinyModel, "-n", "2", "--temp", "0", "--route-trace", tr, "--hot-set", "none")
	for _, merge := range []string{"--merge", "--merge=false"} {
		code, stderr = runCode(t, nil, "hotset", "-m", tinyModel, "--route-trace", tr, "-o", notes, merge)
		if code == 0 || !strings.Contains(stderr, "not a hot set") {
			t.Fatalf("hotset -o notes.txt %s: exit %d, stderr:\n%s", merge, code, stderr)
		}
		intact(t, "hotset -o notes.txt "+merge, notes, "my notes\n")
	}
}

// zeros is an endless reader, like /dev/zero on stdin.
// zeros is an endless stdin that counts what was read from it.
type zeros struct{ n *int64 }

func (z zeros) Read(p []byte) (int, error) {
	clear(p)
	*z.n += int64(len(p))
	return len(p), nil
}

// withStdin runs f with stdin replaced by r.
func withStdin(r io.Reader, f func()) {
	old := stdin
	stdin = r
	defer func() { stdin = old }()
	f()
}

// TestPromptReadBounded: an endless prompt (-f /dev/zero, /dev/urandom,
// -f - on an endless stdin) is refused with a clear limit error instead of
// growing without bound.
func TestPromptReadBounded(t *testing.T) {
	for _, src := range []string{"/dev/zero", "/dev/urandom", "-"} {
		var code int
		var stderr string
		var read int64
		withStdin(zeros{&read}, func() {
			code, stderr = runCode(t, nil, "run", "-m", tinyModel, "-n", "1", "-f", src)
		})
		if code == 0 || !strings.Contains(stderr, "-f") || !strings.Contains(stderr, "MiB") {
			t.Fatalf("-f %s: exit %d, stderr:\n%s", src, code, stderr)
		}
		noStack(t, stderr)
		// The refusal comes from the bound, not from running out of memory:
		// an endless stdin is read no further than the limit (and a chunk).
		if read > maxPromptBytes+1<<20 {
			t.Fatalf("-f %s: %d bytes read from an endless stdin, limit %d", src, read, maxPromptBytes)
		}
	}
}

// TestPromptReadCancels: a prompt read that waits (a FIFO with no data, a
// stdin nobody writes to) ends with the run's cancellation: exit 130. The
// cancel comes once the read waits (an event, not a sleep); nothing but the
// cancel can end the read (no data ever comes), so the exit is its answer,
// under a minute's hang guard (no clock bound: a loaded machine stretches
// any).
func TestPromptReadCancels(t *testing.T) {
	fifo := filepath.Join(t.TempDir(), "fifo")
	if err := syscall.Mkfifo(fifo, 0o600); err != nil {
		t.Fatalf("mkfifo: %v", err)
	}
	for _, src := range []string{fifo, "-"} {
		in := &waitingReader{reading: make(chan struct{})}
		withStdin(in, func() {
			ctx, cancel := context.WithCancel(context.Background())
			defer cancel()
			done := make(chan int, 1)
			go func() {
				done <- run(ctx, []string{"run", "-m", tinyModel, "-n", "1", "-f", src}, io.Discard, io.Discard)
			}()
			if src == "-" {
				select {
				case <-in.reading:
				case <-time.After(time.Minute):
					t.Fatal("-f -: stdin never read (1 min hang guard)")
				}
			} else {
				w := openWriterWhenRead(t, fifo, done)
				defer w.Close() // after the run: its read waits for data
			}
			cancel()
			select {
			case code := <-done:
				if code != 130 {
					t.Fatalf("-f %s: exit %d after the cancel, want 130", src, code)
				}
			case <-time.After(time.Minute):
				t.Fatalf("-f %s: still waiting a minute after the cancel (hang guard)", src)
			}
		})
	}
}

// waitingReader is a stdin nobody writes to: Read waits forever, and
// reading is closed at the first Read.
type waitingReader struct {
	once    sync.Once
	reading chan struct{}
}

func (r *waitingReader) Read([]byte) (int, error) {
	r.once.Do(func() { close(r.reading) })
	select {}
}

// openWriterWhenRead opens fifo for writing as soon as the run has it open
// for reading (a non-blocking open for writing fails with ENXIO until then)
// and returns it: the run's read then waits for data. It fails the test if
// the run ends first or after a minute.
func openWriterWhenRead(t *testing.T, fifo string, done <-chan int) *os.File {
	t.Helper()
	for deadline := time.Now().Add(time.Minute); ; time.Sleep(time.Millisecond) {
		w, err := os.OpenFile(fifo, os.O_WRONLY|syscall.O_NONBLOCK, 0)
		if err == nil {
			return w
		}
		if !errors.Is(err, syscall.ENXIO) {
			t.Fatalf("open %s for writing: %v", fifo, err)
		}
		select {
		case code := <-done:
			t.Fatalf("-f %s: the run ended (exit %d) before it read the prompt", fifo, code)
		default:
		}
		if time.Now().After(deadline) {
			t.Fatalf("-f %s: never opened for reading (1 min hang guard)", fifo)
		}
	}
}

// TestTooLongRefusedEarly: a prompt that cannot fit -c is refused before it
// is tokenized (seconds and gigabytes for megabytes of text), in run and in
// -i, where a line of several MiB is refused and the session goes on.
func TestTooLongRefusedEarly(t *testing.T) {
	big := strings.Repeat("the quick brown fox jumps over the lazy dog ", 48<<10) // 2.1 MB
	p := writeFile(t, t.TempDir(), "big.txt", big)
	code, stderr := runCode(t, nil, "run", "-m", tinyModel, "-n", "1", "-c", "64", "-f", p)
	if code == 0 || !strings.Contains(stderr, "-c 64") || !strings.Contains(stderr, "cannot fit") {
		t.Fatalf("2 MB prompt, -c 64: exit %d, stderr:\n%s", code, stderr)
	}
	var out, errb syncBuffer
	withStdin(strings.NewReader(big+"\nhi\n"), func() {
		code = run(t.Context(), []string{"--log-format", "console", "run", "-m", chatModel, "-i", "--temp", "0", "-n", "4", "-c", "96",
			"--moe-stream=true", "--cache-mb", "4"}, &out, &errb)
	})
	if code != 0 || !strings.Contains(errb.String(), "cannot fit") {
		t.Fatalf("-i with a 2 MB line: exit %d, stderr:\n%s", code, errb.String())
	}
	if replies := strings.Split(strings.TrimSuffix(out.String(), "\n"), "\n"); len(replies) != 1 || replies[0] == "" {
		t.Fatalf("-i: the turn after the long line got no reply: %q\n%s", out.String(), errb.String())
	}
}

// TestReadLine: a line over the limit is skipped with errPromptLimit and the
// lines after it are read; a last line without a newline counts.
func TestReadLine(t *testing.T) {
	long := strings.Repeat("x", 200<<10) // longer than the reader's buffer too
	br := bufio.NewReaderSize(strings.NewReader("a\n"+long+"\nb\n"+long[:100]+"\nc"), 16)
	var got []string
	for {
		s, err := readLine(br, 1000)
		switch {
		case errors.Is(err, errPromptLimit):
			got = append(got, "LIMIT")
			continue
		case errors.Is(err, io.EOF):
			if s != "" {
				got = append(got, s)
			}
		case err != nil:
			t.Fatal(err)
		default:
			got = append(got, s)
			continue
		}
		break
	}
	want := []string{"a", "LIMIT", "b", long[:100], "c"}
	if strings.Join(got, "|") != strings.Join(want, "|") {
		t.Fatalf("lines %q, want %q", got, want)
	}
}

// TestFlagBounds: counts out of range, overflowing integers and non-finite
// floats get a clear error naming the flag, before anything is loaded or
// written, and never a panic, a runaway allocation or exit 0.
func TestFlagBounds(t *testing.T) {
	trace := "../../tools/replay/testdata/qwen.route.csv"
	out := filepath.Join(t.TempDir(), "x.gguf")
	for _, c := range []struct {
		args []string
		flag string
	}{
		{[]string{"run", "-m", tinyModel, "-t", "100000"}, "-t"},
		{[]string{"serve", "-m", tinyModel, "--port", "0", "-t", "100000"}, "-t"},
		{[]string{"perplexity", "-m", tinyModel, "-f", trace, "-t", "100000"}, "-t"},
		{[]string{"run", "-m", tinyModel, "-n", "9223372036854775807"}, "-n"},
		{[]string{"run", "-m", tinyModel, "-n", "9223372036854775807", "-c", "64"}, "-n"},
		{[]string{"run", "-m", tinyModel, "-c", "9223372036854775807"}, "-c"},
		{[]string{"serve", "-m", tinyModel, "--port", "0", "-c", "9223372036854775807"}, "-c"},
		{[]string{"run", "-m", tinyModel, "--cache-mb", "NaN"}, "--cache-mb"},
		{[]string{"run", "-m", tinyModel, "--cache-mb", "1e30G"}, "--cache-mb"},
		{[]string{"run", "-m", tinyModel, "--cache-mb", "-Inf"}, "--cache-mb"},
		{[]string{"run", "-m", tinyModel, "--temp", "NaN"}, "--temp"},
		{[]string{"run", "-m", tinyModel, "--top-p", "Inf"}, "--top-p"},
		{[]string{"run", "-m", tinyModel, "--min-p", "-Inf"}, "--min-p"},
		{[]string{"replay", "--budgets", "NaN", trace}, "--budgets"},
		{[]string{"replay", "--budgets", "Inf", trace}, "--budgets"},
		{[]string{"replay", "--warm-start", "--first-tokens=-3", trace}, "--first-tokens"},
		{[]string{"bench", "-m", tinyModel, "--repeat=-1"}, "--repeat"},
		{[]string{"bench", "-m", tinyModel, "-n", "-5"}, "-n"},
		{[]string{"gen", "--preset", "qwen3-tiny", "-o", out, "--vocab-size", "2000000000"}, "--vocab-size"},
	} {
		var stdout bytes.Buffer
		code, stderr := runCode(t, &stdout, c.args...)
		if code == 0 || !strings.Contains(stderr, c.flag) {
			t.Errorf("pipe %s: exit %d, want an error naming %s; stderr:\n%.600s", strings.Join(c.args, " "), code, c.flag, stderr)
		}
		noStack(t, stderr)
		if strings.Contains(stderr, `"event":"load"`) || strings.Contains(stderr, "event=load") {
			t.Errorf("pipe %s: loaded the model before refusing a flag", strings.Join(c.args, " "))
		}
	}
}

// TestHotSetTraceOfAnotherModel: pipe hotset refuses a trace whose header
// names another architecture or shape than the model's, even when every row
// would fit it (gpt-oss's tiny model has as many layers and more experts).
func TestHotSetTraceOfAnotherModel(t *testing.T) {
	dir := t.TempDir()
	tr := filepath.Join(dir, "qwen.route.csv")
	runPipe(t, "--log-level", "error", "run", "-m", tinyModel, "-n", "2", "--temp", "0", "--route-trace", tr, "--hot-set", "none")
	hot := filepath.Join(dir, "g.hot")
	code, stderr := runCode(t, nil, "hotset", "-m", "../../testdata/golden/models/tiny-gptoss-Q8_0.gguf", "--route-trace", tr, "-o", hot)
	if code == 0 || !strings.Contains(stderr, "--route-trace") || !strings.Contains(stderr, "qwen3moe") {
		t.Fatalf("a qwen3moe trace for a gpt-oss model: exit %d, stderr:\n%s", code, stderr)
	}
	if _, err := os.Stat(hot); err == nil {
		t.Fatal("a hot set was written")
	}
}

// TestTemplateInflatedPromptRefused: a short prompt that a chat template
// renders into megabytes is refused before the prompt pass, at -c and (with
// -c 0, a context sized to the prompt) at the model's trained context; a
// template hitting a render limit is a clear error naming the file and the
// limit, not a crash (issue 35).
func TestTemplateInflatedPromptRefused(t *testing.T) {
	dir := t.TempDir()
	inflate := writeFile(t, dir, "inflate.jinja", "{% for m in messages %}{{ (m.content ~ ' ') * 200000 }}{% endfor %}")
	for _, c := range []string{"64", "0"} {
		code, stderr := runCode(t, nil, "run", "-m", tinyModel, "-n", "1", "-c", c, "--chat", "--chat-template-file", inflate, "-p", "fox")
		noStack(t, stderr)
		if code == 0 || !strings.Contains(stderr, "chat template") {
			t.Errorf("-c %s: exit %d, stderr:\n%s", c, code, stderr)
		}
	}
	huge := writeFile(t, dir, "huge.jinja", "{% for m in messages %}{% if m.content == 'boom' %}{{ 'x' * 1000000000 }}{% endif %}{{ m.content }}{% endfor %}")
	code, stderr := runCode(t, nil, "run", "-m", tinyModel, "-n", "1", "--chat", "--chat-template-file", huge, "-p", "boom")
	noStack(t, stderr)
	if code == 0 || !strings.Contains(stderr, "huge.jinja") || !strings.Contains(stderr, "value size limit") {
		t.Errorf("a render over its limit: exit %d, stderr:\n%s", code, stderr)
	}
}

// TestInteractiveTemplateErrorSkipsTheTurn: in -i, a line the chat template
// blows up on is skipped with the template's error, and the conversation
// goes on (issue 35: it ended the session, with a panic for 'x' * -1).
func TestInteractiveTemplateErrorSkipsTheTurn(t *testing.T) {
	tmpl := writeFile(t, t.TempDir(), "chatml-boom.jinja", "{% for m in messages %}{% if m.content == 'boom' %}{{ 'x' * 1000000000 }}{% endif %}"+
		"<|im_start|>{{ m.role }}\n{{ m.content }}<|im_end|>\n{% endfor %}{% if add_generation_prompt %}<|im_start|>assistant\n{% endif %}")
	var out, errb syncBuffer
	var code int
	withStdin(strings.NewReader("hello\nboom\nhi\n"), func() {
		code = run(t.Context(), []string{"--log-format", "console", "run", "-m", chatModel, "-i", "--temp", "0", "-n", "4", "-c", "256",
			"--chat-template-file", tmpl, "--moe-stream=true", "--cache-mb", "4"}, &out, &errb)
	})
	noStack(t, errb.String())
	if code != 0 || !strings.Contains(errb.String(), "turn skipped") || !strings.Contains(errb.String(), "chatml-boom.jinja") || !strings.Contains(errb.String(), "value size limit") {
		t.Fatalf("exit %d, stderr:\n%s", code, errb.String())
	}
	if replies := strings.Split(strings.TrimSuffix(out.String(), "\n"), "\n"); len(replies) != 2 {
		t.Fatalf("want replies to 'hello' and 'hi': %q\n%s", out.String(), errb.String())
	}
}
