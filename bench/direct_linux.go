//go:build linux

package bench

import (
	"os"
	"unsafe"

	"golang.org/x/sys/unix"
)

// openDirect opens path for reading with O_DIRECT (the page cache bypassed,
// as pipe's expert reads).
func openDirect(path string) (*os.File, error) {
	return os.OpenFile(path, os.O_RDONLY|unix.O_DIRECT, 0)
}

func uintptrOf(b []byte) uintptr { return uintptr(unsafe.Pointer(unsafe.SliceData(b))) }
