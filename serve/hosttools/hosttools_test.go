package hosttools

import (
	"bufio"
	"context"
	"encoding/json"
	"errors"
	"io"
	"os"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"
)

// runTool runs a tool of the full set with params.
func runTool(t *testing.T, ctx context.Context, c Call) map[string]any {
	t.Helper()
	s, err := New([]string{"all"})
	if err != nil {
		t.Fatal(err)
	}
	res, err := s.Run(ctx, c)
	if err != nil {
		t.Fatalf("%s: %v", c.Tool, err)
	}
	return res
}

// TestSet: New enables the named tools in llama-server's order and refuses
// an unknown name; Run refuses a tool not enabled, a stream of a tool that
// cannot stream and a parameter of the wrong type, each with its sentinel.
func TestSet(t *testing.T) {
	want := []string{"read_file", "file_glob_search", "grep_search", "exec_shell_command", "write_file", "edit_file", "get_info"}
	if got := Names(); strings.Join(got, ",") != strings.Join(want, ",") {
		t.Errorf("Names: %v", got)
	}
	if _, err := New([]string{"nope"}); !errors.Is(err, ErrUnknownTool) {
		t.Errorf("New(nope): %v", err)
	}
	s, err := New([]string{"get_info", "read_file"})
	if err != nil || len(s.Tools()) != 2 || s.Tools()[0].Name != "read_file" {
		t.Fatalf("New: %v", err)
	}
	ctx := context.Background()
	if _, err := s.Run(ctx, Call{Tool: "write_file"}); !errors.Is(err, ErrUnknownTool) {
		t.Errorf("disabled tool: %v", err)
	}
	if _, err := s.Run(ctx, Call{Tool: "read_file", Emit: func(string) bool { return true }}); !errors.Is(err, ErrNoStream) {
		t.Errorf("stream: %v", err)
	}
	if _, err := s.Run(ctx, Call{Tool: "read_file", Params: json.RawMessage(`{"path":"x","end_line":"9"}`)}); !errors.Is(err, ErrParam) || !strings.Contains(err.Error(), "params.end_line") {
		t.Errorf("mistyped param: %v", err)
	}
	if _, err := s.Run(ctx, Call{Tool: "read_file", Params: json.RawMessage(`[1]`)}); !errors.Is(err, ErrParam) {
		t.Errorf("params not an object: %v", err)
	}
}

// TestGlobMatch: llama.cpp's glob_match and path_glob_match.
func TestGlobMatch(t *testing.T) {
	for _, c := range []struct {
		p, s string
		want bool
	}{
		{"*.go", "a.go", true}, {"*.go", "a/b.go", false}, {"**", "a/b/c", true},
		{"src/**/*.c", "src/a/b/x.c", true}, {"src/**/*.c", "src/x.c", false}, // llama.cpp's "**/" wants a '/'
		{"?.c", "ab.c", false},
		{"[a-c]x", "bx", true}, {"[!a-c]x", "bx", false}, {"[]]x", "]x", true}, {"[x", "[x", true},
		{strings.Repeat("*a", 20) + "b", strings.Repeat("a", 60), false},
	} {
		if got := globMatch(c.p, c.s); got != c.want {
			t.Errorf("globMatch(%q, %q) = %v", c.p, c.s, got)
		}
	}
	for _, c := range []struct {
		p, rel string
		want   bool
	}{{"*.go", "x/y/a.go", true}, {"y/*.go", "x/y/a.go", true}, {"/x/*.go", "x/a.go", false}, {"**/a.go", "a.go", false}} {
		if got := pathGlobMatch(c.p, c.rel); got != c.want {
			t.Errorf("pathGlobMatch(%q, %q) = %v", c.p, c.rel, got)
		}
	}
}

