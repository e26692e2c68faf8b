package sysmem

import (
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"
)

func fakeRoots(t *testing.T, files map[string]string) (proc, cg string) {
	t.Helper()
	root := t.TempDir()
	for p, content := range files {
		full := filepath.Join(root, filepath.FromSlash(p))
		if err := os.MkdirAll(filepath.Dir(full), 0o755); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(full, []byte(content), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	return filepath.Join(root, "proc"), filepath.Join(root, "cg")
}

func TestCgroupLimitErrors(t *testing.T) {
	proc, cg := fakeRoots(t, map[string]string{"proc/self/cgroup": "0::/\n", "cg/memory.max": "lots\n"})
	if _, _, err := CgroupLimit(proc, cg); err == nil || !strings.Contains(err.Error(), "memory.max") {
		t.Errorf("garbage memory.max: %v", err)
	}
	proc, cg = fakeRoots(t, map[string]string{"proc/self/cgroup": "0::/\n", "cg/memory.max": "max\n"})
	if _, ok, err := CgroupLimit(proc, cg); ok || err != nil {
		t.Errorf("memory.max = max: ok %v, err %v", ok, err)
	}
}

func TestMemAvailable(t *testing.T) {
	proc, _ := fakeRoots(t, map[string]string{"proc/meminfo": "MemFree: 1024 kB\nCached: 2048 kB\n"})
	if v, err := MemAvailable(proc); err != nil || v != 3<<20 {
		t.Errorf("MemFree+Cached fallback: %d, %v", v, err)
	}
	proc, _ = fakeRoots(t, map[string]string{"proc/meminfo": "MemTotal: x kB\n"})
	if _, err := MemAvailable(proc); err == nil || !strings.Contains(err.Error(), "MemTotal") {
		t.Errorf("garbage meminfo: %v", err)
	}
}

// TestRusage: the CPU time grows with work (the test spins until it does;
// the minute is a hang guard: a CPU time that never grows fails there);
// /proc/self/io is read where it exists.
func TestRusage(t *testing.T) {
	_, c0 := Rusage()
	for deadline := time.Now().Add(time.Minute); ; {
		if _, c1 := Rusage(); c1 > c0 {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("CPU time still %v after a minute of spinning", c0)
		}
	}
	if _, err := os.Stat("/proc/self/io"); err == nil {
		if ProcReadBytes() < 0 {
			t.Error("/proc/self/io exists but read_bytes was not parsed")
		}
		if n := testing.AllocsPerRun(10, func() { ProcReadBytes() }); n != 0 {
			t.Errorf("ProcReadBytes: %.1f allocations per call", n)
		}
	}
}

// TestReadBytesField parses read_bytes wherever its line is and refuses
// texts without it.
func TestReadBytesField(t *testing.T) {
	for in, want := range map[string]int64{
		"rchar: 5\nwchar: 6\nread_bytes: 4096\nwrite_bytes: 0\n": 4096,
		"read_bytes: 12\n":           12,
		"rchar: 5\nread_bytes: 7":    7,
		"rchar: 5\n":                 -1,
		"rchar: 5\nread_bytes: x\n":  -1,
		"rchar: 5\nxread_bytes: 9\n": -1,
	} {
		if got := readBytesField([]byte(in)); got != want {
			t.Errorf("%q: %d, want %d", in, got, want)
		}
	}
}

// TestPeakRSS: the peak covers memory this process touched (a 64 MiB
// buffer written through is counted), and VmHWM parses only from its own
// line with its kB unit.
func TestPeakRSS(t *testing.T) {
	if _, err := os.Stat("/proc/self/status"); err != nil {
		if os.Getenv("CI") == "true" {
			t.Fatalf("no /proc/self/status under CI: %v", err)
		}
		t.Skip("no /proc/self/status on this system")
	}
	b := make([]byte, 64<<20)
	for i := 0; i < len(b); i += 4096 {
		b[i] = 1
	}
	if p := PeakRSS(); p < int64(len(b)) {
		t.Errorf("peak RSS %d bytes after touching a %d-byte buffer", p, len(b))
	}
	b[len(b)-1] = 2 // b stays live until here
	for in, want := range map[string]int64{
		"Name:\tx\nVmPeak:\t  9 kB\nVmHWM:\t   1234 kB\nVmRSS:\t 1000 kB\n": 1234 << 10,
		"VmHWM: 7 kB":        7 << 10,
		"VmRSS:\t 1000 kB\n": -1,
		"XVmHWM:\t 5 kB\n":   -1,
		"VmHWM:\t 5 MB\n":    -1,
		"VmHWM:\t 5x kB\n":   -1,
	} {
		if got := vmHWM([]byte(in)); got != want {
			t.Errorf("%q: %d, want %d", in, got, want)
		}
	}
}
