package main

import (
	"bytes"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"
)

// TestSIGINTKeepsCSV sends SIGINT to a real `pipe run` process mid-decode:
// it must exit promptly with status 130, and its CSV must hold the header,
// whole rows and the `# summary` trailer with status=canceled.
func TestSIGINTKeepsCSV(t *testing.T) {
	exe, err := os.Executable()
	if err != nil {
		t.Fatal(err)
	}
	csv := filepath.Join(t.TempDir(), "run.csv")
	cmd := exec.Command(exe, "--log-format", "json", "run", "-m", "../../testdata/golden/models/tiny-qwen3moe-Q8_0.gguf",
		"-p", "The quick brown fox", "-n", "5000", "--temp", "0", "--ignore-eos", "--moe-stream=true", "--cache-mb", "1", "--csv", csv)
	cmd.Env = append(os.Environ(), mainEnv+"=1")
	var stderr bytes.Buffer
	cmd.Stderr = &stderr
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	// wait until a few rows are on disk (hang guard: a minute)
	deadline := time.Now().Add(time.Minute)
	for {
		b, _ := os.ReadFile(csv)
		if strings.Count(string(b), "\n") >= 4 {
			break
		}
		if time.Now().After(deadline) {
			cmd.Process.Kill()
			t.Fatalf("no rows after a minute; stderr:\n%s", stderr.String())
		}
		time.Sleep(20 * time.Millisecond)
	}
	t0 := time.Now()
	if err := cmd.Process.Signal(syscall.SIGINT); err != nil {
		t.Fatal(err)
	}
	err = cmd.Wait()
	// The README's "Ctrl-C stops any run within 2 s", with 5× headroom for
	// a loaded machine (the in-process cancel tests count layers instead).
	if d := time.Since(t0); d > 10*time.Second {
		t.Fatalf("exit took %v after SIGINT", d)
	}
	ee, ok := err.(*exec.ExitError)
	if !ok || ee.ExitCode() != 130 {
		t.Fatalf("exit: %v, want status 130; stderr:\n%s", err, stderr.String())
	}
	b, err := os.ReadFile(csv)
	if err != nil {
		t.Fatal(err)
	}
	lines := strings.Split(strings.TrimRight(string(b), "\n"), "\n")
	if !strings.HasPrefix(lines[0], "step,steps,wall_ms") {
		t.Fatalf("header: %q", lines[0])
	}
	last := lines[len(lines)-1]
	if !strings.HasPrefix(last, "# summary") || !strings.Contains(last, "status=canceled") {
		t.Fatalf("trailer: %q", last)
	}
	for i, l := range lines[1 : len(lines)-1] {
		if strings.Count(l, ",") != 11 {
			t.Fatalf("row %d is torn: %q", i+1, l)
		}
	}
	if !strings.Contains(stderr.String(), `"event":"summary"`) {
		t.Fatalf("no summary event on stderr:\n%s", stderr.String())
	}
}
