package bench

import (
	"cmp"
	"context"
	"encoding/json"
	"fmt"
	"math"
	"math/rand/v2"
	"slices"
	"time"

	"github.com/pipe-engine/pipe/kernels"
	"github.com/pipe-engine/pipe/quant"
)

// The compute measurement: per weight type, products of a hotBytes matrix
// of hotCols columns on a kernels.Pool, repeated for computePass, best of
// computePasses passes, at 1 and 2 threads.
const (
	hotBytes      = 256 << 10 // small enough to stay in a core's L2 cache
	hotCols       = 2048      // a multiple of every block size
	computePass   = 40 * time.Millisecond
	computePasses = 3
)

// TypeRate is one weight format's share of a decode token's bytes and the
// rate of the kernels' matrix × vector product on rows of it that sit in
// cache (the kernels' compute speed, no memory stalls), in GB of weights
// per second with 1 and 2 threads. A format with no kernel to measure (no
// dot product in package kernels, or no quantizer in package quant to
// build rows with) has NaN rates (null in JSON) and is left out of the
// compute term.
type TypeRate struct {
	Type  string  `json:"type"`
	Bytes int64   `json:"bytes"`   // weight bytes of this type one decode token reads
	GBsT1 float64 `json:"GB_s_t1"` // hot-row product rate, 1 thread
	GBsT2 float64 `json:"GB_s_t2"` // 2 threads

	hot *hotMatrix // nil: no kernel
}

// MarshalJSON writes a rate that was not measured as null.
func (t TypeRate) MarshalJSON() ([]byte, error) { return json.Marshal(nullNaN(t)) }

// rate is the measured rate at threads (1 or 2; more count as 2).
func (t *TypeRate) rate(threads int) float64 {
	if threads >= 2 {
		return t.GBsT2
	}
	return t.GBsT1
}

// typeRates lists byType's formats, most bytes first, each with the hot
// matrix its rate is measured on (rates NaN until measured).
func typeRates(byType map[quant.Type]int64) ([]TypeRate, error) {
	out := make([]TypeRate, 0, len(byType))
	for t, n := range byType {
		tr := TypeRate{Type: t.String(), Bytes: n, GBsT1: math.NaN(), GBsT2: math.NaN()}
		if hasKernel(t) {
			h, err := newHotMatrix(t)
			if err != nil {
				return nil, err
			}
			tr.hot = h
		}
		out = append(out, tr)
	}
	slices.SortFunc(out, func(a, b TypeRate) int {
		return cmp.Or(cmp.Compare(b.Bytes, a.Bytes), cmp.Compare(a.Type, b.Type))
	})
	return out, nil
}

// hasKernel reports whether package kernels has a product for rows of t
// and package quant can build valid rows of it.
func hasKernel(t quant.Type) bool {
	_, err := kernels.ActivationType(t)
	return err == nil && quant.CanQuantize(t) && hotCols%t.BlockSize() == 0
}

// hotMatrix is a matrix of random valid rows of one type (normal values
// quantized by quant.Quantize) and an activation prepared for it.
type hotMatrix struct {
	t          quant.Type
	w          []byte
	rows, cols int
	act        *kernels.Activation
	y          []float32
}

func newHotMatrix(t quant.Type) (*hotMatrix, error) {
	rb, err := t.RowSize(hotCols)
	if err != nil {
		return nil, fmt.Errorf("%w: %s rows: %w", ErrRoofline, t, err)
	}
	h := &hotMatrix{t: t, cols: hotCols, rows: max(1, hotBytes/int(rb))}
	rng := rand.New(rand.NewPCG(27, uint64(t)))
	x := make([]float32, h.rows*h.cols)
	for i := range x {
		x[i] = float32(rng.NormFloat64())
	}
	h.w = make([]byte, h.rows*int(rb))
	if err := quant.Quantize(t, x, h.w); err != nil {
		return nil, fmt.Errorf("%w: %s rows: %w", ErrRoofline, t, err)
	}
	if h.act, err = kernels.QuantizeActivation(t, x[:h.cols]); err != nil {
		return nil, fmt.Errorf("%w: %s activation: %w", ErrRoofline, t, err)
	}
	h.y = make([]float32, h.rows)
	return h, nil
}

// rate is the best of computePasses passes of products for computePass
// each on a pool of threads threads, in GB of weights per second.
func (h *hotMatrix) rate(ctx context.Context, threads int) (float64, error) {
	p := kernels.NewPool(threads)
	defer p.Close()
	best := 0.0
	for pass := 0; pass < computePasses; pass++ {
		if err := ctx.Err(); err != nil {
			return 0, err
		}
		n, start := 0, time.Now()
		for time.Since(start) < computePass {
			for range 8 {
				if err := p.MatVecQ(h.t, h.w, h.rows, h.cols, h.act, h.y); err != nil {
					return 0, fmt.Errorf("%w: %s product: %w", ErrRoofline, h.t, err)
				}
			}
			n += 8
		}
		best = math.Max(best, float64(n*len(h.w))/time.Since(start).Seconds()/1e9)
	}
	return best, nil
}

// measureCompute measures every format's rate at 1 and 2 threads.
func measureCompute(ctx context.Context, rates []TypeRate) error {
	for i := range rates {
		tr := &rates[i]
		if tr.hot == nil {
			continue
		}
		var err error
		if tr.GBsT1, err = tr.hot.rate(ctx, 1); err != nil {
			return err
		}
		if tr.GBsT2, err = tr.hot.rate(ctx, 2); err != nil {
			return err
		}
	}
	return nil
}

// computeSeconds is the time the kernels take over one token's bytes at
// threads: Σ bytes ÷ rate over the formats with a measured rate.
func computeSeconds(rates []TypeRate, threads int) float64 {
	s := 0.0
	for i := range rates {
		if r := rates[i].rate(threads); r > 0 && !math.IsInf(r, 0) {
			s += float64(rates[i].Bytes) / (r * 1e9)
		}
	}
	return s
}
