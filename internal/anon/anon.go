// Package anon maps the engine's large buffers — expert cache slots, O_DIRECT
// destinations, dense weights — as anonymous private memory outside the Go
// heap, optionally backed by transparent huge pages.
//
// Huge pages matter to the streaming pipeline twice. An O_DIRECT read pins the
// destination's pages and hands the device one segment per physically
// contiguous run: with 4 KiB pages a 3 MB expert is ~750 segments, split into
// several requests (virtio-blk takes 254 segments per request), each pinned
// page by page; with 2 MiB pages it is a handful of segments in one request.
// On the development VM that doubled cold-read throughput and halved the CPU
// per GB read (docs/measurements.md, "Figures from code comments").
// Matrix-vector kernels
// streaming dense weights also take fewer TLB misses.
//
// Huge pages are a request (madvise MADV_HUGEPAGE), not a guarantee: with THP
// disabled, under memory pressure or on kernels without it, the kernel backs
// the mapping with 4 KiB pages and nothing else changes. Mappings are
// MAP_NORESERVE and untouched until first written, so they cost no memory
// until used; a Prefaulter (prefault.go) faults a mapping in on a goroutine
// of its own shortly before its owner uses it, so O_DIRECT reads into it do
// not fault their destination pages inside the read; Populate (populate.go)
// does the same at once for any live slice, on the Go heap too (the KV
// cache's rows, model.State). A mapping belongs to its caller; Unmap it
// once, after its last use (after closing its Prefaulter).
package anon

import (
	"fmt"

	"golang.org/x/sys/unix"
)

// PageSize is the alignment of every mapping (and the O_DIRECT block).
const PageSize = 4096

// Map returns n bytes (n > 0, rounded up to PageSize in its capacity) of
// zeroed anonymous memory, page aligned. With huge set the range is advised
// for transparent huge pages; failure of that advice is ignored.
func Map(n int64, huge bool) ([]byte, error) {
	if n <= 0 {
		return nil, fmt.Errorf("anon: mapping %d bytes", n)
	}
	l := (n + PageSize - 1) &^ (PageSize - 1)
	if int64(int(l)) != l {
		return nil, fmt.Errorf("anon: mapping %d bytes: too large for this platform", n)
	}
	b, err := unix.Mmap(-1, 0, int(l), unix.PROT_READ|unix.PROT_WRITE, unix.MAP_ANON|unix.MAP_PRIVATE|unix.MAP_NORESERVE)
	if err != nil {
		return nil, fmt.Errorf("anon: mapping %d bytes: %w", l, err)
	}
	if huge {
		adviseHuge(b)
	}
	return b[:n], nil
}

// Unmap releases a mapping returned by Map (any reslice of it that keeps its
// start and capacity).
func Unmap(b []byte) error {
	if cap(b) == 0 {
		return nil
	}
	if err := unix.Munmap(b[:cap(b)]); err != nil {
		return fmt.Errorf("anon: unmapping %d bytes: %w", cap(b), err)
	}
	return nil
}
