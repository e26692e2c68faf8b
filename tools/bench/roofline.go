package bench

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"math"
	"math/rand/v2"
	"os"
	"slices"
	"strings"
	"sync"
	"time"

	"github.com/pipe-engine/pipe/gguf"
	"github.com/pipe-engine/pipe/quant"
)

// ErrRoofline reports a model or machine the roofline cannot be measured on.
var ErrRoofline = errors.New("roofline")

// Roofline is what bounds a decode token on this machine: the weight bytes
// one token reads, the memory read rate at 1 and 2 threads, the kernels'
// rate on rows of each weight format the token reads (compute), and the
// rate of O_DIRECT reads of whole routed experts (each expert's tensor
// slices as separate block-aligned preads, several lanes at once: pipe's
// reads).
type Roofline struct {
	TokenBytes  int64      `json:"token_bytes"`  // weight bytes read per decode token, every expert resident
	DenseBytes  int64      `json:"dense_bytes"`  // of which dense (attention, norms, routers, head; one embedding row)
	ExpertBytes int64      `json:"expert_bytes"` // of which routed experts (k per layer)
	MemGBs      [2]float64 `json:"mem_GB_s"`     // memory read GB/s with 1 and 2 threads
	// Compute splits TokenBytes by weight format, most bytes first, with
	// the kernels' rate on each.
	Compute []TypeRate `json:"compute"`
	// Blocks is the compute term's work beside the weight products:
	// attention, recurrent state and convolutions at the run's depth.
	Blocks      BlockWork `json:"blocks"`
	DiskGBs     float64   `json:"disk_GB_s"`     // O_DIRECT expert reads, GB/s (NaN when not measured)
	DiskReadKiB float64   `json:"disk_read_KiB"` // mean bytes of one pread
	DiskLanes   int       `json:"disk_lanes"`
	DiskBytes   int64     `json:"disk_bytes"` // bytes read by the measurement

	slices   []expertSlices
	diskTime time.Duration
}

// expertSlices is one routed expert: the (offset, length) of its slice of
// every expert tensor of its layer, in the file of its shard.
type expertSlices struct {
	path string
	offs []int64
	lens []int64
}

// tokenBytes is what one decode token reads of a model's weights, and
// where its routed experts lie.
type tokenBytes struct {
	dense, experts int64
	byType         map[quant.Type]int64 // dense + experts split by weight format
	slices         []expertSlices       // every routed expert
}

// modelBytes reads the model's tensor table: the bytes one decode token
// reads (dense tensors whole except the token embedding, one row of which
// is read, unless the model has no output.weight and the embedding is the
// head too; k of the n experts of every expert tensor), those bytes by
// weight format, and every routed expert's slices.
func modelBytes(path string) (*tokenBytes, error) {
	f, err := gguf.Open(path)
	if err != nil {
		return nil, fmt.Errorf("%w: %w", ErrRoofline, err)
	}
	arch := f.Architecture()
	n, err1 := f.GetUint(arch + ".expert_count")
	k, err2 := f.GetUint(arch + ".expert_used_count")
	if err := errors.Join(err1, err2); err != nil || n == 0 || k == 0 || k > n {
		return nil, fmt.Errorf("%w: %s is not a mixture of experts (expert_count, expert_used_count): %w", ErrRoofline, path, err)
	}
	tb := &tokenBytes{byType: map[quant.Type]int64{}}
	add := func(t quant.Type, b int64, expert bool) {
		tb.byType[t] += b
		if expert {
			tb.experts += b
		} else {
			tb.dense += b
		}
	}
	_, tiedHead := f.Tensor("output.weight")
	tiedHead = !tiedHead
	byLayer := map[string]*[]int{}
	var layers []string
	for i := range f.Tensors {
		t := &f.Tensors[i]
		switch {
		case strings.Contains(t.Name, "_exps."):
			add(t.Type, int64(t.Size/n*k), true)
			layer, _, _ := strings.Cut(t.Name, ".ffn_")
			if byLayer[layer] == nil {
				byLayer[layer] = new([]int)
				layers = append(layers, layer)
			}
			*byLayer[layer] = append(*byLayer[layer], i)
		case t.Name == "token_embd.weight" && !tiedHead:
			add(t.Type, int64(t.RowSize()), false)
		default:
			add(t.Type, int64(t.Size), false)
		}
	}
	for _, l := range layers {
		for e := uint64(0); e < n; e++ {
			var s expertSlices
			for _, i := range *byLayer[l] {
				t := &f.Tensors[i]
				per := t.Size / n
				s.path = f.Shards[t.Shard].Path
				s.offs = append(s.offs, int64(t.Offset+e*per))
				s.lens = append(s.lens, int64(per))
			}
			tb.slices = append(tb.slices, s)
		}
	}
	return tb, nil
}

