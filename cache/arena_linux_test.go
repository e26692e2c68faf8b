//go:build linux

package cache

import (
	"testing"
	"time"

	"github.com/pipe-engine/pipe/internal/anon"
	"golang.org/x/sys/unix"
)

// TestWarmSlotsPrefaulterGaveUp: when the Prefaulter gave up (a kernel
// without MADV_POPULATE_WRITE), no free slot is told fresh: a miss takes a
// free slot before it evicts, as without PrefaultAll.
func TestWarmSlotsPrefaulterGaveUp(t *testing.T) {
	c, _ := newCache(t, 5, 1)
	c.PrefaultAll()
	ro, err := unix.Mmap(-1, 0, 1<<20, unix.PROT_READ, unix.MAP_PRIVATE|unix.MAP_ANON)
	if err != nil {
		t.Fatal(err)
	}
	defer unix.Munmap(ro)
	if unix.Madvise(ro, unix.MADV_POPULATE_WRITE) == nil {
		t.Skip("madvise(MADV_POPULATE_WRITE) of a read-only mapping is accepted here, not refused (qemu-user applies no advice)")
	}
	c.mu.Lock()
	c.res.pf.Close()
	c.res.pf = anon.NewPrefaulter(ro, 0) // refused: it gives up, Faulted stays 0
	c.res.pf.Use(int64(len(ro)))
	pf := c.res.pf
	c.mu.Unlock()
	select {
	case <-pf.GivenUp():
	case <-time.After(time.Minute): // hang guard
		t.Fatal("the Prefaulter over a read-only mapping has not given up")
	}
	c.Batch(0, 0)
	use(t, c, Key{0, 1})
	c.Batch(0, 1)
	use(t, c, Key{1, 1}) // slot 1: never faulted, but the Prefaulter will not reach it
	if ev := c.Stats().Evictions; ev != 0 {
		t.Errorf("%d evictions with free slots and a Prefaulter that gave up, want 0", ev)
	}
}
