package reader

import (
	"errors"
	"fmt"
	"io"
	"os"
	"sync"
	"sync/atomic"

	"golang.org/x/sys/unix"
)

// Sentinel errors; match them with errors.Is.
var (
	// ErrShortRead: the file ended before the requested slice did.
	ErrShortRead = errors.New("reader: short read")
	// ErrRead: the read failed (EIO and friends); the cause is wrapped too.
	ErrRead = errors.New("reader: read failed")
	// ErrUnaligned: an O_DIRECT destination buffer does not start on a BlockSize boundary.
	ErrUnaligned = errors.New("reader: destination buffer not aligned")
	// ErrBufferTooSmall: the destination is shorter than SpanBytes of the ranges.
	ErrBufferTooSmall = errors.New("reader: destination buffer too small")
	// ErrBadRange: a range names a shard that does not exist or has a negative offset/length.
	ErrBadRange = errors.New("reader: bad range")
	// ErrClosed: the files or lanes were closed.
	ErrClosed = errors.New("reader: closed")
)

// File is what the reader needs of an open file: io.ReaderAt semantics (a
// result shorter than p comes with an error, io.EOF at end of file) and Close.
// Tests wrap files with it to inject short reads, EIO and EINVAL.
type File interface {
	ReadAt(p []byte, off int64) (int, error)
	Close() error
}

// OpenFunc opens path read-only, with O_DIRECT when direct is true.
type OpenFunc func(path string, direct bool) (File, error)

// Options configure Open.
type Options struct {
	// NoODirect disables O_DIRECT (--no-odirect): all reads are buffered pread.
	NoODirect bool
	// Open opens one file; nil means the operating system (OpenOS).
	Open OpenFunc
	// Logf, if set, is called once when O_DIRECT is abandoned for buffered reads.
	Logf func(format string, args ...any)
}

// chunkBytes bounds one pread call of ReadRanges (Linux caps a single read at
// ~2 GiB); laneChunkBytes is the piece size lanes spread over each other, so a
// large range (dense weights) is read by all lanes at once.
const (
	chunkBytes     = 64 << 20
	laneChunkBytes = 4 << 20
)

// Files is an open model: its shard files, each with an O_DIRECT handle (when
// available) and a buffered one. Safe for concurrent use.
type Files struct {
	paths     []string
	direct    []File // nil entries when O_DIRECT is off for the file
	buffered  []File
	useDirect atomic.Bool
	fallback  sync.Once
	logf      func(string, ...any)
	closed    atomic.Bool
}

// Open opens the shard files in paths (index = Range.Shard).
func Open(paths []string, o Options) (*Files, error) {
	open := o.Open
	if open == nil {
		open = OpenOS
	}
	f := &Files{
		paths:    append([]string(nil), paths...),
		direct:   make([]File, len(paths)),
		buffered: make([]File, len(paths)),
		logf:     o.Logf,
	}
	f.useDirect.Store(!o.NoODirect && directSupported)
	for i, p := range paths {
		b, err := open(p, false)
		if err != nil {
			f.Close()
			return nil, fmt.Errorf("reader: open %s: %w", p, err)
		}
		f.buffered[i] = b
		if !f.useDirect.Load() {
			continue
		}
		d, err := open(p, true)
		switch {
		case err == nil:
			f.direct[i] = d
		case errors.Is(err, unix.EINVAL):
			f.disableDirect(p, fmt.Errorf("open with O_DIRECT: %w", err))
		default:
			f.Close()
			return nil, fmt.Errorf("reader: open %s with O_DIRECT: %w", p, err)
		}
	}
	if !f.useDirect.Load() {
		// Drop direct handles opened before a later shard forced the fallback.
		for i, d := range f.direct {
			if d != nil {
				d.Close()
				f.direct[i] = nil
			}
		}
	}
	return f, nil
}

// ODirect reports whether reads are currently served with O_DIRECT (false with
// --no-odirect or after the automatic fallback).
func (f *Files) ODirect() bool { return f.useDirect.Load() }

