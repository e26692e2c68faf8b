package cache

import (
	"fmt"

	"github.com/pipe-engine/pipe/internal/anon"
)

// SlotAlign is the alignment of every slot's start and size (the O_DIRECT block).
const SlotAlign = 4096

// PrefaultAhead is how far past the highest slot handed out an arena keeps its
// pages faulted in (anon.Prefaulter), so the reads that fill new slots do not
// fault their destination pages themselves.
const PrefaultAhead = 256 << 20

// arena is a run of fixed-size slots in one anonymous private mapping, outside
// the Go heap (internal/anon; huge pages when asked). Slots are handed out
// lowest first, and a Prefaulter faults the pages in up to PrefaultAhead
// bytes past the highest slot handed out so far (hwm): memory becomes
// resident shortly before a slot is first used, not at New, and is never
// handed back to the kernel until close unmaps the whole run.
//
// Once the whole arena is being faulted in (prefaultAll), a free slot is
// "warm" when its pages are present — handed out before, or reached by the
// Prefaulter (faulted) — and "fresh" otherwise; the cache takes warm slots
// before it evicts and fresh ones only when it cannot evict (getWarm). Not
// safe for concurrent use (the cache's lock guards it).
type arena struct {
	mem     []byte
	slot    int64
	n       int
	free    []int32 // stack of free slot indexes
	hwm     int     // slots [0, hwm) have been handed out at least once
	pf      *anon.Prefaulter
	all     bool         // prefaultAll was called: free slots are told warm from fresh
	faultFn func() int64 // bytes faulted in from the start (nil: pf.Faulted; tests set it)
	// progressFn is faulting's channel when tests set faultFn (nil there:
	// a warm read never waits).
	progressFn func() <-chan struct{}
}

func newArena(slot int64, n int, huge bool) (*arena, error) {
	a := &arena{slot: slot, n: n}
	if n == 0 {
		return a, nil
	}
	size := slot * int64(n)
	mem, err := anon.Map(size, huge)
	if err != nil {
		return nil, fmt.Errorf("cache: mmap slot arena of %d slots x %d bytes: %w", n, slot, err)
	}
	a.mem = mem
	a.pf = anon.NewPrefaulter(mem, PrefaultAhead)
	a.free = make([]int32, n)
	// Hand out low slots first so a cache that never fills touches less memory.
	for i := range n {
		a.free[i] = int32(n - 1 - i)
	}
	return a, nil
}

func (a *arena) get() (int32, bool) {
	if len(a.free) == 0 {
		return -1, false
	}
	i := a.free[len(a.free)-1]
	a.free = a.free[:len(a.free)-1]
	if int(i) >= a.hwm {
		a.hwm = int(i) + 1
		a.pf.Use(int64(a.hwm) * a.slot)
	}
	return i, true
}

// getWarm is get for a slot whose pages are present: before prefaultAll
// every free slot counts as warm; after it, only the next free slot if it
// was handed out before or the Prefaulter has reached its end. An O_DIRECT
// read into a fresh slot faults its pages in inside the read, which on a
// virtual machine handing memory back to its host ran a cold prompt pass's
// reads at a quarter of the disk's rate until the cache filled
// (docs/measurements.md, issue 37); a read into a warm slot runs at the
// disk's rate while the Prefaulter adds memory beside it.
func (a *arena) getWarm() (int32, bool) {
	if len(a.free) == 0 {
		return -1, false
	}
	if a.fresh(a.free[len(a.free)-1]) {
		return -1, false
	}
	return a.get()
}

// fresh reports whether free slot i is told apart as fresh: after
// prefaultAll, never handed out and not yet reached by a Prefaulter that is
// still at work (one that gave up — a kernel without MADV_POPULATE_WRITE —
// will never reach it, and every slot is then as good as another).
func (a *arena) fresh(i int32) bool {
	if !a.all || int(i) < a.hwm {
		return false
	}
	if a.faultFn == nil && (a.pf == nil || a.pf.GaveUp()) {
		return false
	}
	return (int64(i)+1)*a.slot > a.faulted()
}

// waitsForFault reports whether every free slot is fresh while a Prefaulter
// is at work on them: a read that must not fault its own pages (a warm
// start's) waits for progress (faulting) instead.
func (a *arena) waitsForFault() bool {
	if len(a.free) == 0 || !a.fresh(a.free[len(a.free)-1]) {
		return false
	}
	return a.faultFn == nil || a.progressFn != nil
}

// faulting returns a channel closed when the Prefaulter next advances (or
// never will again; anon.Prefaulter.Progress).
func (a *arena) faulting() <-chan struct{} {
	switch {
	case a.progressFn != nil:
		return a.progressFn()
	case a.pf == nil:
		return closedDone
	}
	return a.pf.Progress()
}

// prefaultAll has the Prefaulter fault the whole arena in (Cache.PrefaultAll).
func (a *arena) prefaultAll() {
	if a.pf != nil {
		a.pf.Use(int64(len(a.mem)))
		a.all = true
	}
}

// faulted is how many bytes from the arena's start are faulted in.
func (a *arena) faulted() int64 {
	switch {
	case a.faultFn != nil:
		return a.faultFn()
	case a.pf == nil:
		return 0
	}
	return a.pf.Faulted()
}

func (a *arena) put(i int32) { a.free = append(a.free, i) }

// buf returns slot i's first size bytes; its capacity ends at the slot's end.
func (a *arena) buf(i int32, size int64) []byte {
	off := int64(i) * a.slot
	return a.mem[off : off+size : off+a.slot]
}

func (a *arena) close() error {
	if a.mem == nil {
		return nil
	}
	a.pf.Close()
	err := anon.Unmap(a.mem)
	a.mem = nil
	a.free = nil
	if err != nil {
		return fmt.Errorf("cache: munmap slot arena: %w", err)
	}
	return nil
}
