package main

import (
	"bytes"
	"context"
	"encoding/json"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"runtime/debug"
	"strings"
	"testing"

	"github.com/pipe-engine/pipe/model/gen"
)

func TestVersionOf(t *testing.T) {
	vcs := []debug.BuildSetting{{Key: "vcs.revision", Value: "fa50e07bcb06aa0011223344"}, {Key: "vcs.time", Value: "2026-12-05T19:55:29Z"}}
	for _, c := range []struct {
		stamped string
		bi      *debug.BuildInfo
		want    string
	}{
		{"dev", &debug.BuildInfo{GoVersion: "go1.26.8", Main: debug.Module{Version: "v0.3.1"}}, "pipe v0.3.1 (go1.26.8)"},
		{"dev", &debug.BuildInfo{GoVersion: "go1.26.8", Main: debug.Module{Version: "v0.0.0-20261205195529-fa50e07bcb06"}, Settings: vcs},
			"pipe v0.0.0-20261205195529-fa50e07bcb06 (rev fa50e07bcb06, 2026-12-05T19:55:29Z, go1.26.8)"},
		{"dev", &debug.BuildInfo{GoVersion: "go1.26.8", Main: debug.Module{Version: "(devel)"}, Settings: append(vcs, debug.BuildSetting{Key: "vcs.modified", Value: "true"})},
			"pipe v0.0.0-20261205195529-fa50e07bcb06+dirty (rev fa50e07bcb06+dirty, 2026-12-05T19:55:29Z, go1.26.8)"},
		{"v1.2.3", &debug.BuildInfo{GoVersion: "go1.26.8", Main: debug.Module{Version: "(devel)"}}, "pipe v1.2.3 (go1.26.8)"},
		{"dev", nil, "pipe dev"},
	} {
		if got := versionOf(c.stamped, c.bi); got != c.want {
			t.Errorf("%q %+v:\n got %q\nwant %q", c.stamped, c.bi, got, c.want)
		}
	}
	if got := versionOf("dev", &debug.BuildInfo{GoVersion: "go1.26.8", Main: debug.Module{Version: "(devel)"}}); !strings.HasPrefix(got, "pipe v0.0.0-unknown (no version recorded: ") {
		t.Errorf("no build info: %q", got)
	}
}

// TestFingerprintOf: serve's system_fingerprint is "b", the version with the
// revision (llama-server's b<build>-<commit>), the revision once.
func TestFingerprintOf(t *testing.T) {
	vcs := []debug.BuildSetting{{Key: "vcs.revision", Value: "fa50e07bcb06aa0011223344"}, {Key: "vcs.time", Value: "2026-12-05T19:55:29Z"}}
	dirty := append(vcs[:2:2], debug.BuildSetting{Key: "vcs.modified", Value: "true"})
	for _, c := range []struct {
		stamped string
		bi      *debug.BuildInfo
		want    string
	}{
		{"dev", &debug.BuildInfo{Main: debug.Module{Version: "v0.3.1"}}, "b0.3.1"},
		{"dev", &debug.BuildInfo{Main: debug.Module{Version: "v0.3.1"}, Settings: vcs}, "b0.3.1-fa50e07bcb06"},
		{"dev", &debug.BuildInfo{Main: debug.Module{Version: "v0.0.0-20261205195529-fa50e07bcb06"}, Settings: vcs}, "b0.0.0-20261205195529-fa50e07bcb06"},
		{"dev", &debug.BuildInfo{Main: debug.Module{Version: "(devel)"}, Settings: dirty}, "b0.0.0-20261205195529-fa50e07bcb06+dirty"},
		{"v1.2.3", &debug.BuildInfo{Main: debug.Module{Version: "(devel)"}}, "b1.2.3"},
		{"dev", &debug.BuildInfo{Main: debug.Module{Version: "(devel)"}}, "b0-unknown"},
		{"dev", nil, "bdev"},
	} {
		if got := fingerprintOf(c.stamped, c.bi); got != c.want {
			t.Errorf("%q %+v: got %q, want %q", c.stamped, c.bi, got, c.want)
		}
	}
}