// Paths returns the shard paths (index = Range.Shard). The slice must not be modified.
func (f *Files) Paths() []string { return f.paths }

func (f *Files) disableDirect(path string, cause error) {
	f.fallback.Do(func() {
		f.useDirect.Store(false)
		if f.logf != nil {
			f.logf("reader: O_DIRECT unavailable on %s (%v); falling back to buffered reads", path, cause)
		}
	})
}

// Close closes every handle. Reads after Close fail with ErrClosed.
func (f *Files) Close() error {
	if f.closed.Swap(true) {
		return nil
	}
	var errs []error
	for _, set := range [][]File{f.direct, f.buffered} {
		for _, h := range set {
			if h != nil {
				if err := h.Close(); err != nil {
					errs = append(errs, err)
				}
			}
		}
	}
	if err := errors.Join(errs...); err != nil {
		return fmt.Errorf("reader: close: %w", err)
	}
	return nil
}

// ReadRanges reads every range of rs into dst with the layout described in the
// package comment and returns the number of bytes transferred from the files
// (widened bytes with O_DIRECT, exact bytes when buffered). label names the
// read in errors (e.g. "layer 3 expert 17"); it may be empty. The ranges are
// read one after the other by the calling goroutine; Lanes read the pieces
// of a request in parallel.
func (f *Files) ReadRanges(dst []byte, rs []Range, label string) (int64, error) {
	if err := f.check(dst, rs, label); err != nil {
		return 0, err
	}
	var moved int64
	var err error
	forPieces(rs, chunkBytes, func(p piece) bool {
		var n int64
		n, err = f.readPiece(dst, p, label)
		moved += n
		return err == nil
	})
	return moved, err
}

// check validates a read before any byte moves.
func (f *Files) check(dst []byte, rs []Range, label string) error {
	if f.closed.Load() {
		return ErrClosed
	}
	for _, r := range rs {
		if r.Shard < 0 || r.Shard >= len(f.paths) || r.Off < 0 || r.Len < 0 {
			return fmt.Errorf("%w: shard %d offset %d length %d (%d shards)%s", ErrBadRange, r.Shard, r.Off, r.Len, len(f.paths), labelSuffix(label))
		}
	}
	if need := SpanBytes(rs); int64(len(dst)) < need {
		return fmt.Errorf("%w: %d bytes for a span of %d%s", ErrBufferTooSmall, len(dst), need, labelSuffix(label))
	}
	if f.useDirect.Load() && !Aligned(dst) {
		return fmt.Errorf("%w%s", ErrUnaligned, labelSuffix(label))
	}
	return nil
}

// piece is a part of one range that one pread call serves: the exact bytes
// [off, off+n) of the shard, their widened run [wStart, wStart+wLen) and
// where that run starts in the destination buffer.
type piece struct {
	r            Range // the whole range (for error messages)
	off, n       int64
	wStart, wLen int64
	bufOff       int64
}

// forPieces splits every range of rs at multiples of chunk (a multiple of
// BlockSize) counted from the range's widened start and calls fn for each
// piece in order until fn returns false. Pieces of one range tile its widened
// run, so they never overlap in the buffer.
func forPieces(rs []Range, chunk int64, fn func(piece) bool) {
	var pos int64
	for _, r := range rs {
		start, l := Widen(r.Off, r.Len)
		for c := int64(0); c < l; c += chunk {
			wEnd := min(c+chunk, l)
			lo := max(start+c, r.Off)
			hi := min(start+wEnd, r.Off+r.Len)
			p := piece{r: r, off: lo, n: max(hi-lo, 0), wStart: start + c, wLen: wEnd - c, bufOff: pos + c}
			if !fn(p) {
				return
			}
		}
		pos += l
	}
}

