package bench

import (
	"context"
	"errors"
	"maps"
	"math"
	"os"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/pipe-engine/pipe/gguf"
	"github.com/pipe-engine/pipe/quant"
)

// tinyMoE copies the golden tiny qwen3moe Q4_K_M model (8 experts, 2 used,
// 4 layers; what pipe gen --preset qwen3-tiny writes, as model/gen's
// TestTinyMatchesGolden checks) into dir, whose file system the disk tests
// read with O_DIRECT. Generating it here took ~100 s under -race.
func tinyMoE(t *testing.T, dir string) string {
	t.Helper()
	b, err := os.ReadFile(goldenModels + "tiny-qwen3moe-Q4_K_M.gguf")
	if err != nil {
		t.Fatal(err)
	}
	path := filepath.Join(dir, "tiny.gguf")
	if err := os.WriteFile(path, b, 0o644); err != nil {
		t.Fatal(err)
	}
	return path
}

// TestModelBytes: the bytes per token are every dense tensor but the
// embedding, one embedding row, and 2 of 8 experts of every expert tensor,
// counted per weight format too; the slices tile each expert tensor
// exactly.
func TestModelBytes(t *testing.T) {
	path := tinyMoE(t, t.TempDir())
	tb, err := modelBytes(path)
	if err != nil {
		t.Fatal(err)
	}
	dense, experts, slices := tb.dense, tb.experts, tb.slices
	f, err := gguf.Open(path)
	if err != nil {
		t.Fatal(err)
	}
	var wantDense, expTotal int64
	wantType := map[quant.Type]int64{}
	nExpTensors := 0
	for _, ti := range f.Tensors {
		switch {
		case strings.HasSuffix(ti.Name, "_exps.weight"):
			expTotal += int64(ti.Size)
			wantType[ti.Type] += int64(ti.Size) / 4
			nExpTensors++
		case ti.Name == "token_embd.weight":
			wantDense += int64(ti.Size / ti.Dims[1])
			wantType[ti.Type] += int64(ti.Size / ti.Dims[1])
		default:
			wantDense += int64(ti.Size)
			wantType[ti.Type] += int64(ti.Size)
		}
	}
	if dense != wantDense || experts != expTotal/4 {
		t.Fatalf("dense %d experts %d, want %d and %d (a quarter of %d)", dense, experts, wantDense, expTotal/4, expTotal)
	}
	if !maps.Equal(tb.byType, wantType) {
		t.Fatalf("bytes by format %v, want %v", tb.byType, wantType)
	}
	if len(wantType) < 2 {
		t.Fatalf("the tiny model has %d weight formats (%v): the grouping is not exercised", len(wantType), wantType)
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
	if _, err := modelBytes(path); !errors.Is(err, ErrRoofline) || !errors.Is(err, os.ErrNotExist) {
		t.Fatalf("missing file: %v, want ErrRoofline", err)
	}
}

func TestBound(t *testing.T) {
	r := &Roofline{TokenBytes: 1e9, MemGBs: [2]float64{10, 20}, DiskGBs: 0.5}
	for _, c := range []struct {
		threads int
		miss    float64
		want    float64
		by      string
	}{
		{1, 0, 10, BoundMemory}, {2, 0, 20, BoundMemory}, {4, 0, 20, BoundMemory}, {0, 0, 10, BoundMemory},
		{2, 1e9, 0.5, BoundDisk},    // the disk bounds: 2 s per token
		{2, 1e7, 20, BoundMemory},   // 20 ms of reads hide under 50 ms of memory
		{1, 2.5e7, 10, BoundMemory}, // 50 ms of reads, 100 ms of memory
		{1, 1e8, 5, BoundDisk},      // 200 ms of reads
	} {
		checkBound(t, r, c.threads, c.miss, c.want, c.by)
	}
	r.DiskGBs = math.NaN()
	checkBound(t, r, 2, 1e9, 20, BoundMemory) // no disk rate: the memory bound
}

// TestBoundCompute: the compute term is Σ bytes ÷ rate over the formats
// at the run's threads, formats without a rate left out, and bounds where
// it is the slowest of the three.
func TestBoundCompute(t *testing.T) {
	r := &Roofline{TokenBytes: 1e9, MemGBs: [2]float64{10, 20}, DiskGBs: 0.5, Compute: []TypeRate{
		{Type: "Q4_K", Bytes: 6e8, GBsT1: 4, GBsT2: 8},                      // 150 ms, 75 ms
		{Type: "Q6_K", Bytes: 4e8, GBsT1: 8, GBsT2: 16},                     // 50 ms, 25 ms
		{Type: "IQ2_XXS", Bytes: 1e8, GBsT1: math.NaN(), GBsT2: math.NaN()}, // no kernel
	}}
	for _, c := range []struct {
		threads int
		miss    float64
		want    float64
		by      string
	}{
		{1, 0, 5, BoundCompute},         // 200 ms of kernels, 100 ms of memory
		{2, 0, 10, BoundCompute},        // 100 ms, 50 ms
		{3, 0, 10, BoundCompute},        // more threads count as 2
		{2, 4e7, 10, BoundCompute},      // 80 ms of reads
		{2, 1e8, 5, BoundDisk},          // 200 ms of reads
		{1, 1.5e8, 10.0 / 3, BoundDisk}, // 300 ms
	} {
		checkBound(t, r, c.threads, c.miss, c.want, c.by)
	}
	r.Compute[0].GBsT2 = 80 // 7.5 + 25 ms of kernels at 2 threads: memory's 50 ms bound
	checkBound(t, r, 2, 0, 20, BoundMemory)
	checkBound(t, r, 1, 0, 5, BoundCompute)
}

func checkBound(t *testing.T, r *Roofline, threads int, miss, want float64, by string) {
	t.Helper()
	if got, gotBy := r.Bound(threads, miss); math.Abs(got-want) > 1e-9*want || gotBy != by {
		t.Errorf("Bound(%d, %g) = %g by %s, want %g by %s", threads, miss, got, gotBy, want, by)
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
	r, err := MeasureRoofline(context.Background(), path, 2, 200*time.Millisecond, 64)
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
		if run.BoundBy != BoundMemory {
			t.Fatalf("run %s #%d bound by %q: no compute rates, no disk rate, want memory", run.Label, run.Rep, run.BoundBy)
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
