package status

import (
	"bytes"
	"os"
	"testing"
	"time"
)

func TestLine(t *testing.T) {
	var buf bytes.Buffer
	l := NewTo(&buf, 0)
	l.Set("loading 10%")
	l.Set("load 20%") // shorter: padded over the longer one
	if got, want := buf.String(), "\rloading 10%\rload 20%   "; got != want {
		t.Fatalf("Set: %q, want %q", got, want)
	}
	buf.Reset()
	log := l.Writer(&buf)
	log.Write([]byte("a log line\n"))
	if got, want := buf.String(), "\r        \ra log line\n\rload 20%"; got != want {
		t.Fatalf("a log line erases and redraws: %q, want %q", got, want)
	}
	buf.Reset()
	l.Clear()
	if got, want := buf.String(), "\r        \r"; got != want {
		t.Fatalf("Clear: %q, want %q", got, want)
	}
	buf.Reset()
	l.Clear() // nothing shown: nothing written
	log.Write([]byte("after\n"))
	if got := buf.String(); got != "after\n" {
		t.Fatalf("with nothing shown a log line passes as it is: %q", got)
	}
	buf.Reset()
	l.Set("done")
	l.Done()
	l.Done()
	if got := buf.String(); got != "\rdone\n" {
		t.Fatalf("Done keeps the line: %q", got)
	}
}

func TestUpdateThrottles(t *testing.T) {
	var buf bytes.Buffer
	l := NewTo(&buf, 0)
	clock := time.Unix(1000, 0)
	l.now = func() time.Time { return clock } // the test moves the clock itself
	calls := 0
	text := func() string { calls++; return "x" }
	l.Update(text)
	clock = clock.Add(Interval - 1)
	l.Update(text)
	if calls != 1 {
		t.Fatalf("two updates within %v built the text %d times, want 1", Interval, calls)
	}
	clock = clock.Add(1)
	l.Update(text)
	if calls != 2 {
		t.Fatalf("an update after %v built the text %d times in all, want 2", Interval, calls)
	}
	l.Clear()
	l.Update(text) // Clear resets the clock: the next update shows at once
	if calls != 3 {
		t.Fatalf("an update after Clear was not drawn (%d calls)", calls)
	}
}

func TestFitAndBar(t *testing.T) {
	var buf bytes.Buffer
	l := NewTo(&buf, 10)
	l.Set("0123456789abc")
	if got := buf.String(); got != "\r012345678" {
		t.Errorf("a line wider than the terminal: %q", got)
	}
	if got := Bar(0.5, 4); got != "██░░" {
		t.Errorf("Bar(0.5, 4) = %q", got)
	}
	if got := Bar(2, 3) + Bar(-1, 2); got != "███░░" {
		t.Errorf("Bar clamps: %q", got)
	}
}

func TestNil(t *testing.T) {
	var l *Line
	l.Set("x")
	l.Update(func() string { t.Fatal("text built for a nil line"); return "" })
	l.Clear()
	l.Done()
	var buf bytes.Buffer
	if w := l.Writer(&buf); w != &buf {
		t.Error("a nil line's Writer must be the writer itself")
	}
	if New(&buf) != nil {
		t.Error("New(not a file) must be nil")
	}
	f, err := os.CreateTemp(t.TempDir(), "stderr")
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	if New(f) != nil {
		t.Error("New(regular file) must be nil")
	}
}

func TestHold(t *testing.T) {
	var buf bytes.Buffer
	l := NewTo(&buf, 0)
	log := l.Writer(&buf)
	l.Hold()
	log.Write([]byte("held 1\n"))
	log.Write([]byte("held 2\n"))
	buf.WriteString("generated text\n")
	l.Release()
	log.Write([]byte("after\n"))
	if got, want := buf.String(), "generated text\nheld 1\nheld 2\nafter\n"; got != want {
		t.Fatalf("%q, want %q", got, want)
	}
	buf.Reset()
	l.Hold()
	big := bytes.Repeat([]byte("x"), MaxHeld+1)
	log.Write(big) // beyond MaxHeld: written at once
	if buf.Len() != len(big) {
		t.Fatalf("%d bytes written, want the %d beyond MaxHeld at once", buf.Len(), len(big))
	}
	l.Release()
}