// TestFiles: write_file creates parents, read_file returns line ranges
// with their numbers and refuses a large file without a range, base64
// returns the bytes, edit_file applies exact and fuzzy edits and refuses
// ambiguous, overlapping and missing ones.
func TestFiles(t *testing.T) {
	dir, ctx := t.TempDir(), context.Background()
	call := func(tool, params string) map[string]any {
		return runTool(t, ctx, Call{Tool: tool, Params: json.RawMessage(params), Cwd: dir})
	}
	if r := call("write_file", `{"path":"d/e/f.txt","content":"alpha\nbeta  \ngamma\n"}`); r["bytes"] != 19 {
		t.Fatalf("write_file: %v", r)
	}
	if r := call("read_file", `{"path":"d/e/f.txt","start_line":2,"end_line":2,"append_loc":true}`); r["plain_text_response"] != "2\u2192beta  \n" {
		t.Errorf("read_file: %q", r)
	}
	if r := runTool(t, ctx, Call{Tool: "read_file", Params: json.RawMessage(`{"path":"d/e/f.txt"}`), Cwd: dir, Base64: true}); r["base64"] != "YWxwaGEKYmV0YSAgCmdhbW1hCg==" {
		t.Errorf("base64: %v", r)
	}
	big := strings.Repeat("0123456789abcdef\n", 2000)
	call("write_file", `{"path":"big.txt","content":`+strconvQuote(big)+`}`)
	if r := call("read_file", `{"path":"big.txt"}`); !strings.HasPrefix(r["error"].(string), "file too large (34000 bytes, max 16384)") {
		t.Errorf("big file: %v", r)
	}
	if r := call("read_file", `{"path":"big.txt","end_line":5000}`); !strings.HasSuffix(r["plain_text_response"].(string), "[output truncated]") || len(r["plain_text_response"].(string)) > readMaxText+20 {
		t.Errorf("big range: %d bytes", len(r["plain_text_response"].(string)))
	}
	// fuzzy: "beta" with a smart quote and no trailing spaces matches
	if r := call("edit_file", `{"path":"d/e/f.txt","edits":[{"old_text":"alpha","new_text":"ALPHA"},{"old_text":"beta\ngamma","new_text":"B\nG"}]}`); r["edits_applied"] != 2 {
		t.Fatalf("edit_file: %v", r)
	}
	if b, _ := os.ReadFile(filepath.Join(dir, "d/e/f.txt")); string(b) != "ALPHA\nB\nG\n" {
		t.Errorf("edited: %q", b)
	}
	for params, want := range map[string]string{
		`{"path":"big.txt","edits":[{"old_text":"0123","new_text":"x"}]}`:                                          "occurrences",
		`{"path":"d/e/f.txt","edits":[{"old_text":"nothere","new_text":"x"}]}`:                                     "could not find edits[0].old_text",
		`{"path":"d/e/f.txt","edits":[{"old_text":"ALPHA\nB","new_text":"x"},{"old_text":"B\nG","new_text":"y"}]}`: "overlap",
		`{"path":"d/e/f.txt","edits":[{"old_text":"G","new_text":"G"}]}`:                                           "no changes made",
		`{"path":"d/e/f.txt","edits":[]}`:                                                                          `"edits" must be a non-empty array`,
	} {
		if r := call("edit_file", params); !strings.Contains(r["error"].(string), want) {
			t.Errorf("edit_file %s: %v, want %q", params, r, want)
		}
	}
}

func strconvQuote(s string) string { b, _ := json.Marshal(s); return string(b) }

