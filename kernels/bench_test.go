package kernels

import (
	"fmt"
	"math/rand/v2"
	"sync"
	"sync/atomic"
	"testing"

	"github.com/pipe-engine/pipe/internal/anon"
	"github.com/pipe-engine/pipe/quant"
)

// Benchmarks read as GB/s of weights (b.SetBytes = weight bytes per
// product). Decode streams experts from RAM, so every benchmark cycles over
// enough copies of its matrix to exceed the caches (coldBytes): the numbers
// are memory-streaming numbers, comparable with BenchmarkMemBandwidth.
//
//	go test -run '^$' -bench . -count 3 ./kernels/

const coldBytes = 1 << 30

type benchShape struct {
	name       string
	rows, cols int
	types      []quant.Type
}

var hotTypes = []quant.Type{quant.Q4_K, quant.Q5_K, quant.Q6_K, quant.Q8_0, quant.MXFP4, quant.F16, quant.F32}

var benchShapes = []benchShape{
	{"qwen3-expert-gate-2048x768", 768, 2048, append(slicesClone(hotTypes), quant.Q4_0, quant.Q4_1, quant.Q5_0, quant.Q5_1, quant.Q2_K, quant.Q3_K, quant.BF16)},
	{"qwen3-expert-down-768x2048", 2048, 768, hotTypes},
	{"qwen3-attn-q-2048x4096", 4096, 2048, []quant.Type{quant.Q4_K, quant.Q6_K, quant.Q8_0}},
	{"qwen3-lm-head-2048x151936", 151936, 2048, []quant.Type{quant.Q6_K}},
	{"gptoss-expert-2880x2880", 2880, 2880, []quant.Type{quant.MXFP4}},
}

// cpuMetric reports GB/s per CPU-second (bytes per op × b.N over the
// process CPU time since cpu0): per-thread throughput that other processes
// on the machine cannot deflate.
func cpuMetric(b *testing.B, bytes int64, cpu0 float64) {
	if cpu := processCPUSeconds() - cpu0; cpu > 0 {
		b.ReportMetric(float64(bytes)*float64(b.N)/cpu/1e9, "cpuGB/s")
	}
}

func slicesClone(s []quant.Type) []quant.Type { return append([]quant.Type(nil), s...) }

// coldSet is n copies of one random matrix, n*size >= coldBytes, in
// anonymous memory advised for huge pages as decode's expert slots and dense
// weights are (internal/anon). It is built on first use, so sub-benchmarks a
// -bench filter skips cost nothing; free unmaps it.
type coldSet struct {
	t          quant.Type
	rows, cols int
	w          []byte
	size, n    int
}

func (c *coldSet) get(b *testing.B) (w []byte, size, n int) {
	if c.w == nil {
		one := randRows(rand.New(rand.NewPCG(11, uint64(c.t))), c.t, c.rows, c.cols)
		c.size = len(one)
		c.n = max(1, (coldBytes+c.size-1)/c.size)
		var err error
		if c.w, err = anon.Map(int64(c.n*c.size), true); err != nil {
			b.Fatal(err)
		}
		for i := 0; i < c.n; i++ {
			copy(c.w[i*c.size:], one)
		}
	}
	return c.w, c.size, c.n
}

func (c *coldSet) free() {
	if c.w != nil {
		_ = anon.Unmap(c.w)
		c.w = nil
	}
}

func BenchmarkMatVec(b *testing.B) {
	for _, sh := range benchShapes {
		for _, typ := range sh.types {
			cold := &coldSet{t: typ, rows: sh.rows, cols: sh.cols}
			x := randX(rand.New(rand.NewPCG(12, 13)), sh.cols)
			y := make([]float32, sh.rows)
			for _, m := range implementations() {
				if m != refImpl && !m.native[typ] {
					continue // same code as the reference
				}
				for _, threads := range []int{1, 2} {
					b.Run(fmt.Sprintf("%s/%v/%s/t%d", sh.name, typ, m.name, threads), func(b *testing.B) {
						saved := impl
						impl = m
						defer func() { impl = saved }()
						w, size, ncopies := cold.get(b)
						p := NewPool(threads)
						defer p.Close()
						b.SetBytes(int64(size))
						b.ResetTimer()
						cpu0 := processCPUSeconds()
						for i := 0; i < b.N; i++ {
							c := i % ncopies
							if err := p.MatVec(typ, w[c*size:(c+1)*size], sh.rows, sh.cols, x, y); err != nil {
								b.Fatal(err)
							}
						}
						cpuMetric(b, int64(size), cpu0)
					})
				}
			}
			cold.free()
		}
	}
}

