package main

import (
	"bytes"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"
)

const chatModel = "../../testdata/golden/models/tiny-qwen3moe-Q8_0.gguf"

// TestChatSession: in -i, a reply runs past 32 tokens to the end of the
// context by default; a turn that no longer fits says so and the session
// goes on; /clear starts over, and the same first turn gets the same reply.
func TestChatSession(t *testing.T) {
	ids := filepath.Join(t.TempDir(), "ids")
	var out, errb syncBuffer
	old := stdin
	stdin = strings.NewReader("hi\nmore please\n/clear\nhi\n")
	defer func() { stdin = old }()
	args := []string{"--log-format", "console", "run", "-m", chatModel, "-i", "--temp", "0", "--ignore-eos", "-c", "96",
		"--moe-stream=true", "--cache-mb", "4", "--tokens-out", ids}
	if code := run(t.Context(), args, &out, &errb); code != 0 {
		t.Fatalf("exit %d\n%s", code, errb.String())
	}
	replies := strings.Split(strings.TrimSuffix(out.String(), "\n"), "\n")
	if len(replies) != 2 || replies[0] != replies[1] || replies[0] == "" {
		t.Fatalf("want the same reply twice, got %q", replies)
	}
	if n := len(timingsRE.FindAllString(errb.String(), -1)); n != 2 {
		t.Errorf("%d timings lines, want one after each of the two replies:\n%s", n, errb.String())
	}
	if !strings.Contains(errb.String(), "[2 turns | prompt ") {
		t.Errorf("no timings line of the session:\n%s", errb.String())
	}
	for _, want := range []string{"[the context is full (-c 96)", "[conversation cleared]"} {
		if !strings.Contains(errb.String(), want) {
			t.Errorf("stderr lacks %q:\n%s", want, errb.String())
		}
	}
	b, err := os.ReadFile(ids)
	if err != nil {
		t.Fatal(err)
	}
	gen := strings.Split(strings.Split(string(b), "\n")[1], ",")
	if len(gen) < 2*40 {
		t.Fatalf("%d tokens in two replies: want each to run past 32 to the full context", len(gen))
	}
}

// syncBuffer is a bytes.Buffer safe for a writer and a reader goroutine.
type syncBuffer struct {
	mu sync.Mutex
	b  bytes.Buffer
}

func (s *syncBuffer) Write(p []byte) (int, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.b.Write(p)
}

func (s *syncBuffer) Reset() {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.b.Reset()
}

func (s *syncBuffer) String() string {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.b.String()
}

func TestThinkFilter(t *testing.T) {
	for _, c := range []struct {
		hide   bool
		pieces []string
		want   string
	}{
		{false, []string{"<think>x</think>", "y"}, "<think>x</think>y"},
		{true, []string{"<think>", "plan", "</think>", "\n\nAnswer"}, "Answer"},
		{true, []string{"a<th", "ink>b</th", "ink> c"}, "ac"},
		{true, []string{"x < y", " <b>"}, "x < y <b>"},
		{true, []string{"end<"}, "end<"},
	} {
		f := newThinkFilter(c.hide)
		var got strings.Builder
		for _, p := range c.pieces {
			got.WriteString(f.add(p))
		}
		got.WriteString(f.flush())
		if got.String() != c.want {
			t.Errorf("hide=%v %q: %q, want %q", c.hide, c.pieces, got.String(), c.want)
		}
	}
}

func TestFlagGiven(t *testing.T) {
	for _, c := range []struct {
		args []string
		want bool
	}{
		{[]string{"run", "-i"}, false},
		{[]string{"run", "-n", "5"}, true},
		{[]string{"run", "-n5"}, true},
		{[]string{"run", "--predict=5"}, true},
		{[]string{"run", "--n-predict", "5"}, true},
		{[]string{"run", "--no-think"}, false},
		{[]string{"run", "--", "-n"}, false},
	} {
		if got := flagGiven(c.args, 'n', "n-predict", "predict"); got != c.want {
			t.Errorf("%q: %v, want %v", c.args, got, c.want)
		}
	}
}
