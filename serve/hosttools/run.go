package hosttools

import (
	"bytes"
	"context"
	"errors"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"time"
)

// runResult is a finished command: its output (stdout and stderr as they
// came, at most the limit, then "[output truncated]"), exit code (-1 when
// it was killed or did not start) and whether its timeout ended it.
type runResult struct {
	output   string
	exitCode int
	timedOut bool
}

// waitDelay bounds how long a command's pipes stay open after it exited or
// was killed (a background child holding them).
const waitDelay = 2 * time.Second

// run runs args in dir ("": the server's) with stdout and stderr in one
// pipe, at most maxOut bytes kept (the rest drained, so the child never
// blocks), each chunk passed to emit (nil: none; false: stop), for at most
// timeout. The command's process group is killed when it times out, ctx
// ends or emit stops it, and after it exits.
func run(ctx context.Context, args []string, dir string, maxOut int, timeout time.Duration, emit func(string) bool) runResult {
	tctx, cancel := context.WithTimeout(ctx, timeout)
	defer cancel()
	cmd := exec.CommandContext(tctx, args[0], args[1:]...)
	cmd.Dir = dir
	setGroup(cmd)
	cmd.WaitDelay = waitDelay
	out := &capped{max: maxOut, emit: emit, stop: cancel}
	cmd.Stdout, cmd.Stderr = out, out
	if err := cmd.Start(); err != nil {
		return runResult{output: "failed to spawn process", exitCode: -1}
	}
	_ = cmd.Wait()
	killGroup(cmd)
	res := runResult{output: out.buf.String(), exitCode: cmd.ProcessState.ExitCode()}
	res.timedOut = errors.Is(tctx.Err(), context.DeadlineExceeded) && ctx.Err() == nil && !out.stopped
	if out.truncated {
		res.output += "\n[output truncated]"
	}
	return res
}

// capped keeps the first max bytes written and discards the rest.
type capped struct {
	buf       bytes.Buffer
	max       int
	truncated bool
	emit      func(string) bool
	stop      func()
	stopped   bool
}

func (c *capped) Write(p []byte) (int, error) {
	if c.truncated || c.stopped {
		return len(p), nil
	}
	keep := p
	if room := c.max - c.buf.Len(); len(keep) > room {
		keep, c.truncated = keep[:room], true
	}
	c.buf.Write(keep)
	if c.emit != nil && len(keep) > 0 && !c.emit(string(keep)) {
		c.stopped = true
		c.stop()
	}
	return len(p), nil
}

// resolve is llama-server's tools_io_basic::resolve: a leading "~" is
// $HOME, a relative path joins cwd (or the server's working directory), and
// the result is cleaned and absolute.
func resolve(cwd, path string) string {
	if path == "~" || strings.HasPrefix(path, "~/") {
		if home := os.Getenv("HOME"); home != "" {
			path = home + path[1:]
		}
	}
	if !filepath.IsAbs(path) {
		base := cwd
		if base == "" {
			wd, err := os.Getwd()
			if err != nil {
				return filepath.Clean(path)
			}
			base = wd
		}
		path = filepath.Join(base, path)
	}
	return filepath.Clean(path)
}
