package sink

import (
	"bytes"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/rs/zerolog"
)

// blockedPipe returns a pipe whose write end is full: every further write
// blocks until someone reads r.
func blockedPipe(t *testing.T) (r, w *os.File) {
	t.Helper()
	r, w, err := os.Pipe()
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { r.Close(); w.Close() })
	chunk := make([]byte, 4096)
	if err := w.SetWriteDeadline(time.Now().Add(200 * time.Millisecond)); err != nil {
		t.Skipf("pipes without deadlines here: %v", err)
	}
	for {
		if _, err := w.Write(chunk); err != nil {
			break
		}
	}
	if err := w.SetWriteDeadline(time.Time{}); err != nil {
		t.Fatal(err)
	}
	return r, w
}

// TestBlockedStderr: with stderr a pipe nobody reads, the sink still writes
// every CSV row and Token does not stall; the log lines wait in the log
// stage and all arrive once stderr is read.
func TestBlockedStderr(t *testing.T) {
	r, w := blockedPipe(t)
	logs := NewAsyncWriter(w, 64)
	path := filepath.Join(t.TempDir(), "run.csv")
	s, err := New(Options{CSV: path, Log: zerolog.New(logs).Level(zerolog.InfoLevel), Warmup: -1})
	if err != nil {
		t.Fatal(err)
	}
	const n = 3 * RowBuffer
	done := make(chan error, 1)
	go func() {
		s.Load(LoadInfo{Seconds: 1, Threads: 2})
		s.Prefill(10, time.Second)
		for i := 1; i <= n; i++ {
			if err := s.Token(tok(i, n)); err != nil {
				done <- err
				return
			}
		}
		done <- s.Flush()
	}()
	select {
	case err := <-done:
		if err != nil {
			t.Fatal(err)
		}
	case <-time.After(time.Minute):
		t.Fatal("decode stalled behind a blocked stderr")
	}
	if got := readLines(t, path); len(got) != 1+n {
		t.Fatalf("CSV holds %d lines with stderr blocked, want %d", len(got), 1+n)
	}
	var out bytes.Buffer
	var rd sync.WaitGroup
	rd.Go(func() { _, _ = io.Copy(&out, r) })
	if err := s.Close(); err != nil {
		t.Fatal(err)
	}
	if err := logs.Close(); err != nil {
		t.Fatal(err)
	}
	w.Close()
	rd.Wait()
	var events []string // after the zeros that filled the pipe
	for _, l := range strings.Split(strings.TrimLeft(out.String(), "\x00"), "\n") {
		if strings.HasPrefix(l, "{") {
			events = append(events, l)
		}
	}
	if len(events) != 3 || !strings.Contains(events[0], `"event":"load"`) || !strings.Contains(events[2], `"event":"summary"`) {
		t.Fatalf("log lines after stderr was read: %q", events)
	}
	if got := readLines(t, path); !strings.HasPrefix(got[len(got)-1], fmt.Sprintf("# summary tokens=%d ", n)) {
		t.Fatalf("CSV trailer: %q", got[len(got)-1])
	}
}

// gateWriter blocks every write until open is closed, counting them.
type gateWriter struct {
	open   chan struct{}
	writes atomic.Int64
	buf    bytes.Buffer
	mu     sync.Mutex
}

func (g *gateWriter) Write(p []byte) (int, error) {
	<-g.open
	g.writes.Add(1)
	g.mu.Lock()
	defer g.mu.Unlock()
	return g.buf.Write(p)
}

// TestSlowDiskBackpressure: rows wait in the bounded channel while the disk
// is stuck (Token returns at once), a full channel blocks Token instead of
// dropping a row, and every row is written once the disk moves.
func TestSlowDiskBackpressure(t *testing.T) {
	g := &gateWriter{open: make(chan struct{})}
	header := make(chan struct{})
	close(header)
	g.open = header // the header is written by New
	s, err := New(Options{CSVWriter: g, Warmup: -1})
	if err != nil {
		t.Fatal(err)
	}
	g.open = make(chan struct{})
	var returned atomic.Int64
	const n = RowBuffer + 10
	finished := make(chan struct{})
	filled := make(chan struct{}) // closed when RowBuffer Tokens have returned
	go func() {
		defer close(finished)
		for i := 1; i <= n; i++ {
			if err := s.Token(tok(i, n)); err != nil {
				t.Error(err)
				return
			}
			if returned.Add(1) == RowBuffer {
				close(filled)
			}
		}
	}()
	// one row is in the stuck Write, RowBuffer wait in the channel, the
	// next Token blocks: wait for the buffer to fill (a minute's hang
	// guard), then no more may have returned
	select {
	case <-filled:
	case <-finished:
		t.Fatalf("the Tokens ended after %d returned, before the buffer filled", returned.Load())
	case <-time.After(time.Minute):
		t.Fatalf("%d Tokens returned after a minute, want %d", returned.Load(), RowBuffer)
	}
	if got := returned.Load(); got > RowBuffer+1 {
		t.Fatalf("%d Tokens returned while the disk was stuck, want %d or %d", got, RowBuffer, RowBuffer+1)
	}
	close(g.open)
	<-finished
	if err := s.Close(); err != nil {
		t.Fatal(err)
	}
	lines := strings.Split(strings.TrimSuffix(g.buf.String(), "\n"), "\n")
	if len(lines) != n+2 || !strings.HasPrefix(lines[n], fmt.Sprint(n)+",") {
		t.Fatalf("%d lines written (want header + %d rows + trailer); row %d: %q", len(lines), n, n, lines[min(n, len(lines)-1)])
	}
}

// gatedWriter writes into buf only while open is closed.
type gatedWriter struct {
	open chan struct{}
	mu   sync.Mutex
	buf  bytes.Buffer
}

func (g *gatedWriter) Write(p []byte) (int, error) {
	<-g.open
	g.mu.Lock()
	defer g.mu.Unlock()
	return g.buf.Write(p)
}

func (g *gatedWriter) String() string {
	g.mu.Lock()
	defer g.mu.Unlock()
	return g.buf.String()
}

// TestAsyncWriterSync: Sync returns only once every line queued before it is
// written, and at once after Close. The writer is held shut until Sync has
// been called, so a Sync that returned early would see fewer lines.
func TestAsyncWriterSync(t *testing.T) {
	g := &gatedWriter{open: make(chan struct{})}
	a := NewAsyncWriter(g, 8)
	for _, l := range []string{"a\n", "b\n", "c\n"} {
		if _, err := a.Write([]byte(l)); err != nil {
			t.Fatal(err)
		}
	}
	calling := make(chan struct{})
	seen := make(chan string, 1) // what was written when Sync returned
	go func() {
		close(calling)
		a.Sync()
		seen <- g.String()
	}()
	<-calling
	close(g.open)
	select {
	case got := <-seen:
		if got != "a\nb\nc\n" {
			t.Fatalf("written when Sync returned: %q", got)
		}
	case <-time.After(time.Minute): // hang guard
		t.Fatal("Sync never returned after the writer was opened")
	}
	if err := a.Close(); err != nil {
		t.Fatal(err)
	}
	a.Sync() // after Close: returns at once (a hang here fails the test by its timeout)
}
