package reader

import (
	"bytes"
	"errors"
	"fmt"
	"io"
	"math/rand/v2"
	"os"
	"path/filepath"
	"sync"
	"sync/atomic"
	"testing"

	"go.uber.org/goleak"
	"golang.org/x/sys/unix"
)

func TestMain(m *testing.M) { goleak.VerifyTestMain(m) }

func TestWiden(t *testing.T) {
	for _, tc := range []struct{ off, n, start, length int64 }{
		{0, 0, 0, 0},
		{0, 1, 0, 4096},
		{0, 4096, 0, 4096},
		{1, 4096, 0, 8192},
		{4095, 2, 0, 8192},
		{4096, 4096, 4096, 4096},
		{5000, 100, 4096, 4096},
		{884736*3 + 17, 1290240, 2654208, 1294336},
	} {
		s, l := Widen(tc.off, tc.n)
		if s != tc.start || l != tc.length {
			t.Errorf("Widen(%d, %d) = %d, %d; want %d, %d", tc.off, tc.n, s, l, tc.start, tc.length)
		}
		if s > tc.off || s+l < tc.off+tc.n || s%BlockSize != 0 || l%BlockSize != 0 {
			t.Errorf("Widen(%d, %d) = %d, %d does not cover the range on block boundaries", tc.off, tc.n, s, l)
		}
	}
}

func TestLayout(t *testing.T) {
	rs := []Range{{Shard: 0, Off: 100, Len: 10}, {Shard: 0, Off: 8192, Len: 4096}, {Shard: 1, Off: 4090, Len: 20}}
	if got, want := SpanBytes(rs), int64(4096+4096+8192); got != want {
		t.Fatalf("SpanBytes = %d, want %d", got, want)
	}
	offs := Offsets(nil, rs)
	want := []int64{100, 4096, 8192 + 4090 - 0}
	for i := range want {
		if offs[i] != want[i] {
			t.Errorf("Offsets[%d] = %d, want %d", i, offs[i], want[i])
		}
	}
	buf := make([]byte, SpanBytes(rs))
	v, err := Views(nil, buf, rs)
	if err != nil {
		t.Fatal(err)
	}
	for i, r := range rs {
		if int64(len(v[i])) != r.Len || int64(cap(v[i])) != r.Len {
			t.Errorf("view %d has len %d cap %d, want %d", i, len(v[i]), cap(v[i]), r.Len)
		}
	}
	if _, err := Views(nil, buf[:100], rs); !errors.Is(err, ErrBufferTooSmall) {
		t.Errorf("Views on a short buffer: %v, want ErrBufferTooSmall", err)
	}
}

// writeFile writes n pseudo-random bytes to dir/name and returns them.
func writeFile(t testing.TB, dir, name string, n int, seed uint64) (string, []byte) {
	t.Helper()
	data := make([]byte, n)
	r := rand.New(rand.NewPCG(seed, 1))
	for i := range data {
		data[i] = byte(r.Uint32())
	}
	p := filepath.Join(dir, name)
	if err := os.WriteFile(p, data, 0o644); err != nil {
		t.Fatal(err)
	}
	return p, data
}

func alloc(t testing.TB, n int64) []byte {
	t.Helper()
	b, err := AllocAligned(n)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { b.Free() })
	return b.B
}

// checkRead reads rs and compares every view with the files' contents.
func checkRead(t *testing.T, f *Files, rs []Range, data [][]byte) {
	t.Helper()
	buf := alloc(t, SpanBytes(rs))
	if _, err := f.ReadRanges(buf, rs, "test"); err != nil {
		t.Fatalf("ReadRanges(%v): %v", rs, err)
	}
	views, err := Views(nil, buf, rs)
	if err != nil {
		t.Fatal(err)
	}
	for i, r := range rs {
		if !bytes.Equal(views[i], data[r.Shard][r.Off:r.Off+r.Len]) {
			t.Fatalf("range %d %+v: wrong bytes", i, r)
		}
	}
}

// directWorks probes whether dir's file system accepts O_DIRECT reads.
func directWorks(t *testing.T, path string) bool {
	fh, err := OpenOS(path, true)
	if err != nil {
		return false
	}
	defer fh.Close()
	buf := alloc(t, BlockSize)
	_, err = fh.ReadAt(buf, 0)
	return err == nil || errors.Is(err, io.EOF)
}

