package anon

import (
	"errors"
	"os"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"
	"unsafe"

	"golang.org/x/sys/unix"
)

// resident reports, per page of b, whether it is in memory (mincore).
func resident(t *testing.T, b []byte) []bool {
	t.Helper()
	vec := make([]byte, (len(b)+PageSize-1)/PageSize)
	_, _, errno := unix.Syscall(unix.SYS_MINCORE, uintptr(unsafe.Pointer(&b[0])), uintptr(len(b)), uintptr(unsafe.Pointer(&vec[0])))
	if errno != 0 {
		t.Fatalf("mincore: %v", errno)
	}
	r := make([]bool, len(vec))
	for i, v := range vec {
		r[i] = v&1 != 0
	}
	return r
}

// waitFaulted polls until p has faulted n bytes in (the Prefaulter has no
// event to wait on); the minute is a hang guard.
func waitFaulted(t *testing.T, p *Prefaulter, n int64) {
	t.Helper()
	deadline := time.Now().Add(time.Minute)
	for p.Faulted() < n {
		if time.Now().After(deadline) {
			t.Fatalf("faulted %d bytes after a minute, want %d", p.Faulted(), n)
		}
		time.Sleep(time.Millisecond)
	}
}

// TestPrefaulter checks that a Prefaulter makes exactly the pages up to the
// highest Use plus its lead resident, never past the mapping, and leaves
// their contents alone.
func TestPrefaulter(t *testing.T) {
	const size, ahead = 72 << 20, 8 << 20
	mem, err := Map(size, false)
	if err != nil {
		t.Fatal(err)
	}
	defer Unmap(mem)
	probe := mem[size-PageSize:]
	if err := populate(probe); errors.Is(err, unix.EINVAL) {
		t.Skip("this kernel has no MADV_POPULATE_WRITE (Linux < 5.14)")
	}
	if !resident(t, probe)[0] {
		t.Skip("madvise is accepted but not applied here (qemu-user)")
	}
	unix.Madvise(probe, unix.MADV_DONTNEED)
	mem[PageSize+7] = 42 // written before it is populated: must survive
	p := NewPrefaulter(mem, ahead)
	closeP := sync.OnceFunc(p.Close)
	defer closeP()
	if r := resident(t, mem); r[10] || r[len(r)-1] {
		t.Fatal("pages resident before any Use")
	}
	p.Use(4 << 20)
	waitFaulted(t, p, 12<<20)
	// Faulted only reaches what Use asked for (one step covers 12 MiB, and
	// the goroutine stores its progress after each step): an overshoot would
	// show here, and the page at 40 MiB must not be resident below.
	if got := p.Faulted(); got != 12<<20 {
		t.Fatalf("faulted %d bytes after Use(4 MiB) with 8 MiB ahead, want %d", got, 12<<20)
	}
	r := resident(t, mem)
	for i := range 12 << 20 / PageSize {
		if !r[i] {
			t.Fatalf("page %d not resident", i)
		}
	}
	if r[(40<<20)/PageSize] {
		t.Fatal("a page far past the lead is resident")
	}
	if mem[PageSize+7] != 42 {
		t.Fatal("populating changed a page's contents")
	}
	p.Use(3 << 20) // lower than before: no effect
	p.Use(70 << 20)
	waitFaulted(t, p, size)
	if r := resident(t, mem); !r[len(r)-1] {
		t.Fatal("the last page is not resident")
	}
	closeP() // the goroutine is gone: Faulted is final
	if got := p.Faulted(); got != size {
		t.Fatalf("faulted %d bytes of a %d-byte mapping", got, size)
	}
}

// TestPrefaulterClose checks that Close returns while the goroutine has
// work left and that Use after the work is done never blocks.
func TestPrefaulterClose(t *testing.T) {
	mem, err := Map(256<<20, false)
	if err != nil {
		t.Fatal(err)
	}
	defer Unmap(mem)
	p := NewPrefaulter(mem, 1<<30)
	for range 100 {
		p.Use(PageSize)
	}
	p.Close()
	if f := p.Faulted(); f%PageSize != 0 || f > 256<<20 {
		t.Fatalf("faulted %d bytes", f)
	}
}

// readOnly maps n bytes that MADV_POPULATE_WRITE must refuse.
func readOnly(t *testing.T, n int) []byte {
	t.Helper()
	b, err := unix.Mmap(-1, 0, n, unix.PROT_READ, unix.MAP_PRIVATE|unix.MAP_ANON)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { unix.Munmap(b) })
	return b
}

// waitGaveUp waits for p's GivenUp channel; the minute is a hang guard.
func waitGaveUp(t *testing.T, p *Prefaulter) {
	t.Helper()
	select {
	case <-p.GivenUp():
	case <-time.After(time.Minute):
		t.Fatal("the Prefaulter has not given up after a minute")
	}
	if !p.GaveUp() {
		t.Fatal("GivenUp is closed but GaveUp reports false")
	}
}

