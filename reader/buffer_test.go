package reader

import (
	"fmt"

	"github.com/pipe-engine/pipe/internal/anon"
)

// Buffer is page-aligned memory outside the Go heap (anonymous mmap), suitable
// as an O_DIRECT destination. It must be freed with Free; B must not be used after.
type Buffer struct {
	B []byte
}

// AllocAligned maps n bytes (rounded up to BlockSize) of anonymous memory.
func AllocAligned(n int64) (*Buffer, error) {
	if n <= 0 {
		return &Buffer{}, nil
	}
	_, l := Widen(0, n)
	b, err := anon.Map(l, l >= 2<<20) // huge pages: fewer device segments per read
	if err != nil {
		return nil, fmt.Errorf("reader: aligned buffer: %w", err)
	}
	return &Buffer{B: b[:n]}, nil
}

// Free unmaps the buffer. It is safe to call more than once.
func (b *Buffer) Free() error {
	if b == nil || cap(b.B) == 0 {
		return nil
	}
	err := anon.Unmap(b.B)
	b.B = nil
	return err
}
