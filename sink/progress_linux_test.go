package sink

import (
	"fmt"
	"os"
	"testing"

	"golang.org/x/sys/unix"
)

// openPTY opens a pseudo-terminal pair, or skips when the system has none.
func openPTY(t *testing.T) (master, slave *os.File) {
	t.Helper()
	m, err := os.OpenFile("/dev/ptmx", os.O_RDWR|unix.O_NOCTTY, 0)
	if err != nil {
		t.Skipf("no pseudo-terminal: %v", err)
	}
	fd := int(m.Fd())
	if err := unix.IoctlSetPointerInt(fd, unix.TIOCSPTLCK, 0); err != nil {
		m.Close()
		t.Skipf("unlockpt: %v", err)
	}
	n, err := unix.IoctlGetInt(fd, unix.TIOCGPTN)
	if err != nil {
		m.Close()
		t.Skipf("ptsname: %v", err)
	}
	s, err := os.OpenFile(fmt.Sprintf("/dev/pts/%d", n), os.O_RDWR|unix.O_NOCTTY, 0)
	if err != nil {
		m.Close()
		t.Skipf("open slave: %v", err)
	}
	t.Cleanup(func() { s.Close(); m.Close() })
	return m, s
}

// TestProgressOnTerminal: NewProgress draws on a terminal (and only there).
func TestProgressOnTerminal(t *testing.T) {
	master, slave := openPTY(t)
	p := NewProgress(slave)
	if p == nil {
		t.Fatal("NewProgress(terminal) = nil")
	}
	p.Update(tok(1, 2), []TokenMetrics{tok(1, 2)})
	p.Done()
	buf := make([]byte, 256)
	n, err := master.Read(buf)
	if err != nil {
		t.Fatal(err)
	}
	if got := string(buf[:n]); len(got) < 10 || got[0] != '\r' || got[1:10] != "token 1/2" {
		t.Errorf("terminal got %q", got)
	}
	f, err := os.CreateTemp(t.TempDir(), "stderr")
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	if NewProgress(f) != nil {
		t.Error("NewProgress(regular file) must be nil")
	}
}