// TestSearch: file_glob_search and grep_search over a directory outside
// git (the walker), junk directories listed but not entered.
func TestSearch(t *testing.T) {
	dir, ctx := t.TempDir(), context.Background()
	for name, content := range map[string]string{"a.go": "package a\nfunc F() {}\n", "sub/b.go": "package b\n// TODO x\n", "node_modules/c.go": "TODO\n", "r.md": "TODO: y\n"} {
		if err := os.MkdirAll(filepath.Dir(filepath.Join(dir, name)), 0o755); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(filepath.Join(dir, name), []byte(content), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	r := runTool(t, ctx, Call{Tool: "file_glob_search", Params: json.RawMessage(`{"path":".","include":"*.go"}`), Cwd: dir})
	text := r["plain_text_response"].(string)
	if !strings.Contains(text, "a.go\n") || !strings.Contains(text, "sub/b.go\n") || strings.Contains(text, "node_modules") || !strings.Contains(text, "Total matches: 2") {
		t.Errorf("glob: %q", text)
	}
	r = runTool(t, ctx, Call{Tool: "file_glob_search", Params: json.RawMessage(`{"path":".","type":"dir"}`), Cwd: dir})
	if text := r["plain_text_response"].(string); !strings.Contains(text, "node_modules/\n") || !strings.Contains(text, "sub/\n") {
		t.Errorf("dirs: %q", text)
	}
	r = runTool(t, ctx, Call{Tool: "grep_search", Params: json.RawMessage(`{"path":".","pattern":"todo","ignore_case":true,"return_line_numbers":true}`), Cwd: dir})
	text = r["plain_text_response"].(string)
	if !strings.Contains(text, "sub/b.go:2:// TODO x\n") || !strings.Contains(text, "r.md:1:TODO: y\n") || !strings.Contains(text, "Total matches: 2") {
		t.Errorf("grep: %q", text)
	}
	r = runTool(t, ctx, Call{Tool: "grep_search", Params: json.RawMessage(`{"path":".","pattern":"(?<=x)"}`), Cwd: dir})
	if !strings.HasPrefix(r["error"].(string), "invalid regex") {
		t.Errorf("bad regex: %v", r)
	}
}

// TestShellKillsGroup: a command that outlives its timeout is killed with
// every process it started: a background child holding a FIFO open lets
// the reader see EOF only once it is dead. The answer says it timed out.
func TestShellKillsGroup(t *testing.T) {
	dir := t.TempDir()
	fifo := filepath.Join(dir, "f")
	if err := syscall.Mkfifo(fifo, 0o600); err != nil {
		t.Skipf("mkfifo: %v", err) // the file system, not the code under test
	}
	eof := make(chan error, 1)
	go func() {
		f, err := os.Open(fifo) // blocks until the child opens it
		if err == nil {
			_, err = io.Copy(io.Discard, f)
			f.Close()
		}
		eof <- err
	}()
	r := runTool(t, context.Background(), Call{Tool: "exec_shell_command", Params: json.RawMessage(`{"command":"sleep 300 > f & sleep 300","timeout":1}`), Cwd: dir})
	if text := r["plain_text_response"].(string); !strings.HasSuffix(text, "[exit due to timed out]") {
		t.Errorf("answer: %q", text)
	}
	select {
	case err := <-eof:
		if err != nil {
			t.Fatal(err)
		}
	case <-time.After(30 * time.Second): // hang guard
		t.Fatal("the background child outlived the command's timeout")
	}
}

// TestShellStreamStops: a streamed command is killed when its receiver
// goes (Emit false) or the call's context ends (the client went); output
// is capped at max_output_size.
func TestShellStreamStops(t *testing.T) {
	s, _ := New([]string{"exec_shell_command"})
	loop := json.RawMessage(`{"command":"while :; do echo x; sleep 0.01; done","timeout":60}`)
	for _, byCancel := range []bool{false, true} {
		ctx, cancel := context.WithCancel(context.Background())
		n := 0
		done := make(chan struct{})
		go func() {
			defer close(done)
			_, err := s.Run(ctx, Call{Tool: "exec_shell_command", Params: loop, Emit: func(string) bool {
				n++
				if byCancel && n == 3 {
					cancel()
				}
				return byCancel || n < 3
			}})
			if err != nil {
				t.Error(err)
			}
		}()
		select {
		case <-done:
		case <-time.After(30 * time.Second): // hang guard
			t.Fatalf("cancel %v: the command went on after its receiver left", byCancel)
		}
		cancel()
	}
	r := runTool(t, context.Background(), Call{Tool: "exec_shell_command", Params: json.RawMessage(`{"command":"yes | head -c 100000","max_output_size":10}`)})
	if text := r["plain_text_response"].(string); !strings.HasPrefix(text, "y\ny\ny\ny\ny\n\n[output truncated]\n[exit code: 0]") {
		t.Errorf("capped: %q", text)
	}
}

// TestReadLinesLongLine: a line before start_line is skipped without being
// kept, whatever its length.
func TestReadLinesLongLine(t *testing.T) {
	in := strings.Repeat("x", 1<<20) + "\nkeep\n"
	got, err := readLines(context.Background(), bufio.NewReaderSize(strings.NewReader(in), 16), 2, -1, false)
	if err != nil || got != "keep\n" {
		t.Errorf("%q %v", got, err)
	}
}