// MeasureRoofline measures the model's bytes per token, the memory read
// rate (256 MiB, best of a few passes, 1 and 2 goroutines), the kernels'
// rate on cached rows of every weight format the token reads (compute.go)
// and, for about diskTime, O_DIRECT reads of random whole experts by lanes
// goroutines (diskTime 0: no disk measurement; DiskGBs is then NaN). The
// blocks' work (blocks.go) is counted at a context depth of positions.
func MeasureRoofline(ctx context.Context, model string, lanes int, diskTime time.Duration, positions int) (*Roofline, error) {
	tb, err := modelBytes(model)
	if err != nil {
		return nil, err
	}
	blocks, err := blockWork(model, positions)
	if err != nil {
		return nil, err
	}
	rates, err := typeRates(tb.byType)
	if err != nil {
		return nil, err
	}
	r := &Roofline{TokenBytes: tb.dense + tb.experts, DenseBytes: tb.dense, ExpertBytes: tb.experts, Compute: rates, Blocks: blocks,
		DiskGBs: math.NaN(), DiskLanes: max(1, lanes), slices: tb.slices, diskTime: diskTime}
	return r, r.remeasure(ctx, true)
}

// Remeasure returns a copy with the memory and compute rates measured
// again, and the disk rate too when disk is set: Run calls it before every
// run, so each run is put against the machine's state of its own minutes.
func (r *Roofline) Remeasure(ctx context.Context, disk bool) (*Roofline, error) {
	c := *r
	c.Compute = slices.Clone(r.Compute)
	return &c, c.remeasure(ctx, disk)
}

// memProbeBytes is the size of the buffer the memory rate reads: larger
// than any last-level cache, so that the rate is DRAM's. The package's
// tests shrink it (they check that a rate is measured, not its value).
var memProbeBytes = 256 << 20

func (r *Roofline) remeasure(ctx context.Context, disk bool) error {
	buf := make([]uint64, memProbeBytes/8)
	for i := range buf {
		buf[i] = uint64(i)
	}
	for t := 1; t <= 2; t++ {
		r.MemGBs[t-1] = memRate(buf, t, 5)
	}
	if err := measureCompute(ctx, r.Compute); err != nil {
		return err
	}
	if err := r.Blocks.measure(ctx); err != nil {
		return err
	}
	if disk && r.diskTime > 0 && len(r.slices) > 0 {
		if err := r.measureDisk(ctx, r.slices, r.DiskLanes, r.diskTime); err != nil {
			return err
		}
	}
	return ctx.Err()
}

// memRate is the best of passes reads of buf split over threads
// goroutines, in GB/s.
func memRate(buf []uint64, threads, passes int) float64 {
	best := 0.0
	sums := make([]uint64, threads)
	for p := 0; p < passes; p++ {
		start := time.Now()
		var wg sync.WaitGroup
		per := len(buf) / threads
		for t := 0; t < threads; t++ {
			wg.Add(1)
			go func(t int) {
				defer wg.Done()
				sums[t] += sumWords(buf[t*per : (t+1)*per])
			}(t)
		}
		wg.Wait()
		best = math.Max(best, float64(8*per*threads)/time.Since(start).Seconds()/1e9)
	}
	memSink = sums[0]
	return best
}

var memSink uint64

// sumWords reads every word of s with 8 independent accumulators.
func sumWords(s []uint64) uint64 {
	var a0, a1, a2, a3, a4, a5, a6, a7 uint64
	for len(s) >= 8 {
		a0 += s[0]
		a1 += s[1]
		a2 += s[2]
		a3 += s[3]
		a4 += s[4]
		a5 += s[5]
		a6 += s[6]
		a7 += s[7]
		s = s[8:]
	}
	return a0 + a1 + a2 + a3 + a4 + a5 + a6 + a7
}

// measureDisk reads random whole experts with lanes goroutines for about
// d: each slice one pread of its block-aligned span into an aligned
// buffer, through a file opened with O_DIRECT.
func (r *Roofline) measureDisk(ctx context.Context, slices []expertSlices, lanes int, d time.Duration) error {
	files := map[string]*os.File{}
	defer func() {
		for _, f := range files {
			f.Close()
		}
	}()
	for _, s := range slices {
		if files[s.path] == nil {
			f, err := openDirect(s.path)
			if err != nil {
				return fmt.Errorf("%w: O_DIRECT open: %w", ErrRoofline, err)
			}
			files[s.path] = f
		}
	}
	var (
		mu           sync.Mutex
		total, reads int64
		firstErr     error
	)
	ctx, cancel := context.WithTimeout(ctx, d)
	defer cancel()
	start := time.Now()
	var wg sync.WaitGroup
	for l := 0; l < lanes; l++ {
		wg.Add(1)
		go func(seed uint64) {
			defer wg.Done()
			rng := rand.New(rand.NewPCG(seed, 27))
			var buf []byte
			for ctx.Err() == nil {
				s := slices[rng.IntN(len(slices))]
				for i := range s.offs {
					off, n := alignSpan(s.offs[i], s.lens[i])
					if len(buf) < int(n) {
						buf = alignedBuf(int(n))
					}
					m, err := files[s.path].ReadAt(buf[:n], off)
					if err != nil && !errors.Is(err, io.EOF) {
						mu.Lock()
						firstErr = errors.Join(firstErr, fmt.Errorf("%w: read %s at %d: %w", ErrRoofline, s.path, off, err))
						mu.Unlock()
						cancel()
						return
					}
					mu.Lock()
					total += int64(m)
					reads++
					mu.Unlock()
				}
			}
		}(uint64(l))
	}
	wg.Wait()
	if firstErr != nil {
		return firstErr
	}
	el := time.Since(start).Seconds()
	r.DiskBytes = total
	if reads > 0 {
		r.DiskGBs = float64(total) / el / 1e9
		r.DiskReadKiB = float64(total) / float64(reads) / 1024
	}
	return nil
}

