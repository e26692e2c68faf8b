package warmstart

import (
	"bytes"
	"errors"
	"io/fs"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/pipe-engine/pipe/internal/safefile"
)

var hotID = ModelID{Size: 18550000000, HeaderSHA: "0123456789abcdef"}

func sampleHotSet() *HotSet {
	h := NewHotSet(hotID, []int{4, 4, 3})
	h.Add(0, []int{1, 2})
	h.Add(0, []int{1, 3})
	h.Add(1, []int{0, 1})
	h.Add(2, []int{2, 2, 2, 9, -1}) // out of range ignored
	h.Pop[1][3] = 0.125
	return h
}

// TestHotSetRoundTrip: Save then Load gives the same popularity, and
// Hottest orders by popularity, then layer, then expert.
func TestHotSetRoundTrip(t *testing.T) {
	h := sampleHotSet()
	path := filepath.Join(t.TempDir(), "sub", "model.hot")
	if err := h.Save(path); err != nil {
		t.Fatal(err)
	}
	got, err := Load(path, hotID, []int{4, 4, 3})
	if err != nil {
		t.Fatal(err)
	}
	for l := range h.Pop {
		if !slices.Equal(got.Pop[l], h.Pop[l]) {
			t.Errorf("layer %d: %v, want %v", l, got.Pop[l], h.Pop[l])
		}
	}
	want := []Key{{2, 2}, {0, 1}, {0, 2}, {0, 3}, {1, 0}, {1, 1}, {1, 3}}
	if hot := got.Hottest(100); !slices.Equal(hot, want) {
		t.Errorf("Hottest = %v, want %v", hot, want)
	}
	if hot := got.Hottest(2); !slices.Equal(hot, want[:2]) {
		t.Errorf("Hottest(2) = %v", hot)
	}
	n := NewHotSet(hotID, []int{4, 4, 3})
	n.Add(1, []int{2})
	if err := n.Merge(got); err != nil || n.Pop[1][2] != 1 || n.Pop[2][2] != 1.5 || n.Pop[1][3] != 0.0625 {
		t.Errorf("Merge: %v %v", err, n.Pop)
	}
	if err := n.Merge(NewHotSet(hotID, []int{4, 4})); !errors.Is(err, ErrStale) {
		t.Errorf("Merge of another shape: %v", err)
	}
	if _, err := Load(filepath.Join(t.TempDir(), "none.hot"), hotID, []int{4, 4, 3}); !errors.Is(err, fs.ErrNotExist) {
		t.Errorf("missing file: %v", err)
	}
}

// TestHotSetStaleOrCorrupt: a hot set of another model, shape or version is
// stale; a damaged one is corrupt; neither is ever returned.
func TestHotSetStaleOrCorrupt(t *testing.T) {
	var b bytes.Buffer
	if _, err := sampleHotSet().WriteTo(&b); err != nil {
		t.Fatal(err)
	}
	good := b.String()
	resum := func(s string) string { // re-checksum an edited body so only the edit is wrong
		body := s[:strings.LastIndex(s, "end crc32=")]
		var out bytes.Buffer
		out.WriteString(body)
		out.WriteString(crcLine(body))
		return out.String()
	}
	shape := []int{4, 4, 3}
	for _, tc := range []struct {
		name  string
		text  string
		id    ModelID
		shape []int
		want  error
	}{
		{"other size", good, ModelID{Size: 1, HeaderSHA: hotID.HeaderSHA}, shape, ErrStale},
		{"other header", good, ModelID{Size: hotID.Size, HeaderSHA: "ffff"}, shape, ErrStale},
		{"other layers", good, hotID, []int{4, 4, 3, 1}, ErrStale},
		{"other experts", good, hotID, []int{4, 5, 3}, ErrStale},
		{"short layer", resum(strings.Replace(good, "L 0 4 0 2", "L 0 4 2", 1)), hotID, shape, ErrCorrupt},
		{"version 2", resum(strings.Replace(good, "pipe hot set v1", "pipe hot set v2", 1)), hotID, shape, ErrStale},
		{"truncated", good[:len(good)/2], hotID, shape, ErrCorrupt},
		{"flipped byte", strings.Replace(good, "L 0 4 0 2", "L 0 4 0 3", 1), hotID, shape, ErrCorrupt},
		{"negative", resum(strings.Replace(good, "L 0 4 0 2", "L 0 4 0 -2", 1)), hotID, shape, ErrCorrupt},
		{"nan", resum(strings.Replace(good, "L 0 4 0 2", "L 0 4 0 NaN", 1)), hotID, shape, ErrCorrupt},
		{"missing layer", resum(strings.Replace(good, "L 2 3 0 0 3\n", "", 1)), hotID, shape, ErrCorrupt},
		{"extra line", resum(strings.Replace(good, "L 2 3 0 0 3\n", "L 2 3 0 0 3\nL 3 1 1\n", 1)), hotID, shape, ErrCorrupt},
		{"garbage", "\x00\x01garbage", hotID, shape, ErrCorrupt},
		{"empty", "", hotID, shape, ErrCorrupt},
		{"bad checksum", strings.Replace(good, "end crc32=", "end crc32=zz", 1), hotID, shape, ErrCorrupt},
	} {
		t.Run(tc.name, func(t *testing.T) {
			path := filepath.Join(t.TempDir(), "m.hot")
			if err := os.WriteFile(path, []byte(tc.text), 0o644); err != nil {
				t.Fatal(err)
			}
			h, err := Load(path, tc.id, tc.shape)
			if !errors.Is(err, tc.want) || h != nil {
				t.Errorf("got %v (hot set %v), want %v", err, h != nil, tc.want)
			}
			if err != nil && !strings.Contains(err.Error(), path) {
				t.Errorf("error %q does not name the file", err)
			}
		})
	}
	if !strings.Contains(good, "L 2 3 0 0 3\n") || !strings.Contains(good, "L 0 4 0 2") {
		t.Fatalf("format changed; fix the test's edits:\n%s", good)
	}
}

