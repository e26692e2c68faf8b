//go:build !linux

package gen

import "os"

// fileSink writes a new file sequentially (buffered; O_DIRECT is Linux only).
type fileSink struct{ f *os.File }

func newFileSink(f *os.File) *fileSink { return &fileSink{f: f} }

func (s *fileSink) Write(p []byte) (int, error) { return s.f.Write(p) }

// Close syncs the file; it does not close it.
func (s *fileSink) Close() error { return s.f.Sync() }
