package clock

import (
	"strings"
	"testing"
	"time"
)

// TestNilIsWallClock: the nil Clock reads the wall clock, monotonic.
func TestNilIsWallClock(t *testing.T) {
	var c Clock
	t0 := c.Now()
	if d := c.Since(t0); d < 0 {
		t.Fatalf("Since = %v on the wall clock", d)
	}
	if !strings.Contains(t0.String(), " m=") {
		t.Fatal("the nil Clock's reading carries no monotonic clock")
	}
}

// TestFakeClock: a set Clock is the one read.
func TestFakeClock(t *testing.T) {
	now := time.Unix(100, 0)
	c := Clock(func() time.Time { return now })
	t0 := c.Now()
	now = now.Add(7 * time.Millisecond)
	if d := c.Since(t0); d != 7*time.Millisecond {
		t.Fatalf("Since = %v, want 7ms", d)
	}
}