// readPiece reads one piece into dst (the whole request buffer).
func (f *Files) readPiece(dst []byte, p piece, label string) (int64, error) {
	if f.closed.Load() {
		return 0, ErrClosed
	}
	if p.n == 0 {
		return 0, nil
	}
	if f.useDirect.Load() {
		if d := f.direct[p.r.Shard]; d != nil {
			buf := dst[p.bufOff : p.bufOff+p.wLen]
			n, err := readFull(d, buf, p.wStart, p.off+p.n-p.wStart)
			if err == nil || !errors.Is(err, unix.EINVAL) {
				return n, f.wrap(err, n, int64(len(buf)), p.wStart, p.r, label)
			}
			f.disableDirect(f.paths[p.r.Shard], fmt.Errorf("read at offset %d: %w", p.wStart, err))
		}
	}
	// Buffered: read only the exact bytes, at their place inside the widened run.
	lead := p.bufOff + p.off - p.wStart
	n, err := readFull(f.buffered[p.r.Shard], dst[lead:lead+p.n], p.off, p.n)
	return n, f.wrap(err, n, p.n, p.off, p.r, label)
}

func (f *Files) wrap(err error, n, want, off int64, r Range, label string) error {
	if err == nil {
		return nil
	}
	path := f.paths[r.Shard]
	if errors.Is(err, io.EOF) || errors.Is(err, io.ErrUnexpectedEOF) || errors.Is(err, errShort) {
		return fmt.Errorf("%w: %s offset %d: got %d of %d bytes (slice %d+%d)%s",
			ErrShortRead, path, off, n, want, r.Off, r.Len, labelSuffix(label))
	}
	return fmt.Errorf("%w: %s offset %d length %d (slice %d+%d)%s: %w",
		ErrRead, path, off, want, r.Off, r.Len, labelSuffix(label), err)
}

var errShort = errors.New("short read without error")

// readFull reads buf from h at off in chunks. It succeeds once at least need
// bytes are in (the widened tail past end of file may be missing).
func readFull(h File, buf []byte, off, need int64) (int64, error) {
	var got int64
	for got < int64(len(buf)) {
		want := min(chunkBytes, int64(len(buf))-got)
		n, err := h.ReadAt(buf[got:got+want], off+got)
		if n < 0 || int64(n) > want {
			return got, fmt.Errorf("file returned %d bytes for a %d-byte read: %w", n, want, errShort)
		}
		got += int64(n)
		if err != nil {
			if errors.Is(err, io.EOF) && got >= need {
				return got, nil
			}
			return got, err
		}
		if int64(n) < want { // short without an error: tolerated only past the slice
			if got >= need {
				return got, nil
			}
			return got, errShort
		}
	}
	return got, nil
}

func labelSuffix(label string) string {
	if label == "" {
		return ""
	}
	return " (" + label + ")"
}

// osFile is a File over a raw descriptor using pread.
type osFile struct {
	fd     int
	direct bool
	name   string
}

// OpenOS opens path read-only (with O_DIRECT when direct) as a File.
func OpenOS(path string, direct bool) (File, error) {
	flags := unix.O_RDONLY | unix.O_CLOEXEC
	if direct {
		if !directSupported {
			return nil, unix.EINVAL
		}
		flags |= oDirect
	}
	for {
		fd, err := unix.Open(path, flags, 0)
		if err == unix.EINTR {
			continue
		}
		if err != nil {
			return nil, &os.PathError{Op: "open", Path: path, Err: err}
		}
		return &osFile{fd: fd, direct: direct, name: path}, nil
	}
}

// ReadAt implements io.ReaderAt with pread, retrying EINTR and partial reads.
// With O_DIRECT a partial read that ends off a block boundary means end of file.
func (o *osFile) ReadAt(p []byte, off int64) (int, error) {
	got := 0
	for got < len(p) {
		n, err := unix.Pread(o.fd, p[got:], off+int64(got))
		if err == unix.EINTR {
			continue
		}
		if err != nil {
			return got, err
		}
		if n == 0 {
			return got, io.EOF
		}
		got += n
		if o.direct && n%BlockSize != 0 && got < len(p) {
			return got, io.EOF
		}
	}
	return got, nil
}

func (o *osFile) Close() error {
	if err := unix.Close(o.fd); err != nil {
		return &os.PathError{Op: "close", Path: o.name, Err: err}
	}
	return nil
}
