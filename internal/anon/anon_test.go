package anon

import (
	"os"
	"strconv"
	"strings"
	"testing"
	"unsafe"
)

func TestMap(t *testing.T) {
	for _, huge := range []bool{false, true} {
		b, err := Map(5<<20+17, huge)
		if err != nil {
			t.Fatal(err)
		}
		if len(b) != 5<<20+17 || cap(b)%PageSize != 0 || uintptr(unsafe.Pointer(&b[0]))%PageSize != 0 {
			t.Fatalf("len %d cap %d, unaligned or wrong size", len(b), cap(b))
		}
		for i := 0; i < len(b); i += 4096 {
			if b[i] != 0 {
				t.Fatal("not zeroed")
			}
			b[i] = 1
		}
		if err := Unmap(b); err != nil {
			t.Fatal(err)
		}
	}
	if _, err := Map(0, false); err == nil {
		t.Error("Map(0) succeeded")
	}
	if err := Unmap(nil); err != nil {
		t.Error(err)
	}
}

// TestHugeBacking checks, where the kernel offers THP on madvise, that a
// touched huge mapping is (at least partly) backed by huge pages.
func TestHugeBacking(t *testing.T) {
	mode, err := os.ReadFile("/sys/kernel/mm/transparent_hugepage/enabled")
	if err != nil || !(strings.Contains(string(mode), "[madvise]") || strings.Contains(string(mode), "[always]")) {
		t.Skipf("transparent huge pages not offered here (%q)", strings.TrimSpace(string(mode)))
	}
	b, err := Map(16<<20, true)
	if err != nil {
		t.Fatal(err)
	}
	defer Unmap(b)
	for i := 0; i < len(b); i += 4096 {
		b[i] = 1
	}
	if kb := anonHugeKB(t); kb == 0 {
		t.Skip("no huge pages were allocated (memory fragmented or THP defrag off); nothing to check")
	} else {
		t.Logf("AnonHugePages of this process: %d kB", kb)
	}
}

func anonHugeKB(t *testing.T) int64 {
	s, err := os.ReadFile("/proc/self/smaps_rollup")
	if err != nil {
		t.Skip(err)
	}
	for _, line := range strings.Split(string(s), "\n") {
		if f := strings.Fields(line); len(f) >= 2 && f[0] == "AnonHugePages:" {
			v, _ := strconv.ParseInt(f[1], 10, 64)
			return v
		}
	}
	return 0
}
