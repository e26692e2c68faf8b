package reader

import (
	"context"
	"fmt"
	"math/rand/v2"
	"os"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/pipe-engine/pipe/internal/anon"
)

// Qwen3-30B-A3B Q4_K_M expert: gate and up are 768x2048 Q4_K (884,736 bytes
// each), down is 2048x768 Q6_K (1,290,240 bytes): 3,059,712 bytes in 3 ranges.
var qwenExpert = [3]int64{884736, 884736, 1290240}

const (
	qwenExperts = 128
	headerBytes = 5_000_032 // GGUF header + dense tensors before the first layer: unaligned to 4 KiB
)

// expertRanges returns the ranges of expert e of layer l in a file laid out
// like a GGUF: per layer, the stacked gate, up and down tensors of all experts.
func expertRanges(l, e int) []Range {
	var layer int64
	for _, n := range qwenExpert {
		layer += n * qwenExperts
	}
	base := headerBytes + int64(l)*layer
	rs := make([]Range, 0, 3)
	for _, n := range qwenExpert {
		rs = append(rs, Range{Shard: 0, Off: base + int64(e)*n, Len: n})
		base += n * qwenExperts
	}
	return rs
}

// BenchmarkColdExpertReads reads random Qwen3-30B-shaped experts with 1, 2, 4
// and 8 lanes from the file named by PIPE_BENCH_FILE (a multi-GiB file on the
// disk under test; O_DIRECT keeps the page cache out; PIPE_BENCH_DROP=1 drops
// the page cache before each run, as root). Compare with
//
//	fio --name=r --filename=$PIPE_BENCH_FILE --direct=1 --rw=randread --bs=2992k --numjobs=N --group_reporting
func BenchmarkColdExpertReads(b *testing.B) {
	path := os.Getenv("PIPE_BENCH_FILE")
	if path == "" {
		b.Skip("set PIPE_BENCH_FILE to a large file (e.g. 4 GiB) on the disk to measure")
	}
	st, err := os.Stat(path)
	if err != nil {
		b.Fatal(err)
	}
	var layerBytes int64
	for _, n := range qwenExpert {
		layerBytes += n * qwenExperts
	}
	layers := int((st.Size() - headerBytes) / layerBytes)
	if layers < 1 {
		b.Fatalf("%s is too small: need at least %d bytes", path, headerBytes+layerBytes)
	}
	noDirect := os.Getenv("PIPE_BENCH_NODIRECT") != ""
	f, err := Open([]string{path}, Options{NoODirect: noDirect})
	if err != nil {
		b.Fatal(err)
	}
	defer f.Close()
	span := SpanBytes(expertRanges(0, 0))
	slot := (span + BlockSize - 1) &^ (BlockSize - 1)
	for _, lanes := range []int{1, 2, 4, 8} {
		for _, pages := range []string{"huge", "4k"} {
			b.Run(fmt.Sprintf("lanes=%d/pages=%s", lanes, pages), func(b *testing.B) {
				coldReads(b, f, layers, lanes, slot, pages == "huge")
			})
		}
	}
}

// coldReads reads b.N random experts with the given lanes into 3 slots per
// lane carved from one arena, as the expert cache does (huge: THP-advised).
func coldReads(b *testing.B, f *Files, layers, lanes int, slot int64, huge bool) {
	if os.Getenv("PIPE_BENCH_DROP") != "" {
		// O_DIRECT needs no dropped caches; dropping them makes every other
		// process re-read its files from the disk under test during the run.
		os.WriteFile("/proc/sys/vm/drop_caches", []byte("3\n"), 0) // root only
	}
	l, err := Start(context.Background(), f, LaneOptions{Lanes: lanes, Queue: 2 * lanes})
	if err != nil {
		b.Fatal(err)
	}
	defer l.Close()
	nbuf := 3 * lanes
	mem, err := anon.Map(int64(nbuf)*slot, huge)
	if err != nil {
		b.Fatal(err)
	}
	defer anon.Unmap(mem)
	for i := 0; i < len(mem); i += BlockSize { // fault in first: measure reads, not page faults
		mem[i] = 1
	}
	bufs := make(chan []byte, nbuf)
	for i := range int64(nbuf) {
		bufs <- mem[i*slot : (i+1)*slot]
	}
	rng := rand.New(rand.NewPCG(uint64(lanes), 42))
	var wg sync.WaitGroup
	var firstErr error
	var mu sync.Mutex
	b.SetBytes(3059712)
	b.ResetTimer()
	t0, c0 := time.Now(), cpuTime()
	for i := 0; i < b.N; i++ {
		buf := <-bufs
		ly, e := rng.IntN(layers), rng.IntN(qwenExperts)
		wg.Add(1)
		err := l.Submit(context.Background(), Request{Buf: buf, Ranges: expertRanges(ly, e), Label: fmt.Sprintf("layer %d expert %d", ly, e),
			Done: func(err error) {
				if err != nil {
					mu.Lock()
					firstErr = err
					mu.Unlock()
				}
				bufs <- buf
				wg.Done()
			}})
		if err != nil {
			b.Fatal(err)
		}
	}
	wg.Wait()
	el, cpu := time.Since(t0), cpuTime()-c0
	b.StopTimer()
	if firstErr != nil {
		b.Fatal(firstErr)
	}
	s := l.Stats()
	b.ReportMetric(float64(s.Payload)/el.Seconds()/1e9, "GB/s")
	b.ReportMetric(float64(s.Bytes)/el.Seconds()/1e9, "device-GB/s")
	b.ReportMetric(cpu.Seconds()/(float64(s.Payload)/1e9), "cpu-s/GB")
	b.ReportMetric(boolMetric(f.ODirect()), "o_direct")
	b.ReportMetric(100*s.Busy.Seconds()/el.Seconds()/float64(lanes), "busy%")
}

// cpuTime is the process's user+system CPU time so far.
func cpuTime() time.Duration {
	var ru syscall.Rusage
	if syscall.Getrusage(syscall.RUSAGE_SELF, &ru) != nil {
		return 0
	}
	return time.Duration(ru.Utime.Nano() + ru.Stime.Nano())
}

func boolMetric(v bool) float64 {
	if v {
		return 1
	}
	return 0
}

// BenchmarkReadRangesCached measures the per-request overhead of the read path
// on a small file that stays in the device's cache.
func BenchmarkReadRangesCached(b *testing.B) {
	dir := b.TempDir()
	p, _ := writeFile(b, dir, "m.gguf", 4<<20, 1)
	f, err := Open([]string{p}, Options{})
	if err != nil {
		b.Fatal(err)
	}
	defer f.Close()
	rs := []Range{{Shard: 0, Off: 1000, Len: 300000}, {Shard: 0, Off: 1 << 20, Len: 300000}, {Shard: 0, Off: 3 << 20, Len: 400000}}
	buf := alloc(b, SpanBytes(rs))
	b.SetBytes(1000000)
	for b.Loop() {
		if _, err := f.ReadRanges(buf, rs, ""); err != nil {
			b.Fatal(err)
		}
	}
}
