package safefile

import (
	"errors"
	"os"
	"path/filepath"
	"syscall"
	"testing"
	"time"
)

func mkfifo(t *testing.T) string {
	t.Helper()
	p := filepath.Join(t.TempDir(), "fifo")
	if err := syscall.Mkfifo(p, 0o600); err != nil {
		t.Fatalf("mkfifo: %v", err)
	}
	return p
}

// within fails the test when f does not return within d (a blocked open;
// d is a hang guard, a minute: a refused FIFO returns at once).
func within(t *testing.T, d time.Duration, f func()) {
	t.Helper()
	done := make(chan struct{})
	go func() { f(); close(done) }()
	select {
	case <-done:
	case <-time.After(d):
		t.Fatalf("blocked for more than %v", d)
	}
}

func TestOpenInputRefusesFIFOWithoutBlocking(t *testing.T) {
	p := mkfifo(t)
	var err error
	within(t, time.Minute, func() { _, err = OpenInput(p) })
	if !errors.Is(err, ErrNotRegular) {
		t.Fatalf("err = %v, want ErrNotRegular", err)
	}
	if _, err := OpenInput(t.TempDir()); !errors.Is(err, ErrNotRegular) {
		t.Fatalf("directory: err = %v, want ErrNotRegular", err)
	}
	if _, err := ReadFile("/dev/zero"); !errors.Is(err, ErrNotRegular) {
		t.Fatalf("/dev/zero: err = %v, want ErrNotRegular", err)
	}
}

func TestOpenInputReadsRegular(t *testing.T) {
	p := filepath.Join(t.TempDir(), "in")
	if err := os.WriteFile(p, []byte("abc"), 0o644); err != nil {
		t.Fatal(err)
	}
	b, err := ReadFile(p)
	if err != nil || string(b) != "abc" {
		t.Fatalf("ReadFile = %q, %v", b, err)
	}
}

func TestCreateRefusesInputsKeepsThemIntact(t *testing.T) {
	dir := t.TempDir()
	model := filepath.Join(dir, "model.gguf")
	if err := os.WriteFile(model, []byte("precious"), 0o644); err != nil {
		t.Fatal(err)
	}
	link := filepath.Join(dir, "link.gguf")
	if err := os.Link(model, link); err != nil {
		t.Fatal(err)
	}
	sym := filepath.Join(dir, "sym.gguf")
	if err := os.Symlink(model, sym); err != nil {
		t.Fatal(err)
	}
	var g Guard
	g.Protect("-m", model)
	for _, p := range []string{model, link, sym, filepath.Join(dir, ".", "model.gguf")} {
		if _, err := g.Create("--csv", p); !errors.Is(err, ErrSameFile) {
			t.Fatalf("Create(%s) err = %v, want ErrSameFile", p, err)
		}
	}
	if b, _ := os.ReadFile(model); string(b) != "precious" {
		t.Fatalf("model changed: %q", b)
	}
	// Outputs are protected from later outputs; /dev/null may repeat.
	out := filepath.Join(dir, "out.csv")
	if err := os.WriteFile(out, []byte("old contents"), 0o644); err != nil {
		t.Fatal(err)
	}
	f, err := g.Create("--csv", out)
	if err != nil {
		t.Fatal(err)
	}
	f.Close()
	if st, _ := os.Stat(out); st.Size() != 0 {
		t.Fatalf("output not truncated: %d bytes", st.Size())
	}
	if _, err := g.Create("--logits-out", out); !errors.Is(err, ErrSameFile) {
		t.Fatalf("second output on the same file: err = %v", err)
	}
	for i := 0; i < 2; i++ {
		f, err := g.Create("--logits-out", os.DevNull)
		if err != nil {
			t.Fatalf("%s: %v", os.DevNull, err)
		}
		f.Close()
	}
}

func TestCreateFIFO(t *testing.T) {
	p := mkfifo(t)
	var g Guard
	var err error
	within(t, time.Minute, func() { _, err = g.Create("--csv", p) })
	if !errors.Is(err, ErrNoReader) {
		t.Fatalf("FIFO without reader: err = %v, want ErrNoReader", err)
	}
	r, err := os.OpenFile(p, os.O_RDONLY|syscall.O_NONBLOCK, 0)
	if err != nil {
		t.Fatal(err)
	}
	defer r.Close()
	w, err := g.Create("--csv", p)
	if err != nil {
		t.Fatalf("FIFO with a reader: %v", err)
	}
	if _, err := w.Write([]byte("x")); err != nil {
		t.Fatal(err)
	}
	w.Close()
}

func TestCheckReplace(t *testing.T) {
	dir := t.TempDir()
	var g Guard
	vocab := filepath.Join(dir, "vocab.gguf")
	if err := os.WriteFile(vocab, []byte("v"), 0o644); err != nil {
		t.Fatal(err)
	}
	g.Protect("--vocab", vocab)
	if err := g.CheckReplace(filepath.Join(dir, "new.gguf")); err != nil {
		t.Fatalf("new file: %v", err)
	}
	if err := g.CheckReplace(vocab); !errors.Is(err, ErrSameFile) {
		t.Fatalf("input: err = %v", err)
	}
	for _, p := range []string{os.DevNull, dir, mkfifo(t)} {
		if err := g.CheckReplace(p); !errors.Is(err, ErrNotRegular) {
			t.Fatalf("%s: err = %v, want ErrNotRegular", p, err)
		}
	}
}