// directBlock is the O_DIRECT alignment of offsets, lengths and buffers.
const directBlock = 4096

// alignSpan widens [off, off+n) to whole directBlock blocks.
func alignSpan(off, n int64) (int64, int64) {
	start := off &^ (directBlock - 1)
	end := (off + n + directBlock - 1) &^ (directBlock - 1)
	return start, end - start
}

// alignedBuf returns n bytes starting on a directBlock boundary.
func alignedBuf(n int) []byte {
	b := make([]byte, n+directBlock)
	o := 0
	if r := int(uintptrOf(b) % directBlock); r != 0 {
		o = directBlock - r
	}
	return b[o : o+n]
}

// The terms of the roofline: what bounds a token.
const (
	BoundMemory  = "memory"  // the token's weights streamed from memory
	BoundCompute = "compute" // the kernels over the token's weights
	BoundDisk    = "disk"    // the token's misses read from the disk
)

// Bound is the decode tok/s the roofline allows a run at threads compute
// threads reading missBytes per token from the disk, and the term that
// sets it: the slowest of the weights streamed from memory at the measured
// rate (1 or 2 threads), the kernels' time over them (Σ per format bytes ÷
// rate, at 1 or 2 threads; formats with no rate left out; plus the blocks'
// state at the F32 rate), and the misses
// read at the disk's rate, all three fully overlapped.
func (r *Roofline) Bound(threads int, missBytes float64) (tokS float64, by string) {
	th := min(max(threads, 1), 2)
	t, by := float64(r.TokenBytes)/(r.MemGBs[th-1]*1e9), BoundMemory
	if c := r.computeTime(th); c > t {
		t, by = c, BoundCompute
	}
	if missBytes > 0 && r.DiskGBs > 0 {
		if d := missBytes / (r.DiskGBs * 1e9); d > t {
			t, by = d, BoundDisk
		}
	}
	return 1 / t, by
}

// String describes the roofline in one line (capped: the disk term too),
// naming the term that bounds a token in RAM at 2 threads.
func (r *Roofline) String(capped bool) string {
	s := fmt.Sprintf("roofline: %.0f MiB per token (dense %.0f, experts %.0f), memory read %.1f GB/s at 1 thread, %.1f at 2",
		float64(r.TokenBytes)/(1<<20), float64(r.DenseBytes)/(1<<20), float64(r.ExpertBytes)/(1<<20), r.MemGBs[0], r.MemGBs[1])
	if len(r.Compute) > 0 {
		s += ", kernels on cached rows " + r.computeString()
	}
	s += ", " + r.Blocks.String()
	if !math.IsNaN(r.DiskGBs) {
		s += fmt.Sprintf(", O_DIRECT expert reads %.2f GB/s (%d lanes, %.0f KiB each)", r.DiskGBs, r.DiskLanes, r.DiskReadKiB)
	}
	s += "; bound = the slower of token bytes ÷ memory rate and Σ per format bytes ÷ kernel rate + blocks' state bytes ÷ F32 rate (compute)"
	if capped {
		s += ", or MiB read per token ÷ disk rate where slower still (all fully overlapped)"
	}
	_, by := r.Bound(2, 0)
	return s + fmt.Sprintf("; in RAM at 2 threads %s bounds (memory %s tok/s, compute %s: weights %.3f ms, blocks %.3f ms per token)",
		by, f(r.MemGBs[1]*1e9/float64(r.TokenBytes), 2), f(1/r.computeTime(2), 2), 1e3*computeSeconds(r.Compute, 2), 1e3*r.Blocks.Seconds(2))
}

// computeTime is the compute term at threads: the weight products and the
// blocks' work.
func (r *Roofline) computeTime(threads int) float64 {
	return computeSeconds(r.Compute, threads) + r.Blocks.Seconds(threads)
}

// computeString lists the formats: MiB per token and GB/s at 1 and 2
// threads, or that no kernel was measured.
func (r *Roofline) computeString() string {
	var parts []string
	for _, t := range r.Compute {
		p := fmt.Sprintf("%s %.1f MiB at %.1f/%.1f GB/s", t.Type, float64(t.Bytes)/(1<<20), t.GBsT1, t.GBsT2)
		if math.IsNaN(t.GBsT1) {
			p = fmt.Sprintf("%s %.1f MiB (no kernel: not in the compute term)", t.Type, float64(t.Bytes)/(1<<20))
		}
		parts = append(parts, p)
	}
	return "(1/2 threads): " + strings.Join(parts, ", ")
}

// MarshalJSON writes a disk rate that was not measured as null.
func (r *Roofline) MarshalJSON() ([]byte, error) { return json.Marshal(nullNaN(*r)) }
