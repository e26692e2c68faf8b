package main

import (
	"bufio"
	"fmt"
	"io"
	"os"

	"github.com/pipe-engine/pipe/gguf"
	"github.com/pipe-engine/pipe/internal/safefile"
)

// output is a file a command writes besides stdout (--logits-out,
// --route-trace, --tokens-out, --cpuprofile): created through the command's
// guard (never an input, never another output), buffered, and with its first
// write error kept, so that the run can end with it and Close reports a
// failed final flush or close. The error names the flag and the path.
type output struct {
	flag, path string
	f          *os.File
	bw         *bufio.Writer
	err        error
}

// createOutput opens path for flag through guard.
func createOutput(guard *safefile.Guard, flag, path string) (*output, error) {
	f, err := guard.Create(flag, path)
	if err != nil {
		return nil, fmt.Errorf("%s: %w", flag, err)
	}
	return &output{flag: flag, path: path, f: f, bw: bufio.NewWriterSize(f, 64<<10)}, nil
}

func (o *output) fail(err error) error {
	if o.err == nil {
		o.err = fmt.Errorf("%s %s: %w", o.flag, o.path, err)
	}
	return o.err
}

// Write implements io.Writer; after a failure every call returns the first
// error.
func (o *output) Write(p []byte) (int, error) {
	if o.err != nil {
		return 0, o.err
	}
	n, err := o.bw.Write(p)
	if err != nil {
		return n, o.fail(err)
	}
	return n, nil
}

// Err is the first write error, if any.
func (o *output) Err() error { return o.err }

// Close flushes and closes the file (once; later calls return the same
// result) and returns the first error of any write, the flush or the close.
func (o *output) Close() error {
	if o.f == nil {
		return o.err
	}
	if o.err == nil {
		if err := o.bw.Flush(); err != nil {
			o.fail(err)
		}
	}
	if err := o.f.Close(); err != nil {
		o.fail(err)
	}
	o.f = nil
	return o.err
}

// modelGuard protects the model's files (every shard of a split model) from
// the outputs of a run.
func modelGuard(path string) *safefile.Guard {
	g := &safefile.Guard{}
	for _, p := range gguf.ShardPaths(path) {
		g.Protect("the model -m", p)
	}
	return g
}

// stdoutWriter is stdout that remembers its first write error (a closed pipe,
// a full disk) so that the run ends with it instead of exiting 0 after losing
// the text.
type stdoutWriter struct {
	w   io.Writer
	err error
}

// write writes s, returning the first error with what was being written.
func (s *stdoutWriter) write(str string, what string) error {
	if s.err != nil {
		return s.err
	}
	if _, err := io.WriteString(s.w, str); err != nil {
		s.err = fmt.Errorf("stdout: %s: %w", what, err)
		return s.err
	}
	if f, ok := s.w.(interface{ Flush() error }); ok {
		if err := f.Flush(); err != nil {
			s.err = fmt.Errorf("stdout: %s: %w", what, err)
		}
	}
	return s.err
}
