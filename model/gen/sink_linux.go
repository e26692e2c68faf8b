//go:build linux

package gen

import (
	"fmt"
	"os"

	"golang.org/x/sys/unix"
)

const (
	directAlign = 4096
	directBuf   = 8 << 20
)

// fileSink writes a new file sequentially with O_DIRECT from a page-aligned
// buffer, so generating a model neither fills the page cache nor waits on
// write-back (buffered writes of 18 GB on a shared disk crawl). If the file
// system refuses O_DIRECT it falls back to plain buffered writes.
type fileSink struct {
	f      *os.File
	direct bool
	buf    []byte // anonymous mapping: page aligned, outside the Go heap
	n      int
	off    int64
}

func newFileSink(f *os.File) *fileSink {
	s := &fileSink{f: f}
	fd := int(f.Fd())
	fl, err := unix.FcntlInt(uintptr(fd), unix.F_GETFL, 0)
	if err != nil {
		return s
	}
	if _, err := unix.FcntlInt(uintptr(fd), unix.F_SETFL, fl|unix.O_DIRECT); err != nil {
		return s
	}
	buf, err := unix.Mmap(-1, 0, directBuf, unix.PROT_READ|unix.PROT_WRITE, unix.MAP_ANON|unix.MAP_PRIVATE)
	if err != nil {
		s.undirect()
		return s
	}
	s.buf, s.direct = buf, true
	return s
}

func (s *fileSink) undirect() {
	fd := uintptr(s.f.Fd())
	if fl, err := unix.FcntlInt(fd, unix.F_GETFL, 0); err == nil {
		_, _ = unix.FcntlInt(fd, unix.F_SETFL, fl&^unix.O_DIRECT)
	}
	s.direct = false
}

// flush writes buf[:n] (n a multiple of directAlign unless final).
func (s *fileSink) flush(n int) error {
	for n > 0 {
		w, err := unix.Pwrite(int(s.f.Fd()), s.buf[:n], s.off)
		if err == unix.EINVAL && s.off == 0 {
			// the file system does not do O_DIRECT after all
			s.undirect()
			continue
		}
		if err != nil {
			return fmt.Errorf("gen: write %s: %w", s.f.Name(), err)
		}
		if w%directAlign != 0 && w != n {
			return fmt.Errorf("gen: write %s: short O_DIRECT write (%d of %d bytes)", s.f.Name(), w, n)
		}
		s.off += int64(w)
		copy(s.buf, s.buf[w:n])
		n -= w
	}
	s.n = 0
	return nil
}

func (s *fileSink) Write(p []byte) (int, error) {
	if !s.direct {
		if s.buf != nil && s.n > 0 { // fell back with data buffered
			if err := s.flush(s.n); err != nil {
				return 0, err
			}
		}
		n, err := s.f.WriteAt(p, s.off)
		s.off += int64(n)
		return n, err
	}
	total := len(p)
	for len(p) > 0 {
		c := copy(s.buf[s.n:], p)
		s.n += c
		p = p[c:]
		if s.n == len(s.buf) {
			if err := s.flush(s.n); err != nil {
				return total - len(p), err
			}
		}
	}
	return total, nil
}

// Close writes the tail, trims the alignment padding, syncs and releases the
// buffer. It does not close the file.
func (s *fileSink) Close() error {
	defer func() {
		if s.buf != nil {
			_ = unix.Munmap(s.buf)
			s.buf = nil
		}
	}()
	if s.direct && s.n > 0 {
		size := s.off + int64(s.n)
		padded := (s.n + directAlign - 1) / directAlign * directAlign
		clear(s.buf[s.n:padded])
		if err := s.flush(padded); err != nil {
			return err
		}
		if err := s.f.Truncate(size); err != nil {
			return fmt.Errorf("gen: truncate %s: %w", s.f.Name(), err)
		}
		s.off = size
	} else if s.n > 0 {
		if err := s.flush(s.n); err != nil {
			return err
		}
	}
	return s.f.Sync()
}
