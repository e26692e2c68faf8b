package main

import (
	"errors"
	"os"
	"os/exec"
	"regexp"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/creack/pty"
)

// TestChatOnTerminal drives a real `pipe run -i` through a pseudo-terminal,
// as a person at a terminal would: the terminal's line discipline turns the
// byte Ctrl-C (0x03) into SIGINT. Ctrl-C during a reply stops that reply
// and returns to the prompt; the next reply runs past 32 tokens to its end
// (here, a full context); Ctrl-C at the prompt ends the session with status
// 130. On the terminal the log is the console one, each reply ends with its
// timings line, and no progress bar is left on screen over the text.
func TestChatOnTerminal(t *testing.T) {
	exe, err := os.Executable()
	if err != nil {
		t.Fatal(err)
	}
	cmd := exec.Command(exe, "run", "-m", chatModel, "-i", "--temp", "0", "--ignore-eos",
		"-c", "2048", "--moe-stream=true", "--cache-mb", "4")
	cmd.Env = append(os.Environ(), mainEnv+"=1")
	tty, err := pty.StartWithSize(cmd, &pty.Winsize{Rows: 50, Cols: 200})
	if err != nil {
		if os.Getenv("CI") == "true" {
			t.Fatalf("no pseudo-terminal under CI: %v", err)
		}
		t.Skipf("no pseudo-terminal: %v", err)
	}
	defer tty.Close()
	defer cmd.Process.Kill()
	var out syncBuffer
	read := make(chan struct{}, 1) // a token after each read from the terminal (never blocks the reader)
	go func() {
		buf := make([]byte, 4096)
		for {
			n, err := tty.Read(buf)
			out.Write(buf[:n])
			select {
			case read <- struct{}{}:
			default:
			}
			if err != nil {
				return
			}
		}
	}()
	waitFor := func(what string, ok func(string) bool) {
		t.Helper()
		guard := time.After(60 * time.Second) // a hang guard
		for !ok(out.String()) {
			select {
			case <-read:
			case <-guard:
				t.Fatalf("no %s on the terminal in 60 s:\n%s", what, screen(out.String()))
			}
		}
	}
	count := func(s string, n int) func(string) bool {
		return func(o string) bool { return strings.Count(o, s) >= n }
	}
	send := func(s string) {
		t.Helper()
		if _, err := tty.Write([]byte(s)); err != nil {
			t.Fatal(err)
		}
	}

	waitFor("prompt", count("\n> ", 1))
	send("tell me a long story\r")
	waitFor("reply text of turn 1", replyShown("> tell me a long story"))
	send("\x03")
	waitFor("[reply stopped]", count("[reply stopped]", 1))
	waitFor("timings line of turn 1", func(o string) bool { return len(timingsRE.FindAllString(o, -1)) >= 1 })
	waitFor("prompt after Ctrl-C", count("\n> ", 2))

	send("go on\r")
	waitFor("timings line of turn 2", func(o string) bool { return len(timingsRE.FindAllString(o, -1)) >= 2 })
	waitFor("prompt after turn 2", count("\n> ", 3))
	o := out.String()
	if strings.Count(o, "[reply stopped]") != 1 {
		t.Errorf("turn 2 was stopped too:\n%s", screen(o))
	}
	second := timingsRE.FindAllString(o, -1)[1]
	m := regexp.MustCompile(`\| (\d+) tok `).FindStringSubmatch(second)
	if n, _ := strconv.Atoi(m[1]); n <= 32 {
		t.Errorf("turn 2 generated %d tokens, want it to run past 32 to the full context: %s", n, second)
	}

	send("\x03")
	err = cmd.Wait()
	var ee *exec.ExitError
	if !errors.As(err, &ee) || ee.ExitCode() != 130 {
		t.Fatalf("Ctrl-C at the prompt: %v, want exit status 130:\n%s", err, screen(out.String()))
	}
	scr := screen(out.String())
	if strings.ContainsAny(scr, "█░") {
		t.Errorf("a progress bar is left on the screen:\n%s", scr)
	}
	if !strings.Contains(out.String(), "\rprompt   ") {
		t.Errorf("no prompt-pass progress was drawn:\n%q", out.String())
	}
}

// replyShown is true of a terminal output whose screen shows, under the
// line ending in prompt, a first line that is no log line: reply text (at
// least 4 characters, no progress bar).
func replyShown(prompt string) func(string) bool {
	return func(o string) bool {
		lines := strings.Split(screen(o), "\n")
		for i, l := range lines {
			if !strings.HasSuffix(l, prompt) {
				continue
			}
			for _, next := range lines[i+1:] {
				if next = strings.TrimSpace(next); !logLineRE.MatchString(next) {
					return len(next) >= 4 && !strings.ContainsAny(next, "█░")
				}
			}
		}
		return false
	}
}

var logLineRE = regexp.MustCompile(`^\d\d:\d\d:\d\d\.\d+ [A-Z]{3} `)

var ansiRE = regexp.MustCompile("\x1b\\[[0-9;]*[A-Za-z]")

// screen is what a terminal shows after out: colours dropped, a carriage
// return moves to the start of the line and later text overwrites earlier.
func screen(out string) string {
	var lines []string
	var cur []rune
	col := 0
	for _, r := range ansiRE.ReplaceAllString(out, "") {
		switch r {
		case '\r':
			col = 0
		case '\n':
			lines = append(lines, strings.TrimRight(string(cur), " "))
			cur, col = nil, 0
		default:
			if col < len(cur) {
				cur[col] = r
			} else {
				cur = append(cur, r)
			}
			col++
		}
	}
	return strings.Join(append(lines, string(cur)), "\n")
}