// TestVersionStamped builds pipe as the README says (go build in a git
// clone) and reads its --version: a pseudo-version with the revision.
// A linked git worktree is not a clone Go stamps; CI's is.
func TestVersionStamped(t *testing.T) {
	if testing.Short() {
		t.Skip("builds the binary")
	}
	top, err := exec.Command("git", "rev-parse", "--path-format=absolute", "--git-dir", "--git-common-dir").Output()
	if dirs := strings.Fields(string(top)); err != nil || len(dirs) != 2 || dirs[0] != dirs[1] {
		if os.Getenv("CI") == "true" {
			t.Fatalf("CI's checkout is not a plain git clone (%q, %v)", top, err)
		}
		t.Skipf("not a plain git clone (git dirs %q, %v): Go stamps no VCS information here", top, err)
	}
	bin := filepath.Join(t.TempDir(), "pipe")
	if out, err := exec.Command("go", "build", "-buildvcs=true", "-o", bin, ".").CombinedOutput(); err != nil {
		t.Fatalf("go build: %v\n%s", err, out)
	}
	out, err := exec.Command(bin, "--version").Output()
	if err != nil {
		t.Fatal(err)
	}
	if !regexp.MustCompile(`^pipe v0\.0\.0-\d{14}-[0-9a-f]{12}(\+dirty)? \(rev [0-9a-f]{12}`).Match(out) {
		t.Fatalf("--version: %q", out)
	}
}

func TestBarePipeUsage(t *testing.T) {
	var stdout, stderr bytes.Buffer
	if code := run(context.Background(), nil, &stdout, &stderr); code != 0 || !strings.Contains(stdout.String(), "Usage: pipe <command>") ||
		!strings.Contains(stdout.String(), "run") || !strings.Contains(stdout.String(), "serve") {
		t.Fatalf("exit %d\nstdout %q\nstderr %q", code, stdout.String(), stderr.String())
	}
}

// TestConsoleLogNoColor: --log-format console into a pipe (not a terminal)
// has no ANSI escape codes.
func TestConsoleLogNoColor(t *testing.T) {
	var stdout, stderr bytes.Buffer
	code := run(context.Background(), []string{"--log-format", "console", "run", "-m", "../../testdata/golden/models/tiny-qwen3moe-Q8_0.gguf",
		"-n", "2", "--hot-set", "none", "--cache-mb", "4M"}, &stdout, &stderr)
	if code != 0 || !strings.Contains(stderr.String(), "INF") || strings.Contains(stderr.String(), "\x1b[") {
		t.Fatalf("exit %d, stderr %q", code, stderr.String())
	}
}

// TestJSONErrorsEveryCommand: under --log-format json every command's error,
// and the command line's own, is a JSON event.
func TestJSONErrorsEveryCommand(t *testing.T) {
	for _, args := range [][]string{
		{"report", "/nonexistent.csv"},
		{"replay", "/nonexistent.trace"},
		{"inspect", "/nonexistent.gguf"},
		{"hotset", "-m", "/nonexistent.gguf", "--route-trace", "/nonexistent.trace"},
		{"nosuch"},
		{"run", "-ngl", "99"},
	} {
		var stdout, stderr bytes.Buffer
		code := run(context.Background(), append([]string{"--log-format", "json"}, args...), &stdout, &stderr)
		lines := strings.Split(strings.TrimSpace(stderr.String()), "\n")
		var ev struct{ Level, Message string }
		if code == 0 || len(lines) != 1 || json.Unmarshal([]byte(lines[0]), &ev) != nil || ev.Level != "error" || ev.Message == "" {
			t.Errorf("%q: exit %d, stderr %q", args, code, stderr.String())
		}
	}
}

// TestDemoSaysRandom: a run on the demo model (no -m) says its weights are
// random and what to try with a real model.
func TestDemoSaysRandom(t *testing.T) {
	cache := t.TempDir()
	t.Setenv("XDG_CACHE_HOME", cache)
	t.Setenv("HOME", cache)
	b, err := os.ReadFile("../../testdata/golden/models/tiny-qwen3moe-Q8_0.gguf")
	if err != nil {
		t.Fatal(err)
	}
	demo := filepath.Join(gen.DefaultCacheDir(), gen.DemoFile)
	if !strings.HasPrefix(demo, cache) {
		t.Fatalf("the demo path %s is not under XDG_CACHE_HOME", demo)
	}
	if err := os.MkdirAll(filepath.Dir(demo), 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(demo, b, 0o644); err != nil {
		t.Fatal(err)
	}
	var stdout, stderr bytes.Buffer
	if code := run(context.Background(), []string{"--log-format", "json", "run", "-n", "2", "--hot-set", "none"}, &stdout, &stderr); code != 0 {
		t.Fatalf("exit %d: %s", code, stderr.String())
	}
	for _, want := range []string{`"event":"demo_next"`, "weights are random", "pipe run -m "} {
		if !strings.Contains(stderr.String(), want) {
			t.Errorf("stderr lacks %q:\n%s", want, stderr.String())
		}
	}
}
