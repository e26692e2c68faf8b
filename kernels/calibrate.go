package kernels

import (
	"fmt"
	"math"
	"slices"
	"sync"
	"time"

	"github.com/pipe-engine/pipe/quant"
)

// measureFunc runs the calibration workload once with set m, writing its
// results to out (one slice per workload product), and returns how long
// it took.
type measureFunc func(m *implementation, out [][]float32) time.Duration

// Calibration bounds: at least minRounds rounds of every set, at most
// maxRounds, and no new round once the measured time passes calibBudget
// (counted from the measurements, so the pick is a function of the
// timings alone).
const (
	minRounds   = 3
	maxRounds   = 9
	calibBudget = 60 * time.Millisecond
)

// calibrate times every candidate on the decode-shaped workload, round
// after round (the order rotated each round so that no set always runs
// first), and returns the one with the smallest best-of-rounds time,
// the earlier candidate on a tie, with every set's best time in seconds.
// A set whose results differ from the first candidate's is never picked
// (the sets are bit-identical by construction; this is a guard).
func calibrate(cands []*implementation, measure measureFunc, w func(string)) (*implementation, map[string]float64) {
	n := len(cands)
	best := make([]time.Duration, n)
	for i := range best {
		best[i] = math.MaxInt64
	}
	outs := make([][][]float32, n)
	for i := range outs {
		outs[i] = newCalibOut()
	}
	var spent time.Duration
	for r := 0; r < maxRounds && (r < minRounds || spent < calibBudget); r++ {
		for k := range n {
			i := (r + k) % n
			d := max(measure(cands[i], outs[i]), 0)
			spent += d
			best[i] = min(best[i], d)
		}
	}
	secs := make(map[string]float64, n)
	pick := -1
	for i, m := range cands {
		secs[m.name] = best[i].Seconds()
		if i > 0 && !sameOut(outs[0], outs[i]) {
			warn(w, fmt.Sprintf("kernels: set %s differs from %s in calibration; not used", m.name, cands[0].name))
			continue
		}
		if pick < 0 || best[i] < best[pick] {
			pick = i
		}
	}
	return cands[pick], secs
}

func sameOut(a, b [][]float32) bool {
	return slices.EqualFunc(a, b, func(x, y []float32) bool {
		return slices.EqualFunc(x, y, func(p, q float32) bool { return math.Float32bits(p) == math.Float32bits(q) })
	})
}

// The calibration workload: one single-vector product (decode's shape)
// per type the sets accelerate differently, calibRows rows of calibCols,
// repeated calibReps times per measurement (about a millisecond on a
// Zen 5 core with AVX-512 VNNI). The weights (about 0.5 MB in
// all) stay in the L2 cache, so the kernels' compute is what is timed.
const (
	calibRows = 64
	calibCols = 2048
	calibReps = 64
)

var calibTypes = []quant.Type{quant.Q4_K, quant.Q6_K, quant.Q8_0, quant.MXFP4}

type calibProduct struct {
	t  quant.Type
	rb int
	w  []byte
	x  []float32
}

// calibWork builds the products once: rows quantized from a fixed
// pseudo-random pattern by the reference quantizers (four distinct rows,
// repeated).
var calibWork = sync.OnceValue(func() []calibProduct {
	x := make([]float32, calibCols)
	s := uint32(1)
	for i := range x {
		s = s*1664525 + 1013904223
		x[i] = float32(int32(s>>8)-1<<23) / (1 << 23)
	}
	ps := make([]calibProduct, len(calibTypes))
	for k, t := range calibTypes {
		rb64, _ := t.RowSize(calibCols)
		rb := int(rb64)
		four := make([]byte, 4*rb)
		src := make([]float32, 4*calibCols)
		for i := range src {
			src[i] = x[(i*7+k)%calibCols] * float32(1+i%5)
		}
		if err := quant.Quantize(t, src, four); err != nil {
			panic(fmt.Sprintf("kernels: calibration weights: %v", err)) // fixed shapes: cannot happen
		}
		w := make([]byte, calibRows*rb)
		for r := range calibRows {
			copy(w[r*rb:], four[(r%4)*rb:(r%4+1)*rb])
		}
		ps[k] = calibProduct{t: t, rb: rb, w: w, x: x}
	}
	return ps
})

func newCalibOut() [][]float32 {
	out := make([][]float32, len(calibTypes))
	for i := range out {
		out[i] = make([]float32, calibRows)
	}
	return out
}

// runCalib computes the workload once with set m.
func runCalib(m *implementation, out [][]float32) {
	var a Activation
	for k, p := range calibWork() {
		if err := a.quantizeWith(m, p.t, p.x); err != nil {
			panic(fmt.Sprintf("kernels: calibration activation: %v", err)) // fixed shapes: cannot happen
		}
		for range calibReps {
			if rows := m.rows[p.t]; rows != nil {
				rows(p.w, p.rb, &a, out[k])
				continue
			}
			dot := m.dots[p.t]
			for r := range out[k] {
				out[k][r] = dot(p.w[r*p.rb:(r+1)*p.rb], &a)
			}
		}
	}
}

// measureSet is the real measureFunc: the wall time of one runCalib.
func measureSet(m *implementation, out [][]float32) time.Duration {
	start := time.Now()
	runCalib(m, out)
	return time.Since(start)
}
