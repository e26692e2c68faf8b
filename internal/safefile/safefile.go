// Package safefile opens the files pipe reads and writes so that nothing a
// user types can make it destroy a file or block forever.
//
// Inputs (a model, a per-token CSV, a routing trace) are opened with
// OpenInput: non-blocking, so a FIFO or a device never blocks the open, and
// then refused unless they are regular files, so no later read blocks either.
//
// Outputs are created through a Guard that knows the run's inputs and the
// outputs created so far: an output that is the same file (os.SameFile, so
// hard links, symlinks and other spellings count) as any of them is refused
// before a byte of it is truncated. A regular output is truncated after that
// check on the open descriptor (no window in which another path could be
// swapped in); a non-regular one (/dev/null, a terminal, a FIFO with a reader)
// is written in place and never truncated. A FIFO without a reader is an
// error, not a blocked open.
//
// Writers that build a file aside and rename it into place (gen) call
// CheckReplace first: they may replace only a regular file or nothing.
//
// A Guard is not safe for concurrent use; it belongs to one command.
package safefile

import (
	"errors"
	"fmt"
	"io"
	"io/fs"
	"os"
	"syscall"
)

// Sentinel errors.
var (
	// ErrSameFile: an output is the same file as an input or another output.
	ErrSameFile = errors.New("is the same file as")
	// ErrNotRegular: an input is not a regular file, or a rename target exists
	// and is not a regular file.
	ErrNotRegular = errors.New("not a regular file")
	// ErrNoReader: an output is a FIFO that no process is reading.
	ErrNoReader = errors.New("FIFO has no reader")
)

// kind names a file type for messages.
func kind(m fs.FileMode) string {
	switch {
	case m&fs.ModeNamedPipe != 0:
		return "a FIFO"
	case m&fs.ModeSocket != 0:
		return "a socket"
	case m&fs.ModeCharDevice != 0:
		return "a character device"
	case m&fs.ModeDevice != 0:
		return "a block device"
	case m.IsDir():
		return "a directory"
	case m&fs.ModeSymlink != 0:
		return "a symbolic link"
	}
	return "not regular"
}

// OpenInput opens path for reading. It never blocks (the open is
// non-blocking) and fails with ErrNotRegular unless path is a regular file.
func OpenInput(path string) (*os.File, error) {
	f, err := os.OpenFile(path, os.O_RDONLY|syscall.O_NONBLOCK, 0)
	if err != nil {
		return nil, err
	}
	st, err := f.Stat()
	if err != nil {
		f.Close()
		return nil, err
	}
	if !st.Mode().IsRegular() {
		f.Close()
		return nil, &os.PathError{Op: "open", Path: path, Err: fmt.Errorf("%w (it is %s)", ErrNotRegular, kind(st.Mode()))}
	}
	return f, nil
}

// ReadFile is os.ReadFile through OpenInput.
func ReadFile(path string) ([]byte, error) {
	f, err := OpenInput(path)
	if err != nil {
		return nil, err
	}
	defer f.Close()
	return io.ReadAll(f)
}

// guarded is one protected file.
type guarded struct {
	name, path string
	fi         os.FileInfo
}

// Guard refuses outputs that are the same file as a protected one.
type Guard struct {
	files []guarded
}

// Protect adds path, called name in errors (a flag such as "-m"), to the
// files no output may be. A path that does not exist or is not a regular
// file protects nothing (there is nothing an output could destroy).
func (g *Guard) Protect(name, path string) {
	fi, err := os.Stat(path)
	if err != nil || !fi.Mode().IsRegular() {
		return
	}
	g.files = append(g.files, guarded{name: name, path: path, fi: fi})
}

// check returns an ErrSameFile error when fi is a protected file.
func (g *Guard) check(path string, fi os.FileInfo) error {
	for _, p := range g.files {
		if os.SameFile(fi, p.fi) {
			return fmt.Errorf("%s: refusing to write it: it %w %s %s", path, ErrSameFile, p.name, p.path)
		}
	}
	return nil
}

// Create opens path for writing as name (a flag, for errors and for later
// outputs): it is created if missing, refused if it is a protected file,
// truncated if it is a regular file and written in place otherwise. The new
// output is protected from the outputs created after it.
func (g *Guard) Create(name, path string) (*os.File, error) {
	f, err := os.OpenFile(path, os.O_WRONLY|os.O_CREATE|syscall.O_NONBLOCK, 0o644)
	if err != nil {
		if errors.Is(err, syscall.ENXIO) {
			return nil, fmt.Errorf("%s: %w", path, ErrNoReader)
		}
		return nil, err
	}
	fail := func(err error) (*os.File, error) {
		f.Close()
		return nil, err
	}
	st, err := f.Stat()
	if err != nil {
		return fail(err)
	}
	if err := g.check(path, st); err != nil {
		return fail(err)
	}
	if st.Mode().IsRegular() {
		if err := f.Truncate(0); err != nil {
			return fail(err)
		}
		g.files = append(g.files, guarded{name: name, path: path, fi: st})
		return f, nil
	}
	// A FIFO or device: writes should block as usual, not fail with EAGAIN.
	if err := setBlocking(f); err != nil {
		return fail(err)
	}
	return f, nil
}

// setBlocking clears O_NONBLOCK and returns a File the runtime treats as
// blocking.
func setBlocking(f *os.File) error {
	rc, err := f.SyscallConn()
	if err != nil {
		return err
	}
	var serr error
	if err := rc.Control(func(fd uintptr) { serr = syscall.SetNonblock(int(fd), false) }); err != nil {
		return err
	}
	return serr
}

// CheckReplace reports whether a writer may rename a new file over path: path
// must not exist or be a regular file (checked without following a final
// symbolic link, which a rename would replace), and not a protected file.
func (g *Guard) CheckReplace(path string) error {
	fi, err := os.Lstat(path)
	if errors.Is(err, fs.ErrNotExist) {
		return nil
	}
	if err != nil {
		return err
	}
	if !fi.Mode().IsRegular() {
		return fmt.Errorf("%s: refusing to replace it: %w (it is %s)", path, ErrNotRegular, kind(fi.Mode()))
	}
	return g.check(path, fi)
}
