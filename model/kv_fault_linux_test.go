package model

import (
	"runtime"
	"runtime/debug"
	"testing"
	"unsafe"

	"github.com/pipe-engine/pipe/internal/anon"
	"golang.org/x/sys/unix"
)

// resident counts the pages of s (rounded out to whole pages) that are in
// memory, as mincore reports them.
func resident[E any](t *testing.T, s []E) (in, pages int) {
	t.Helper()
	p := unsafe.Pointer(&s[0])
	off := int(uintptr(p) % anon.PageSize)
	n := (off + len(s)*int(unsafe.Sizeof(s[0])) + anon.PageSize - 1) &^ (anon.PageSize - 1)
	vec := make([]byte, n/anon.PageSize)
	if _, _, e := unix.Syscall(unix.SYS_MINCORE, uintptr(unsafe.Add(p, -off)), uintptr(n), uintptr(unsafe.Pointer(&vec[0]))); e != 0 {
		t.Fatalf("mincore: %v", e)
	}
	for _, v := range vec {
		in += int(v & 1)
	}
	return in, len(vec)
}

// dropPages gives the kernel back the pages that lie wholly inside s
// (MADV_DONTNEED: a private anonymous mapping reads zeros afterwards, which
// a fresh State's rows are), so that a residency check afterwards sees only
// what the code under test faulted in. The Go heap may hand a new slice
// memory it had used and zeroed (its pages resident), whatever
// debug.FreeOSMemory returned before: CI run 2 of session 8 found a fresh
// state's rows all resident.
func dropPages[E any](t *testing.T, s []E) {
	t.Helper()
	base := unsafe.Pointer(&s[0])
	p := uintptr(base)
	start := (p + anon.PageSize - 1) &^ (anon.PageSize - 1)
	end := (p + uintptr(len(s))*unsafe.Sizeof(s[0])) &^ (anon.PageSize - 1)
	if end <= start {
		return
	}
	b := unsafe.Slice((*byte)(unsafe.Add(base, start-p)), end-start)
	if err := unix.Madvise(b, unix.MADV_DONTNEED); err != nil {
		t.Fatalf("madvise(MADV_DONTNEED): %v", err)
	}
}

// TestReserveFaultsRowsAhead: Reserve has the KV rows of the positions it
// hands out, up to the next FaultStep, in memory before their first Store
// (so a decode step's Store takes no page fault of its own), and not the
// rows past that. Fresh rows of every kind: F16 and F32, K and V, K-only.
func TestReserveFaultsRowsAhead(t *testing.T) {
	probe, err := anon.Map(anon.PageSize, false)
	if err != nil {
		t.Fatal(err)
	}
	defer anon.Unmap(probe)
	if err := unix.Madvise(probe, unix.MADV_POPULATE_WRITE); err != nil {
		t.Skipf("this kernel has no MADV_POPULATE_WRITE: %v", err)
	}
	if in, _ := resident(t, probe); in == 0 {
		t.Skip("madvise is accepted but not applied here (qemu-user)")
	}
	const w, nCtx = 4096, 16 * FaultStep // 8 or 16 KiB a row: every row its own pages
	// memory the Go heap freed earlier (other tests) goes back to the
	// kernel, and each state stays alive to the end, so that every state's
	// rows are fresh pages
	debug.FreeOSMemory()
	var live []*State
	defer func() { runtime.KeepAlive(live) }()
	for _, typ := range []KVType{KVF16, KVF32} {
		st, err := newState(nCtx, []int{w, w}, []int{0, 0}, []bool{false, true}, nil, typ)
		if err != nil {
			t.Fatal(err)
		}
		live = append(live, st)
		for l := range 2 {
			if typ == KVF32 {
				dropPages(t, st.k32[l])
				dropPages(t, st.v32[l])
			} else {
				dropPages(t, st.k16[l])
				dropPages(t, st.v16[l])
			}
		}
		rows := func(l, from, to int) (k, v any) {
			if typ == KVF32 {
				return st.k32[l][from*w : to*w], st.v32[l][from*w : to*w]
			}
			return st.k16[l][from*w : to*w], st.v16[l][from*w : to*w]
		}
		check := func(what string, from, to int, want bool) {
			t.Helper()
			for l := range 2 {
				k, v := rows(l, from, to)
				for name, s := range map[string]any{"K": k, "V": v} {
					var in, pages int
					switch s := s.(type) {
					case []float32:
						in, pages = resident(t, s)
					case []uint16:
						in, pages = resident(t, s)
					}
					// the rounded-out edge pages may hold neighbours' bytes
					if want && in < pages || !want && in > 2 {
						t.Errorf("%v %s: layer %d %s rows [%d, %d): %d of %d pages resident", typ, what, l, name, from, to, in, pages)
					}
				}
			}
		}
		check("fresh state", FaultStep, nCtx, false)
		if _, err := Reserve(st, 1); err != nil {
			t.Fatal(err)
		}
		check("after Reserve(1)", 0, FaultStep, true)
		check("after Reserve(1)", FaultStep+1, nCtx, false)
		st.Pos = FaultStep
		if _, err := Reserve(st, FaultStep+1); err != nil {
			t.Fatal(err)
		}
		check("after Reserve(65) at 64", 0, 3*FaultStep, true)
		check("after Reserve(65) at 64", 3*FaultStep+1, nCtx, false)
	}
}
