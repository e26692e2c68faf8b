package affinity

import (
	"errors"
	"os"
	"runtime"
	"slices"
	"strconv"
	"testing"
)

func TestParseList(t *testing.T) {
	for _, c := range []struct {
		in   string
		want []int
	}{
		{"", nil}, {"3", []int{3}}, {"4-7", []int{4, 5, 6, 7}}, {"6,0,2-3,2", []int{0, 2, 3, 6}}, {" 1 , 2", []int{1, 2}},
	} {
		got, err := ParseList(c.in)
		if err != nil || !slices.Equal(got, c.want) {
			t.Errorf("ParseList(%q) = %v, %v; want %v", c.in, got, err, c.want)
		}
	}
	for _, bad := range []string{"a", "1-", "-1", "3-1", "1,,2", "1024", "0-99999"} {
		if _, err := ParseList(bad); !errors.Is(err, ErrList) {
			t.Errorf("ParseList(%q): error %v, want ErrList", bad, err)
		}
	}
}

// TestPin pins the test process to one CPU it may use, checks every thread
// (and a thread started afterwards) and GOMAXPROCS, and restores the mask.
func TestPin(t *testing.T) {
	orig, err := Current()
	if runtime.GOOS != "linux" && runtime.GOOS != "android" {
		if !errors.Is(err, ErrUnsupported) || !errors.Is(Pin([]int{0}), ErrUnsupported) {
			t.Fatalf("want ErrUnsupported on %s", runtime.GOOS)
		}
		return
	}
	if err != nil || len(orig) == 0 {
		t.Fatalf("Current: %v, %v", orig, err)
	}
	procs := runtime.GOMAXPROCS(0)
	defer func() {
		if err := Pin(orig); err != nil {
			t.Errorf("restoring %v: %v", orig, err)
		}
		runtime.GOMAXPROCS(procs)
	}()
	one := []int{orig[len(orig)-1]}
	if err := Pin(one); err != nil {
		t.Fatal(err)
	}
	if n := runtime.GOMAXPROCS(0); n != 1 {
		t.Errorf("GOMAXPROCS %d after pinning to one CPU", n)
	}
	done := make(chan []int)
	go func() { // on a fresh OS thread
		runtime.LockOSThread()
		c, _ := Current()
		done <- c
	}()
	if c := <-done; !slices.Equal(c, one) {
		t.Errorf("new thread may run on %v, want %v", c, one)
	}
	ents, err := os.ReadDir("/proc/self/task")
	if err != nil {
		t.Fatal(err)
	}
	for _, e := range ents {
		tid, _ := strconv.Atoi(e.Name())
		if got, ok := threadCPUs(t, tid); ok && !slices.Equal(got, one) {
			t.Errorf("thread %d may run on %v, want %v", tid, got, one)
		}
	}
	if err := Pin([]int{maxCPU - 1}); err == nil {
		t.Errorf("pinning to CPU %d (absent) succeeded", maxCPU-1)
	}
	if err := Pin(nil); !errors.Is(err, ErrList) {
		t.Errorf("Pin(nil): %v, want ErrList", err)
	}
}