// TestHotSetNeverReplacesOrBlocks: Save refuses a FIFO, a device, a
// protected file (the model) and an ordinary file that is not a hot set, and
// leaves them as they were; it replaces a hot set (even a stale or corrupt
// one) and an empty file; Load refuses a FIFO at once instead of
// blocking in open.
func TestHotSetNeverReplacesOrBlocks(t *testing.T) {
	dir := t.TempDir()
	fifo := filepath.Join(dir, "fifo.hot")
	if err := syscall.Mkfifo(fifo, 0o600); err != nil {
		t.Fatalf("mkfifo: %v", err)
	}
	model := filepath.Join(dir, "model.gguf")
	if err := os.WriteFile(model, []byte("weights"), 0o644); err != nil {
		t.Fatal(err)
	}
	h := sampleHotSet()
	for _, p := range []string{fifo, os.DevNull} {
		if err := h.Save(p); !errors.Is(err, safefile.ErrNotRegular) {
			t.Fatalf("Save(%s) = %v, want ErrNotRegular", p, err)
		}
	}
	if st, err := os.Lstat(fifo); err != nil || st.Mode()&fs.ModeNamedPipe == 0 {
		t.Fatalf("the FIFO was replaced: %v", err)
	}
	if err := h.Save(model, model); !errors.Is(err, safefile.ErrSameFile) {
		t.Fatalf("Save over the model = %v, want ErrSameFile", err)
	}
	if b, _ := os.ReadFile(model); string(b) != "weights" {
		t.Fatal("the model changed")
	}
	notes := filepath.Join(dir, "notes.txt")
	csv := filepath.Join(dir, "run.csv")
	for p, text := range map[string]string{notes: "my notes\n", csv: "step,steps,wall_ms\n1,2,3.5\n"} {
		if err := os.WriteFile(p, []byte(text), 0o644); err != nil {
			t.Fatal(err)
		}
		if err := h.Save(p); !errors.Is(err, ErrNotHotSet) {
			t.Fatalf("Save(%s) over an ordinary file = %v, want ErrNotHotSet", p, err)
		}
		if b, _ := os.ReadFile(p); string(b) != text {
			t.Fatalf("%s changed: %q", p, b)
		}
	}
	for _, old := range []string{"", "pipe hot set v0\ngarbage", "pipe hot set v1\nmodel size=1 header_sha256=00\n"} {
		p := filepath.Join(dir, "old.hot")
		if err := os.WriteFile(p, []byte(old), 0o644); err != nil {
			t.Fatal(err)
		}
		if err := h.Save(p); err != nil {
			t.Fatalf("Save over %q: %v", old, err)
		}
		if _, err := Load(p, hotID, []int{4, 4, 3}); err != nil {
			t.Fatalf("after replacing %q: %v", old, err)
		}
	}
	done := make(chan error, 1)
	go func() { _, err := Load(fifo, hotID, []int{4, 4, 3}); done <- err }()
	select {
	case err := <-done:
		if !errors.Is(err, safefile.ErrNotRegular) {
			t.Fatalf("Load(FIFO) = %v, want ErrNotRegular", err)
		}
	case <-time.After(time.Minute):
		if w, err := os.OpenFile(fifo, os.O_WRONLY, 0); err == nil {
			w.Close() // unblock the reader
		}
		t.Fatal("Load blocked on a FIFO")
	}
}

// TestHotSetSaveCleansStaleTemps: a save killed before its rename leaves
// <name>.tmpNNN behind; the next Save of that hot set removes such
// temporaries once they are older than a save can take, and leaves young
// ones (another process saving now) and other files alone.
func TestHotSetSaveCleansStaleTemps(t *testing.T) {
	dir := t.TempDir()
	path := filepath.Join(dir, "model.hot")
	old := time.Now().Add(-time.Hour)
	write := func(name, text string, mtime time.Time) string {
		p := filepath.Join(dir, name)
		if err := os.WriteFile(p, []byte(text), 0o644); err != nil {
			t.Fatal(err)
		}
		if err := os.Chtimes(p, mtime, mtime); err != nil {
			t.Fatal(err)
		}
		return p
	}
	stale := []string{
		write("model.hot.tmp123456", "pipe hot set v1\nmodel size=1", old),
		write("model.hot.tmp987", "", old),
	}
	kept := []string{
		write("model.hot.tmp555", "pipe hot set v1\n", time.Now()), // young: another save
		write("model.hot.tmp777", "not a hot set", old),            // not ours
		write("model.hot.tmpfoo", "pipe hot set v1\n", old),        // not a temporary's name
		write("other.hot.tmp123", "pipe hot set v1\n", old),        // another hot set's
	}
	if err := sampleHotSet().Save(path); err != nil {
		t.Fatal(err)
	}
	for _, p := range stale {
		if _, err := os.Stat(p); !errors.Is(err, fs.ErrNotExist) {
			t.Errorf("stale temporary %s left: %v", filepath.Base(p), err)
		}
	}
	for _, p := range kept {
		if _, err := os.Stat(p); err != nil {
			t.Errorf("%s removed: %v", filepath.Base(p), err)
		}
	}
}
