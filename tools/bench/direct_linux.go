//go:build linux

package bench

import (
	"os"
	"syscall"
	"unsafe"

	"golang.org/x/sys/unix"
)

// openDirect opens path for reading with O_DIRECT (the page cache bypassed,
// as pipe's expert reads).
func openDirect(path string) (*os.File, error) {
	return os.OpenFile(path, os.O_RDONLY|unix.O_DIRECT, 0)
}

func uintptrOf(b []byte) uintptr { return uintptr(unsafe.Pointer(unsafe.SliceData(b))) }

// inblockMiB is the MiB a waited-for child and its waited-for descendants
// read from block devices: Linux counts ru_inblock in 512-byte units (the
// task's I/O accounting read_bytes, O_DIRECT reads included).
func inblockMiB(ru *syscall.Rusage) float64 { return float64(ru.Inblock) * 512 / (1 << 20) }