func TestReadRealFiles(t *testing.T) {
	dir := t.TempDir()
	p0, d0 := writeFile(t, dir, "a.gguf", 3<<20+123, 1)
	p1, d1 := writeFile(t, dir, "b.gguf", 1<<20+4097, 2)
	data := [][]byte{d0, d1}
	for _, noDirect := range []bool{false, true} {
		t.Run(fmt.Sprintf("nodirect=%v", noDirect), func(t *testing.T) {
			var logs atomic.Int32
			f, err := Open([]string{p0, p1}, Options{NoODirect: noDirect, Logf: func(string, ...any) { logs.Add(1) }})
			if err != nil {
				t.Fatal(err)
			}
			defer f.Close()
			wantDirect := !noDirect && directWorks(t, p0)
			rs := []Range{
				{Shard: 0, Off: 17, Len: 884736},
				{Shard: 1, Off: 5, Len: 4096},
				{Shard: 0, Off: 2 << 20, Len: 1<<20 + 123}, // ends exactly at EOF (unaligned): widened tail past EOF
				{Shard: 1, Off: 1 << 20, Len: 4097},        // ends at EOF
				{Shard: 0, Off: 0, Len: 0},
				{Shard: 1, Off: 8191, Len: 2},
			}
			checkRead(t, f, rs, data)
			if f.ODirect() != wantDirect {
				t.Errorf("ODirect() = %v, want %v", f.ODirect(), wantDirect)
			}
			if logs.Load() != 0 {
				t.Errorf("fallback logged %d times on a file system that needs none", logs.Load())
			}
		})
	}
}

// noDirectDir returns a directory on a file system that rejects O_DIRECT with
// EINVAL: /dev/shm on kernels before 6.6 (tmpfs), else a ramfs mounted for the
// test (needs root). It skips the test when it finds none.
func noDirectDir(t *testing.T) string {
	if dir, err := os.MkdirTemp("/dev/shm", "pipe-reader-"); err == nil {
		t.Cleanup(func() { os.RemoveAll(dir) })
		p, _ := writeFile(t, dir, "probe", BlockSize, 0)
		if !directWorks(t, p) {
			return dir
		}
	}
	dir := t.TempDir()
	if err := unix.Mount("ramfs", dir, "ramfs", 0, ""); err != nil {
		t.Skipf("no file system without O_DIRECT: /dev/shm supports it (Linux >= 6.6) and mounting ramfs failed: %v", err)
	}
	t.Cleanup(func() { unix.Unmount(dir, 0) })
	return dir
}

// TestNoDirectFallback reads from a file system that rejects O_DIRECT with
// EINVAL (tmpfs before Linux 6.6, ramfs): the reader must fall back to
// buffered reads, say so once and report ODirect false.
func TestNoDirectFallback(t *testing.T) {
	dir := noDirectDir(t)
	p, d := writeFile(t, dir, "m.gguf", 1<<20+77, 3)
	var logs []string
	var mu sync.Mutex
	f, err := Open([]string{p}, Options{Logf: func(format string, a ...any) {
		mu.Lock()
		logs = append(logs, fmt.Sprintf(format, a...))
		mu.Unlock()
	}})
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	checkRead(t, f, []Range{{Shard: 0, Off: 100, Len: 5000}, {Shard: 0, Off: 1 << 20, Len: 77}}, [][]byte{d})
	checkRead(t, f, []Range{{Shard: 0, Off: 3, Len: 4}}, [][]byte{d})
	if f.ODirect() {
		t.Error("ODirect() = true on tmpfs")
	}
	if len(logs) != 1 {
		t.Errorf("fallback logged %d times, want once: %q", len(logs), logs)
	}
}

// faultFile wraps a File and injects faults.
type faultFile struct {
	File
	direct bool
	fault  func(p []byte, off int64, direct bool) (int, error, bool) // handled?
}

func (f *faultFile) ReadAt(p []byte, off int64) (int, error) {
	if n, err, ok := f.fault(p, off, f.direct); ok {
		return n, err
	}
	return f.File.ReadAt(p, off)
}

func faultOpener(fault func(p []byte, off int64, direct bool) (int, error, bool), openErr func(direct bool) error) OpenFunc {
	return func(path string, direct bool) (File, error) {
		if openErr != nil {
			if err := openErr(direct); err != nil {
				return nil, err
			}
		}
		// Open the real file buffered either way so the test works on any file system.
		h, err := OpenOS(path, false)
		if err != nil {
			return nil, err
		}
		return &faultFile{File: h, direct: direct, fault: fault}, nil
	}
}

