package reader

import (
	"fmt"
	"unsafe"

	"github.com/pipe-engine/pipe/gguf"
)

// BlockSize is the alignment of O_DIRECT offsets, lengths and buffers. 4 KiB is a
// multiple of every logical block size in use (512 B and 4 KiB), so one constant
// serves all devices.
const BlockSize = 4096

// Range is a byte range of one shard file (the model description's Range
// too).
type Range = gguf.Range

// Widen rounds [off, off+n) out to BlockSize boundaries and returns the start and
// the length of the widened range.
func Widen(off, n int64) (start, length int64) {
	start = off &^ (BlockSize - 1)
	end := (off + n + BlockSize - 1) &^ (BlockSize - 1)
	return start, end - start
}

// SpanBytes is the buffer size a read of rs needs: the sum of the widened
// lengths of its ranges (each range gets its own aligned block run).
func SpanBytes(rs []Range) int64 {
	var s int64
	for _, r := range rs {
		_, l := Widen(r.Off, r.Len)
		s += l
	}
	return s
}

// Views appends to dst the exact slices of rs inside buf (a buffer filled by a
// read of rs) and returns the extended slice. It fails with ErrBufferTooSmall if
// buf is shorter than SpanBytes(rs).
func Views(dst [][]byte, buf []byte, rs []Range) ([][]byte, error) {
	if need := SpanBytes(rs); int64(len(buf)) < need {
		return dst, fmt.Errorf("%w: %d bytes for a span of %d", ErrBufferTooSmall, len(buf), need)
	}
	var pos int64
	for _, r := range rs {
		start, l := Widen(r.Off, r.Len)
		o := pos + r.Off - start
		dst = append(dst, buf[o:o+r.Len:o+r.Len])
		pos += l
	}
	return dst, nil
}

// Aligned reports whether b starts on a BlockSize boundary (an empty slice is aligned).
func Aligned(b []byte) bool {
	if len(b) == 0 {
		return true
	}
	return uintptr(unsafe.Pointer(&b[0]))%BlockSize == 0
}
