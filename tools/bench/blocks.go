package bench

// blocks.go: the compute term's part beside the weight products: the state
// a decode token reads and writes in its blocks (attention over the KV
// cache, the recurrent mixers' state, the short convolutions), as the
// model's family counts it (model.Family.TokenWork), timed at the F32
// kernel's rate on cached rows.

import (
	"context"
	"encoding/json"
	"fmt"
	"math"

	"github.com/pipe-engine/pipe/gguf"
	"github.com/pipe-engine/pipe/model"
	_ "github.com/pipe-engine/pipe/model/archs" // every family counts its blocks' work
	"github.com/pipe-engine/pipe/quant"
)

// blockElemBytes is the bytes the roofline charges per element of block
// state: float32, the recurrent states' and the kernels' activations'.
const blockElemBytes = 4

// BlockWork is a decode token's work beside the weight products at the
// run's context depth: elements of state per block kind (model.TokenWork)
// and the F32 product's rate on cached rows they are timed at.
type BlockWork struct {
	Positions int             `json:"positions"` // context depth the attention term is counted at
	Elems     model.TokenWork `json:"elems"`     // elements read and written per token, by block kind
	GBsT1     float64         `json:"GB_s_t1"`   // F32 hot-row product rate, 1 thread
	GBsT2     float64         `json:"GB_s_t2"`   // 2 threads

	hot *hotMatrix
}

// MarshalJSON writes a rate that was not measured as null.
func (b BlockWork) MarshalJSON() ([]byte, error) { return json.Marshal(nullNaN(b)) }

// blockWork is the token work of the model at path at a depth of
// positions, as its family counts it.
func blockWork(path string, positions int) (BlockWork, error) {
	f, err := gguf.Open(path)
	if err != nil {
		return BlockWork{}, fmt.Errorf("%w: %w", ErrRoofline, err)
	}
	d, err := model.Describe(f)
	if err != nil {
		return BlockWork{}, fmt.Errorf("%w: %s: %w", ErrRoofline, path, err)
	}
	h, err := newHotMatrix(quant.F32)
	if err != nil {
		return BlockWork{}, err
	}
	return BlockWork{Positions: positions, Elems: model.TokenWorkOf(d, positions),
		GBsT1: math.NaN(), GBsT2: math.NaN(), hot: h}, nil
}

// measure measures the F32 rate at 1 and 2 threads.
func (b *BlockWork) measure(ctx context.Context) error {
	if b.hot == nil {
		return nil
	}
	var err error
	if b.GBsT1, err = b.hot.rate(ctx, 1); err != nil {
		return err
	}
	b.GBsT2, err = b.hot.rate(ctx, 2)
	return err
}

// seconds is the time of elems elements at threads (0 when not measured).
func (b *BlockWork) seconds(elems int64, threads int) float64 {
	r := b.GBsT1
	if threads >= 2 {
		r = b.GBsT2
	}
	if !(r > 0) || math.IsInf(r, 0) {
		return 0
	}
	return float64(elems*blockElemBytes) / (r * 1e9)
}

// Seconds is the time of every block kind's work at threads.
func (b *BlockWork) Seconds(threads int) float64 { return b.seconds(b.Elems.Total(), threads) }

// String lists the block kinds with their elements and milliseconds per
// token at 2 threads.
func (b *BlockWork) String() string {
	ms := func(n int64) float64 { return 1e3 * b.seconds(n, 2) }
	return fmt.Sprintf("blocks at depth %d (F32 rate %.1f/%.1f GB/s): attention %.2f M elements %.3f ms, recurrent %.2f M %.3f ms, conv %.2f M %.3f ms",
		b.Positions, b.GBsT1, b.GBsT2, float64(b.Elems.Attention)/1e6, ms(b.Elems.Attention),
		float64(b.Elems.Recurrent)/1e6, ms(b.Elems.Recurrent), float64(b.Elems.Conv)/1e6, ms(b.Elems.Conv))
}
