package bench

import (
	"context"
	"errors"
	"math"
	"os"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/pipe-engine/pipe/gen"
	"github.com/pipe-engine/pipe/gguf"
)

// tinyMoE writes the qwen3-tiny preset (8 experts, 2 used, 4 layers).
func tinyMoE(t *testing.T, dir string) string {
	t.Helper()
	path := filepath.Join(dir, "tiny.gguf")
	if _, err := gen.GenerateFile(context.Background(), gen.Options{Preset: "qwen3-tiny", Seed: 1}, path); err != nil {
		t.Fatal(err)
	}
	return path
}

// TestModelBytes: the bytes per token are every dense tensor but the
// embedding, one embedding row, and 2 of 8 experts of every expert tensor;
// the slices tile each expert tensor exactly.
func TestModelBytes(t *testing.T) {
	path := tinyMoE(t, t.TempDir())
	dense, experts, slices, err := modelBytes(path)
	if err != nil {
		t.Fatal(err)
	}
	f, err := gguf.Open(path)
	if err != nil {
		t.Fatal(err)
	}
	var wantDense, expTotal int64
	nExpTensors := 0
	for _, ti := range f.Tensors {
		switch {
		case strings.HasSuffix(ti.Name, "_exps.weight"):
			expTotal += int64(ti.Size)
			nExpTensors++
		case ti.Name == "token_embd.weight":
			wantDense += int64(ti.Size / ti.Dims[1])
		default:
			wantDense += int64(ti.Size)
		}
	}
	if dense != wantDense || experts != expTotal/4 {
		t.Fatalf("dense %d experts %d, want %d and %d (a quarter of %d)", dense, experts, wantDense, expTotal/4, expTotal)
	}
	if len(slices) != 4*8 {
		t.Fatalf("%d experts' slices, want 32", len(slices))
	}
	var sum int64
	seen := map[int64]bool{}
	for _, s := range slices {
		if len(s.offs) != nExpTensors/4 {
			t.Fatalf("an expert has %d slices, want %d", len(s.offs), nExpTensors/4)
		}
		for i, o := range s.offs {
			if seen[o] {
				t.Fatalf("slice offset %d twice", o)
			}
			seen[o] = true
			sum += s.lens[i]
		}
	}
	if sum != expTotal {
		t.Fatalf("slices cover %d bytes, expert tensors hold %d", sum, expTotal)
	}
}

// TestModelBytesMissing: a file that is not there is a roofline error.
func TestModelBytesMissing(t *testing.T) {
	path := filepath.Join(t.TempDir(), "none.gguf")
	if _, _, _, err := modelBytes(path); !errors.Is(err, ErrRoofline) || !errors.Is(err, os.ErrNotExist) {
		t.Fatalf("missing file: %v, want ErrRoofline", err)
	}
}

func TestBound(t *testing.T) {
	r := &Roofline{TokenBytes: 1e9, MemGBs: [2]float64{10, 20}, DiskGBs: 0.5}
	for _, c := range []struct {
		threads int
		miss    float64
		want    float64
	}{
		{1, 0, 10}, {2, 0, 20}, {4, 0, 20}, {0, 0, 10},
		{2, 1e9, 0.5},  // the disk bounds: 2 s per token
		{2, 1e7, 20},   // 20 ms of reads hide under 50 ms of memory
		{1, 2.5e7, 10}, // 50 ms of reads, 100 ms of memory
		{1, 1e8, 5},    // 200 ms of reads
	} {
		if got := r.Bound(c.threads, c.miss); math.Abs(got-c.want) > 1e-9*c.want {
			t.Errorf("Bound(%d, %g) = %g, want %g", c.threads, c.miss, got, c.want)
		}
	}
	r.DiskGBs = math.NaN()
	if got := r.Bound(2, 1e9); got != 20 {
		t.Errorf("no disk rate: Bound = %g, want the memory bound 20", got)
	}
}

