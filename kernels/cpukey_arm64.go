//go:build arm64 && !purego

package kernels

import (
	"bufio"
	"io"
	"os"
	"strings"
	"sync"
)

// CPUKey names this CPU's class for the kernel table (cputable.json) and
// the calibration cache: the MIDR implementer and part of the first core
// in /proc/cpuinfo, e.g. arm64-0x41-0xd0b (arm64-unknown where there is no
// such file).
func CPUKey() string { return cpuKey() }

var cpuKey = sync.OnceValue(func() string {
	f, err := os.Open("/proc/cpuinfo")
	if err != nil {
		return "arm64-unknown"
	}
	defer f.Close()
	return arm64Key(f)
})

// arm64Key reads the first "CPU implementer" and "CPU part" of a
// /proc/cpuinfo.
func arm64Key(r io.Reader) string {
	var impl, part string
	sc := bufio.NewScanner(io.LimitReader(r, 1<<20))
	for sc.Scan() && (impl == "" || part == "") {
		k, v, ok := strings.Cut(sc.Text(), ":")
		if !ok {
			continue
		}
		v = strings.TrimSpace(v)
		switch strings.TrimSpace(k) {
		case "CPU implementer":
			impl = keyChars(v)
		case "CPU part":
			part = keyChars(v)
		}
	}
	if impl == "" || part == "" {
		return "arm64-unknown"
	}
	return "arm64-" + impl + "-" + part
}

func keyChars(s string) string {
	if len(s) > 16 {
		s = s[:16]
	}
	return strings.Map(func(r rune) rune {
		if r >= 'a' && r <= 'z' || r >= 'A' && r <= 'Z' || r >= '0' && r <= '9' {
			return r
		}
		return '_'
	}, s)
}