// BenchmarkMatMul: 8 tokens against one expert matrix (prefill / several
// tokens routed to one expert); SetBytes counts weight bytes once.
func BenchmarkMatMul(b *testing.B) {
	const n = 8
	rows, cols := 768, 2048
	for _, typ := range []quant.Type{quant.Q4_K, quant.Q8_0} {
		cold := &coldSet{t: typ, rows: rows, cols: cols}
		x := randX(rand.New(rand.NewPCG(14, 15)), n*cols)
		y := make([]float32, n*rows)
		for _, threads := range []int{1, 2} {
			b.Run(fmt.Sprintf("%v/n%d/%s/t%d", typ, n, impl.name, threads), func(b *testing.B) {
				w, size, ncopies := cold.get(b)
				p := NewPool(threads)
				defer p.Close()
				b.SetBytes(int64(size))
				cpu0 := processCPUSeconds()
				for i := 0; i < b.N; i++ {
					c := i % ncopies
					if err := p.MatMul(typ, w[c*size:(c+1)*size], rows, cols, x, n, y); err != nil {
						b.Fatal(err)
					}
				}
				cpuMetric(b, int64(size), cpu0)
			})
		}
		cold.free()
	}
}

// BenchmarkQuantizeActivation: x of the expert input width.
func BenchmarkQuantizeActivation(b *testing.B) {
	x := randX(rand.New(rand.NewPCG(16, 17)), 2048)
	for _, m := range implementations() {
		for _, wt := range []quant.Type{quant.Q8_0, quant.Q4_K} {
			b.Run(fmt.Sprintf("%v/%s", wt, m.name), func(b *testing.B) {
				var a Activation
				b.SetBytes(int64(4 * len(x)))
				for i := 0; i < b.N; i++ {
					if err := a.quantizeWith(m, wt, x); err != nil {
						b.Fatal(err)
					}
				}
			})
		}
	}
}

var memSink uint64

// BenchmarkMemBandwidth sums a 1 GiB buffer, split over 1 or 2 goroutines:
// the machine's memory read bandwidth, the ceiling for the kernels.
func BenchmarkMemBandwidth(b *testing.B) {
	buf := make([]uint64, (1<<30)/8)
	for i := range buf {
		buf[i] = uint64(i)
	}
	for _, threads := range []int{1, 2} {
		b.Run(fmt.Sprintf("t%d", threads), func(b *testing.B) {
			b.SetBytes(int64(len(buf) * 8))
			cpu0 := processCPUSeconds()
			defer func() { cpuMetric(b, int64(len(buf)*8), cpu0) }()
			for i := 0; i < b.N; i++ {
				var wg sync.WaitGroup
				sums := make([]uint64, threads)
				per := len(buf) / threads
				for t := 0; t < threads; t++ {
					wg.Add(1)
					go func(t int) {
						defer wg.Done()
						sums[t] = sumMem(buf[t*per : (t+1)*per])
					}(t)
				}
				wg.Wait()
				for _, s := range sums {
					memSink += s
				}
			}
		})
	}
}

// sumMem reads every word of s with 8 independent accumulators.
func sumMem(s []uint64) uint64 {
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
	for _, v := range s {
		a0 += v
	}
	return a0 + a1 + a2 + a3 + a4 + a5 + a6 + a7
}

// BenchmarkDotHot: one 2048-element row (256 for nothing else) dotted over
// and over from L1 — the kernels' compute speed without memory stalls.
func BenchmarkDotHot(b *testing.B) {
	const cols = 2048
	for _, typ := range allTypes {
		w := randRows(rand.New(rand.NewPCG(18, 19)), typ, 1, cols)
		x := randX(rand.New(rand.NewPCG(20, 21)), cols)
		for _, m := range implementations() {
			if m != refImpl && !m.native[typ] {
				continue
			}
			b.Run(fmt.Sprintf("%v/%s", typ, m.name), func(b *testing.B) {
				var a Activation
				if err := a.quantizeWith(m, typ, x); err != nil {
					b.Fatal(err)
				}
				dot := m.dots[typ]
				b.SetBytes(int64(len(w)))
				var s float32
				cpu0 := processCPUSeconds()
				for i := 0; i < b.N; i++ {
					s += dot(w, &a)
				}
				cpuMetric(b, int64(len(w)), cpu0)
				benchSink = s
			})
		}
	}
}

var benchSink float32

// BenchmarkTwoStreams: two goroutines compute every row of 1 GiB of Q4_K
// rows with the single-vector kernel, each on its own half ("halves", how a
// Pool splits a product) or taking 28-row (32 KiB) chunks in turn from one
// shared counter ("alternate", the Pool's scheme before split.go). The gap
// is the machine's penalty for two cores streaming interleaved stretches of
// memory (docs/measurements.md, issue 11).
func BenchmarkTwoStreams(b *testing.B) {
	typ := quant.Q4_K
	cold := &coldSet{t: typ, rows: 768, cols: 2048}
	defer cold.free()
	a, err := QuantizeActivation(typ, randX(rand.New(rand.NewPCG(55, 56)), 2048))
	if err != nil {
		b.Fatal(err)
	}
	rows := impl.rows[typ]
	if rows == nil {
		b.Skip("no multi-row kernel for Q4_K in this implementation")
	}
	for _, mode := range []string{"halves", "alternate"} {
		b.Run(mode, func(b *testing.B) {
			w, size, ncopies := cold.get(b)
			rb := size / 768
			n := ncopies * 768
			y := make([]float32, n)
			b.SetBytes(int64(n * rb))
			const chunk = 28
			cpu0 := processCPUSeconds()
			for i := 0; i < b.N; i++ {
				var next atomic.Int64
				var wg sync.WaitGroup
				for g := range 2 {
					wg.Add(1)
					go func() {
						defer wg.Done()
						if mode == "halves" {
							r0, r1 := g*n/2, (g+1)*n/2
							rows(w[r0*rb:r1*rb], rb, a, y[r0:r1])
							return
						}
						for {
							r0 := int(next.Add(chunk)) - chunk
							if r0 >= n {
								return
							}
							r1 := min(r0+chunk, n)
							rows(w[r0*rb:r1*rb], rb, a, y[r0:r1])
						}
					}()
				}
				wg.Wait()
			}
			cpuMetric(b, int64(n*rb), cpu0)
		})
	}
}