func TestFaults(t *testing.T) {
	dir := t.TempDir()
	p, d := writeFile(t, dir, "m.gguf", 64<<10, 4)
	rs := []Range{{Shard: 0, Off: 10000, Len: 3000}}
	none := func([]byte, int64, bool) (int, error, bool) { return 0, nil, false }
	for _, tc := range []struct {
		name       string
		fault      func(p []byte, off int64, direct bool) (int, error, bool)
		openErr    func(direct bool) error
		wantErr    error
		wantDirect bool
		wantLogs   int
	}{
		{name: "ok", fault: none, wantDirect: true},
		{name: "short read", fault: func(p []byte, off int64, _ bool) (int, error, bool) {
			return len(p) / 2, io.ErrUnexpectedEOF, true
		}, wantErr: ErrShortRead, wantDirect: true},
		{name: "short read without error", fault: func(p []byte, off int64, _ bool) (int, error, bool) {
			return 100, nil, true
		}, wantErr: ErrShortRead, wantDirect: true},
		{name: "EIO", fault: func(p []byte, off int64, _ bool) (int, error, bool) {
			return 0, unix.EIO, true
		}, wantErr: unix.EIO, wantDirect: true},
		{name: "EIO buffered after fallback", fault: func(p []byte, off int64, direct bool) (int, error, bool) {
			if direct {
				return 0, unix.EINVAL, true
			}
			return 0, unix.EIO, true
		}, wantErr: ErrRead, wantLogs: 1},
		{name: "EINVAL on read falls back", fault: func(p []byte, off int64, direct bool) (int, error, bool) {
			if direct {
				return 0, unix.EINVAL, true
			}
			return 0, nil, false
		}, wantLogs: 1},
		{name: "EINVAL on open falls back", fault: none, openErr: func(direct bool) error {
			if direct {
				return &os.PathError{Op: "open", Path: p, Err: unix.EINVAL}
			}
			return nil
		}, wantLogs: 1},
	} {
		t.Run(tc.name, func(t *testing.T) {
			var logs atomic.Int32
			f, err := Open([]string{p}, Options{Open: faultOpener(tc.fault, tc.openErr), Logf: func(string, ...any) { logs.Add(1) }})
			if err != nil {
				t.Fatal(err)
			}
			defer f.Close()
			buf := alloc(t, SpanBytes(rs))
			for range 2 {
				_, err = f.ReadRanges(buf, rs, "layer 3 expert 17")
				if tc.wantErr == nil {
					if err != nil {
						t.Fatal(err)
					}
					v, _ := Views(nil, buf, rs)
					if !bytes.Equal(v[0], d[10000:13000]) {
						t.Fatal("wrong bytes")
					}
				} else {
					if !errors.Is(err, tc.wantErr) {
						t.Fatalf("err = %v, want %v", err, tc.wantErr)
					}
					for _, s := range []string{p, "layer 3 expert 17", "offset"} {
						if !bytes.Contains([]byte(err.Error()), []byte(s)) {
							t.Errorf("error %q does not name %q", err, s)
						}
					}
				}
			}
			if f.ODirect() != (tc.wantDirect && directSupported) {
				t.Errorf("ODirect() = %v, want %v", f.ODirect(), tc.wantDirect)
			}
			if int(logs.Load()) != tc.wantLogs {
				t.Errorf("logged %d times, want %d", logs.Load(), tc.wantLogs)
			}
		})
	}
}

func TestOpenErrors(t *testing.T) {
	dir := t.TempDir()
	p, _ := writeFile(t, dir, "m.gguf", 8192, 5)
	if _, err := Open([]string{p, filepath.Join(dir, "missing.gguf")}, Options{}); !errors.Is(err, os.ErrNotExist) {
		t.Errorf("missing shard: %v, want ErrNotExist", err)
	}
	eacces := faultOpener(func([]byte, int64, bool) (int, error, bool) { return 0, nil, false }, func(direct bool) error {
		if direct {
			return unix.EACCES
		}
		return nil
	})
	if _, err := Open([]string{p}, Options{Open: eacces}); !errors.Is(err, unix.EACCES) {
		t.Errorf("O_DIRECT open failing with EACCES: %v, want the error (no silent fallback)", err)
	}
}

func TestReadRangesErrors(t *testing.T) {
	dir := t.TempDir()
	p, _ := writeFile(t, dir, "m.gguf", 16384, 6)
	f, err := Open([]string{p}, Options{})
	if err != nil {
		t.Fatal(err)
	}
	buf := alloc(t, 3*BlockSize)
	for _, tc := range []struct {
		name string
		buf  []byte
		rs   []Range
		want error
	}{
		{"too small", buf[:100], []Range{{Shard: 0, Off: 0, Len: 200}}, ErrBufferTooSmall},
		{"bad shard", buf, []Range{{Shard: 1, Off: 0, Len: 10}}, ErrBadRange},
		{"negative", buf, []Range{{Shard: 0, Off: -5, Len: 10}}, ErrBadRange},
		{"past EOF", buf, []Range{{Shard: 0, Off: 16000, Len: 1000}}, ErrShortRead},
		{"far past EOF", buf, []Range{{Shard: 0, Off: 1 << 20, Len: 10}}, ErrShortRead},
	} {
		if _, err := f.ReadRanges(tc.buf, tc.rs, ""); !errors.Is(err, tc.want) {
			t.Errorf("%s: %v, want %v", tc.name, err, tc.want)
		}
	}
	if f.ODirect() {
		if _, err := f.ReadRanges(buf[1:], []Range{{Shard: 0, Off: 0, Len: 10}}, ""); !errors.Is(err, ErrUnaligned) {
			t.Errorf("unaligned buffer: %v, want ErrUnaligned", err)
		}
	}
	f.Close()
	if _, err := f.ReadRanges(buf, []Range{{Shard: 0, Off: 0, Len: 10}}, ""); !errors.Is(err, ErrClosed) {
		t.Errorf("after Close: %v, want ErrClosed", err)
	}
}

// Offsets appends to dst, for each range of rs, the offset within the read
// buffer at which that range's first byte lands, and returns the extended slice.
func Offsets(dst []int64, rs []Range) []int64 {
	var pos int64
	for _, r := range rs {
		start, l := Widen(r.Off, r.Len)
		dst = append(dst, pos+r.Off-start)
		pos += l
	}
	return dst
}
