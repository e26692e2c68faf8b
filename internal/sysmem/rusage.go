package sysmem

import (
	"bytes"
	"errors"
	"io"
	"os"
	"sync"
	"syscall"
	"time"
)

// Rusage is the process's cumulative major faults and CPU time.
func Rusage() (majflt int64, cpu time.Duration) {
	var ru syscall.Rusage
	if err := syscall.Getrusage(syscall.RUSAGE_SELF, &ru); err != nil {
		return 0, 0
	}
	cpu = time.Duration(ru.Utime.Nano() + ru.Stime.Nano())
	return ru.Majflt, cpu
}

// procIO is /proc/self/io, opened on first use and kept open (for the
// process's lifetime) so that the per-token sample reads it with one pread
// into a fixed buffer and allocates nothing.
var procIO struct {
	mu     sync.Mutex
	opened bool
	f      *os.File
	buf    [512]byte
}

// ProcReadBytes is the process's cumulative storage read bytes
// (/proc/self/io read_bytes), or -1 when unavailable.
func ProcReadBytes() int64 {
	procIO.mu.Lock()
	defer procIO.mu.Unlock()
	if !procIO.opened {
		procIO.opened = true
		procIO.f, _ = os.Open("/proc/self/io")
	}
	if procIO.f == nil {
		return -1
	}
	n, err := procIO.f.ReadAt(procIO.buf[:], 0)
	if err != nil && !errors.Is(err, io.EOF) {
		return -1
	}
	return readBytesField(procIO.buf[:n])
}

// readBytesField parses the read_bytes line of a /proc/<pid>/io text, or
// returns -1.
func readBytesField(b []byte) int64 {
	const key = "read_bytes: "
	i := bytes.Index(b, []byte("\n"+key))
	if i < 0 {
		if !bytes.HasPrefix(b, []byte(key)) {
			return -1
		}
		i = -1
	}
	var v int64
	digits := 0
	for _, c := range b[i+1+len(key):] {
		if c < '0' || c > '9' {
			break
		}
		v = v*10 + int64(c-'0')
		digits++
	}
	if digits == 0 {
		return -1
	}
	return v
}

// PeakRSS is the process's peak resident set size in bytes since its
// exec (/proc/self/status VmHWM), or -1 when unavailable. Unlike
// getrusage's ru_maxrss, which Linux carries across exec from the memory
// of the process that forked it (so a child started by a large parent
// reports at least the parent's size), it covers this program only.
func PeakRSS() int64 {
	b, err := os.ReadFile("/proc/self/status")
	if err != nil {
		return -1
	}
	return vmHWM(b)
}

// vmHWM parses the VmHWM line ("VmHWM:   123456 kB") of a
// /proc/<pid>/status text into bytes, or returns -1.
func vmHWM(b []byte) int64 {
	const key = "VmHWM:"
	i := bytes.Index(b, []byte(key))
	if i < 0 || (i > 0 && b[i-1] != '\n') {
		return -1
	}
	line := b[i+len(key):]
	if j := bytes.IndexByte(line, '\n'); j >= 0 {
		line = line[:j]
	}
	f := bytes.Fields(line)
	if len(f) != 2 || string(f[1]) != "kB" {
		return -1
	}
	var v int64
	for _, c := range f[0] {
		if c < '0' || c > '9' {
			return -1
		}
		v = v*10 + int64(c-'0')
	}
	return v << 10
}
