//go:build !linux

package bench

import (
	"fmt"
	"math"
	"os"
	"runtime"
	"syscall"
	"unsafe"
)

// openDirect: the roofline's disk rate is measured with O_DIRECT, which
// only Linux (and Android) have.
func openDirect(path string) (*os.File, error) {
	return nil, fmt.Errorf("%s: O_DIRECT is Linux-only (this is %s)", path, runtime.GOOS)
}

func uintptrOf(b []byte) uintptr { return uintptr(unsafe.Pointer(unsafe.SliceData(b))) }

// inblockMiB: elsewhere ru_inblock counts block operations, not bytes, so
// the bytes read are unknown.
func inblockMiB(*syscall.Rusage) float64 { return math.NaN() }