// TestRooflineDisk reads the tiny model's experts with O_DIRECT and the
// memory with 1 and 2 goroutines: positive rates, whole aligned reads.
func TestRooflineDisk(t *testing.T) {
	dir := t.TempDir()
	path := tinyMoE(t, dir)
	if f, err := openDirect(path); err != nil {
		if errors.Is(err, syscall.EINVAL) && os.Getenv("CI") != "true" {
			t.Skipf("skipped: the file system of %s has no O_DIRECT: %v", dir, err)
		}
		t.Fatal(err)
	} else {
		f.Close()
	}
	r, err := MeasureRoofline(context.Background(), path, 2, 200*time.Millisecond)
	if err != nil {
		t.Fatal(err)
	}
	if !(r.DiskGBs > 0) || r.DiskBytes <= 0 || r.DiskReadKiB < 4 {
		t.Fatalf("disk: %.3f GB/s, %d bytes, %.1f KiB per read", r.DiskGBs, r.DiskBytes, r.DiskReadKiB)
	}
	if !(r.MemGBs[0] > 0) || !(r.MemGBs[1] > 0) {
		t.Fatalf("memory rates %v", r.MemGBs)
	}
	if s := r.String(true); !strings.Contains(s, "O_DIRECT expert reads") || !strings.Contains(s, "disk rate") {
		t.Fatalf("String: %s", s)
	}
}

func TestAlignSpan(t *testing.T) {
	for _, c := range [][4]int64{{0, 1, 0, 4096}, {4095, 2, 0, 8192}, {4096, 4096, 4096, 4096}, {5000, 10000, 4096, 12288}} {
		if o, n := alignSpan(c[0], c[1]); o != c[2] || n != c[3] {
			t.Errorf("alignSpan(%d, %d) = %d, %d, want %d, %d", c[0], c[1], o, n, c[2], c[3])
		}
	}
	if b := alignedBuf(5000); len(b) != 5000 || uintptrOf(b)%directBlock != 0 {
		t.Fatalf("alignedBuf: %d bytes at %#x", len(b), uintptrOf(b))
	}
}

// TestRooflineReport: with a roofline every completed run gets its bound
// (threads from the summary; the fake's has none: 1 thread) and fraction,
// and the table the two columns.
func TestRooflineReport(t *testing.T) {
	o := fakeOptions(t)
	o.Repeat = 2
	ax, _ := ParseVary("io-threads=1,2")
	o.Axes = []Axis{ax}
	o.Roofline = &Roofline{TokenBytes: 1 << 30, DiskGBs: math.NaN()}
	rep, err := Run(context.Background(), o)
	if err != nil {
		t.Fatal(err)
	}
	for _, run := range rep.Runs {
		if run.Roofline == nil || !(run.Roofline.MemGBs[0] > 0) {
			t.Fatalf("run %s #%d: no roofline measured before it", run.Label, run.Rep)
		}
		want := run.Roofline.MemGBs[0] * 1e9 / (1 << 30)
		if math.Abs(run.BoundTokS-want) > 1e-9*want || math.Abs(run.BoundFrac-run.SteadyTokS/want) > 1e-9 {
			t.Fatalf("run %s: bound %g frac %g, want %g and %g", run.Label, run.BoundTokS, run.BoundFrac, want, run.SteadyTokS/want)
		}
	}
	var b strings.Builder
	if err := rep.Write(&b, "text"); err != nil {
		t.Fatal(err)
	}
	if !strings.Contains(b.String(), "% of bound") || !strings.Contains(b.String(), "roofline:") {
		t.Fatalf("table without the roofline:\n%s", b.String())
	}
	b.Reset()
	if err := rep.Write(&b, "json"); err != nil {
		t.Fatalf("json: %v", err)
	}
	if !strings.Contains(b.String(), `"bound_frac"`) || !strings.Contains(b.String(), `"disk_GB_s": null`) {
		t.Fatalf("json without bound_frac or with a NaN disk rate:\n%.2000s", b.String())
	}
}
