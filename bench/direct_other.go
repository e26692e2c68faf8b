//go:build !linux

package bench

import (
	"fmt"
	"os"
	"runtime"
	"unsafe"
)

// openDirect: the roofline's disk rate is measured with O_DIRECT, which
// only Linux (and Android) have.
func openDirect(path string) (*os.File, error) {
	return nil, fmt.Errorf("%s: O_DIRECT is Linux-only (this is %s)", path, runtime.GOOS)
}

func uintptrOf(b []byte) uintptr { return uintptr(unsafe.Pointer(unsafe.SliceData(b))) }
