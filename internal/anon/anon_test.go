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
// huge mapping carries the MADV_HUGEPAGE advice (VmFlags "hg" in
// /proc/self/smaps) and a plain one does not: that is what the code decides.
// Whether the kernel then backs it with huge pages depends on fragmentation
// and defrag settings, so AnonHugePages is logged, not required.
func TestHugeBacking(t *testing.T) {
	mode, err := os.ReadFile("/sys/kernel/mm/transparent_hugepage/enabled")
	if err != nil || !(strings.Contains(string(mode), "[madvise]") || strings.Contains(string(mode), "[always]")) {
		t.Skipf("transparent huge pages not offered here (%q)", strings.TrimSpace(string(mode)))
	}
	for _, huge := range []bool{true, false} {
		b, err := Map(16<<20, huge)
		if err != nil {
			t.Fatal(err)
		}
		for i := 0; i < len(b); i += 4096 {
			b[i] = 1
		}
		flags := vmFlags(t, uintptr(unsafe.Pointer(&b[0])))
		if advised := strings.Contains(" "+flags+" ", " hg "); advised != huge {
			t.Errorf("Map(huge=%v): VmFlags %q, MADV_HUGEPAGE advised %v", huge, flags, advised)
		}
		if huge {
			t.Logf("AnonHugePages of this process: %d kB", anonHugeKB(t))
		}
		if err := Unmap(b); err != nil {
			t.Fatal(err)
		}
	}
}

// vmFlags returns the VmFlags of the mapping that holds addr (the kernel
// may merge a plain mapping with its neighbours).
func vmFlags(t *testing.T, addr uintptr) string {
	t.Helper()
	s, err := os.ReadFile("/proc/self/smaps")
	if err != nil {
		t.Fatalf("smaps: %v", err)
	}
	in := false
	for _, line := range strings.Split(string(s), "\n") {
		if f := strings.Fields(line); len(f) > 0 && strings.Contains(f[0], "-") && !strings.HasSuffix(f[0], ":") {
			lo, hi, _ := strings.Cut(f[0], "-")
			start, err1 := strconv.ParseUint(lo, 16, 64)
			end, err2 := strconv.ParseUint(hi, 16, 64)
			in = err1 == nil && err2 == nil && uint64(addr) >= start && uint64(addr) < end
			continue
		}
		if rest, ok := strings.CutPrefix(line, "VmFlags:"); ok && in {
			return strings.TrimSpace(rest)
		}
	}
	t.Fatalf("no mapping at %#x in /proc/self/smaps", addr)
	return ""
}

func anonHugeKB(t *testing.T) int64 {
	s, err := os.ReadFile("/proc/self/smaps_rollup")
	if err != nil {
		t.Fatalf("smaps_rollup: %v", err)
	}
	for _, line := range strings.Split(string(s), "\n") {
		if f := strings.Fields(line); len(f) >= 2 && f[0] == "AnonHugePages:" {
			v, _ := strconv.ParseInt(f[1], 10, 64)
			return v
		}
	}
	return 0
}