// TestPrefaulterGivesUp: a mapping the kernel refuses to populate for
// writing stops the Prefaulter for good, GaveUp says so and Faulted stays
// where it was; a Prefaulter at work has not given up.
func TestPrefaulterGivesUp(t *testing.T) {
	const size = 4 << 20
	mem, err := Map(size, false)
	if err != nil {
		t.Fatal(err)
	}
	defer Unmap(mem)
	if err := populate(mem[:PageSize]); err != nil {
		t.Skipf("this kernel has no MADV_POPULATE_WRITE: %v", err)
	}
	ok := NewPrefaulter(mem, 0)
	ok.Use(size)
	waitFaulted(t, ok, size)
	if ok.GaveUp() {
		t.Error("a Prefaulter that faulted its mapping in reports it gave up")
	}
	select {
	case <-ok.GivenUp():
		t.Error("a Prefaulter that faulted its mapping in closed GivenUp")
	default:
	}
	ok.Close()

	ro := readOnly(t, size)
	if populate(ro[:PageSize]) == nil {
		t.Skip("madvise(MADV_POPULATE_WRITE) of a read-only mapping is accepted here, not refused (qemu-user applies no advice)")
	}
	p := NewPrefaulter(ro, 0)
	defer p.Close()
	p.Use(size)
	waitGaveUp(t, p)
	if f := p.Faulted(); f != 0 {
		t.Errorf("faulted %d bytes of a read-only mapping", f)
	}
}

// TestPopulate: Populate of a slice inside a fresh mapping, not page
// aligned at either end, has exactly the whole pages inside it in memory
// (not the partial pages at its ends), their contents unchanged; a slice
// holding no whole page is a no-op.
func TestPopulate(t *testing.T) {
	b, err := Map(8*PageSize, false)
	if err != nil {
		t.Fatal(err)
	}
	defer Unmap(b)
	probe, err := Map(PageSize, false)
	if err != nil {
		t.Fatal(err)
	}
	defer Unmap(probe)
	if err := unix.Madvise(probe, unix.MADV_POPULATE_WRITE); err != nil {
		t.Skipf("this kernel has no MADV_POPULATE_WRITE: %v", err)
	}
	if !resident(t, probe)[0] {
		t.Skip("madvise is accepted but not applied here (qemu-user)")
	}
	if err := Populate(b[:0]); err != nil {
		t.Fatalf("Populate of nothing: %v", err)
	}
	words := unsafe.Slice((*uint32)(unsafe.Pointer(&b[0])), len(b)/4)
	if err := Populate(words[PageSize/4+5 : 2*PageSize/4+7]); err != nil { // no whole page
		t.Fatal(err)
	}
	// the end of page 1, pages 2 to 4, the start of page 5
	if err := Populate(words[2*PageSize/4-3 : 5*PageSize/4+1]); err != nil {
		t.Fatal(err)
	}
	for i, in := range resident(t, b) {
		if want := i >= 2 && i <= 4; in != want {
			t.Errorf("page %d resident %v, want %v", i, in, want)
		}
	}
	for i, v := range b {
		if v != 0 {
			t.Fatalf("byte %d is %d after Populate, want 0", i, v)
		}
	}
}

// TestPrefaulterProgress: Progress's channel closes when Faulted grows and
// is closed from the start once the whole mapping is faulted in or the
// Prefaulter is closed, so a waiter never hangs.
func TestPrefaulterProgress(t *testing.T) {
	mem, err := Map(4*PrefaultStep, false)
	if err != nil {
		t.Fatal(err)
	}
	defer Unmap(mem)
	p := NewPrefaulter(mem, 0)
	ch := p.Progress()
	select {
	case <-ch:
		t.Fatal("Progress closed before any Use")
	default:
	}
	p.Use(PrefaultStep)
	select {
	case <-ch:
	case <-time.After(time.Minute): // hang guard
		t.Fatal("Progress not closed after the Prefaulter advanced")
	}
	if p.GaveUp() {
		t.Skip("this kernel has no MADV_POPULATE_WRITE: the Prefaulter gave up")
	}
	if f := p.Faulted(); f < PrefaultStep {
		t.Fatalf("Faulted %d after Progress, want ≥ %d", f, PrefaultStep)
	}
	p.Close()
	select {
	case <-p.Progress():
	default:
		t.Error("Progress of a closed Prefaulter is open: a waiter would hang")
	}
}

// TestPrefaulterYieldsCPU: the Prefaulter's thread runs in SCHED_IDLE at
// nice 19, so its faulting takes the CPUs only when compute leaves them.
func TestPrefaulterYieldsCPU(t *testing.T) {
	mem, err := Map(PrefaultStep, false)
	if err != nil {
		t.Fatal(err)
	}
	defer Unmap(mem)
	// idle counts the threads at nice 19 in the SCHED_IDLE class.
	idle := func() int {
		n := 0
		tasks, _ := os.ReadDir("/proc/self/task")
		for _, task := range tasks {
			b, err := os.ReadFile("/proc/self/task/" + task.Name() + "/stat")
			if err != nil {
				continue
			}
			// pid (comm) state ...: after ") " field k of proc(5) is
			// f[k-3]: nice (19) is f[16], policy (41) f[38].
			s := string(b)
			f := strings.Fields(s[strings.LastIndexByte(s, ')')+2:])
			if len(f) > 38 && f[16] == "19" && f[38] == strconv.Itoa(unix.SCHED_IDLE) {
				n++
			}
		}
		return n
	}
	p := NewPrefaulter(mem, 0)
	defer p.Close()
	progress := p.Progress() // taken before Use: the one advance cannot be missed
	p.Use(PageSize)
	select {
	case <-progress: // the goroutine has run, so it has set its priority
	case <-time.After(time.Minute): // hang guard
		t.Fatal("the Prefaulter never advanced")
	}
	if p.GaveUp() {
		t.Skip("this kernel has no MADV_POPULATE_WRITE: the Prefaulter gave up")
	}
	if idle() == 0 {
		t.Error("no thread at nice 19 in SCHED_IDLE: the Prefaulter's faulting competes with compute")
	}
}
