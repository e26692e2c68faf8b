package main

import (
	"context"
	"fmt"
	"io"
	"os"
)

// maxPromptBytes bounds a prompt read from -f (a file, a pipe or stdin) and
// a line of -i: far more text than any model's context holds (a token is
// at most a few dozen bytes), so only an endless or mistaken input meets it.
const maxPromptBytes = 64 << 20

// errPromptLimit: a prompt is longer than maxPromptBytes.
var errPromptLimit = fmt.Errorf("longer than %d MiB", maxPromptBytes>>20)

// readPrompt reads the prompt of -f: the file at path, or stdin for "-". The
// read is bounded (maxPromptBytes, errPromptLimit) and ends when ctx does:
// it runs on its own goroutine, so an open or a read that waits (a FIFO with
// no writer, a terminal) cannot hold the run past a signal. That goroutine
// may then stay blocked in the kernel; the process's exit ends it.
func readPrompt(ctx context.Context, path string) (string, error) {
	type result struct {
		b   []byte
		err error
	}
	done := make(chan result, 1)
	in := stdin // read here: the goroutine may outlive the caller's stdin
	go func() {
		b, err := readAllBounded(path, in)
		done <- result{b, err}
	}()
	select {
	case r := <-done:
		if r.err != nil {
			return "", fmt.Errorf("%w: -f %s: %w", errFlag, path, r.err)
		}
		return string(r.b), nil
	case <-ctx.Done():
		return "", ctx.Err()
	}
}

// readAllBounded reads path ("-": in) to its end, failing with
// errPromptLimit past maxPromptBytes.
func readAllBounded(path string, in io.Reader) ([]byte, error) {
	r := in
	if path != "-" {
		f, err := os.Open(path)
		if err != nil {
			return nil, err
		}
		defer f.Close()
		r = f
	}
	b, err := io.ReadAll(io.LimitReader(r, maxPromptBytes+1))
	if err != nil {
		return nil, err
	}
	if len(b) > maxPromptBytes {
		return nil, errPromptLimit
	}
	return b, nil
}