// BenchmarkRowsHot: a product's multi-row kernel (rows) against the
// single-row dot called row by row (dots) on 16 rows of 2880 columns that
// stay in L1/L2 — the compute speed of the two, without memory stalls.
func BenchmarkRowsHot(b *testing.B) {
	const rows = 16
	for _, typ := range []quant.Type{quant.MXFP4, quant.Q8_0, quant.Q5_0, quant.Q4_K, quant.Q6_K} {
		cols := 2880
		if typ == quant.Q4_K || typ == quant.Q6_K {
			cols = 2048 // whole 256-element blocks: Qwen3.6's n_embd
		}
		w := randRows(rand.New(rand.NewPCG(1, 2)), typ, rows, cols)
		x := randX(rand.New(rand.NewPCG(3, 4)), cols)
		rb := len(w) / rows
		y := make([]float32, rows)
		for _, m := range implementations() {
			if m.rows[typ] == nil {
				continue
			}
			var a Activation
			if err := a.quantizeWith(m, typ, x); err != nil {
				b.Fatal(err)
			}
			b.Run(fmt.Sprintf("%v/%s/rows", typ, m.name), func(b *testing.B) {
				b.SetBytes(int64(len(w)))
				for i := 0; i < b.N; i++ {
					m.rows[typ](w, rb, &a, y)
				}
			})
			b.Run(fmt.Sprintf("%v/%s/dots", typ, m.name), func(b *testing.B) {
				b.SetBytes(int64(len(w)))
				for i := 0; i < b.N; i++ {
					for r := range y {
						y[r] = m.dots[typ](w[r*rb:(r+1)*rb], &a)
					}
				}
			})
		}
	}
}

// BenchmarkRowsCold: a product's multi-row kernel (rows) against the
// single-row dot called row by row (dots) over 256 MiB of rows (2048
// columns: Qwen3.6's n_embd), far past the caches as every decode step's
// weights are, both in the same process and each iteration running the
// two in turn (the first alternating), so the pair shares whatever the
// machine's load does to the memory bus. Reports each one's weight bytes
// per CPU-second and dots-cpu/rows-cpu (above 1: the multi-row kernel
// costs less CPU per byte). Q6_K's rows on avx512vnni is the single-row
// dot in a loop, so its ratio is the benchmark's own null: how far from 1
// the noise alone moves it.
func BenchmarkRowsCold(b *testing.B) {
	const cols, size = 2048, 256 << 20
	for _, typ := range []quant.Type{quant.Q4_K, quant.Q6_K, quant.Q8_0, quant.Q5_0} {
		m := impl
		if m.rows[typ] == nil {
			continue
		}
		b.Run(fmt.Sprintf("%v/%s", typ, m.name), func(b *testing.B) {
			one := randRows(rand.New(rand.NewPCG(1, 2)), typ, 1024, cols)
			rb := len(one) / 1024
			w := make([]byte, size/len(one)*len(one))
			for o := 0; o < len(w); o += len(one) {
				copy(w[o:], one)
			}
			rows := len(w) / rb
			var a Activation
			if err := a.quantizeWith(m, typ, randX(rand.New(rand.NewPCG(3, 4)), cols)); err != nil {
				b.Fatal(err)
			}
			y := make([]float32, rows)
			multi := func() { m.rows[typ](w, rb, &a, y) }
			single := func() {
				for r := range y {
					y[r] = m.dots[typ](w[r*rb:(r+1)*rb], &a)
				}
			}
			var cpuRows, cpuDots float64
			timed := func(f func(), acc *float64) {
				c0 := processCPUSeconds()
				f()
				*acc += processCPUSeconds() - c0
			}
			b.ResetTimer()
			for i := 0; i < b.N; i++ {
				if i%2 == 0 {
					timed(multi, &cpuRows)
					timed(single, &cpuDots)
				} else {
					timed(single, &cpuDots)
					timed(multi, &cpuRows)
				}
			}
			if cpuRows > 0 && cpuDots > 0 {
				gb := float64(len(w)) * float64(b.N) / 1e9
				b.ReportMetric(gb/cpuRows, "rows-cpuGB/s")
				b.ReportMetric(gb/cpuDots, "dots-cpuGB/s")
				b.ReportMetric(cpuDots/cpuRows, "dots/rows")
			}
		})
	}
}
