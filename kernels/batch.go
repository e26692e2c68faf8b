package kernels

import (
	"fmt"

	"github.com/pipe-engine/pipe/quant"
)

// Product is one matrix × vector product of a batch (Pool.MatVecs):
// Y[r] = row_r(W) · A for r < Rows, W holding Rows rows of Cols elements of
// Type, A prepared for Type and Cols (QuantizeActivation).
type Product struct {
	Type       quant.Type
	W          []byte
	Rows, Cols int
	A          *Activation
	Y          []float32 // len >= Rows
}

// batchChunk is a run of rows of one product of a batch.
type batchChunk struct {
	prod, r0, r1 int
}

// batchState is the pool's reusable MatVecs scratch.
type batchState struct {
	prods  []Product
	rb     []int
	dots   []dotFunc
	rowsF  []rowsFunc
	chunks []batchChunk
	run    func(i int) // runs chunk i; bound once per pool
}

func (b *batchState) runChunk(i int) {
	c := b.chunks[i]
	pr := &b.prods[c.prod]
	rb := b.rb[c.prod]
	if f := b.rowsF[c.prod]; f != nil {
		f(pr.W[c.r0*rb:c.r1*rb], rb, pr.A, pr.Y[c.r0:c.r1])
		return
	}
	dot := b.dots[c.prod]
	for r := c.r0; r < c.r1; r++ {
		pr.Y[r] = dot(pr.W[r*rb:(r+1)*rb], pr.A)
	}
}

// MatVecs computes every product of ps in one dispatch over the pool's
// threads: the rows of all products are cut into chunks of about chunkBytes
// and handed out together, so small matrices sharing an input (q/k/v; the
// gate and up projections of all of a layer's routed experts) cost one
// wake-up and one final wait instead of one per matrix. Every output element
// is computed by the same single-row kernel as MatVecQ, so results are
// identical to calling MatVecQ on each product, for any thread count. The
// products' outputs must not overlap each other or any W or A.
func (p *Pool) MatVecs(ps []Product) error {
	if len(ps) == 0 {
		return nil
	}
	p.mu.Lock()
	defer p.mu.Unlock()
	if p.closed {
		return ErrClosed
	}
	b := &p.bat
	b.prods = append(b.prods[:0], ps...)
	b.rb, b.dots, b.rowsF, b.chunks = b.rb[:0], b.dots[:0], b.rowsF[:0], b.chunks[:0]
	work := 0
	for i := range b.prods {
		pr := &b.prods[i]
		rb, err := rowBytes(pr.Type, pr.W, pr.Rows, pr.Cols)
		if err == nil {
			err = checkAct(pr.Type, pr.Cols, pr.A)
		}
		if err == nil && len(pr.Y) < pr.Rows {
			err = fmt.Errorf("%w: y has %d elements, want %d", ErrShape, len(pr.Y), pr.Rows)
		}
		if err != nil {
			b.clear()
			return fmt.Errorf("product %d: %w", i, err)
		}
		b.rb = append(b.rb, rb)
		b.dots = append(b.dots, impl.dots[pr.Type])
		b.rowsF = append(b.rowsF, impl.rows[pr.Type])
		work += rb * pr.Rows
	}
	parallel := p.threads > 1 && work >= parallelMinBytes
	for i := range b.prods {
		rows := b.prods[i].Rows
		chunk := max(rows, 1)
		if parallel {
			chunk = groupChunk(max(1, chunkBytes/b.rb[i]))
		}
		for r0 := 0; r0 < rows; r0 += chunk {
			b.chunks = append(b.chunks, batchChunk{i, r0, min(r0+chunk, rows)})
		}
	}
	if uint64(len(b.chunks)) > maxUnits {
		b.clear()
		return fmt.Errorf("%w: %d chunks in one batch, at most %d", ErrShape, len(b.chunks), uint64(maxUnits))
	}
	threads := p.threads
	if !parallel {
		threads = 1
	}
	p.parallelLocked(len(b.chunks), threads, b.run)
	b.clear()
	return nil
}

// clear drops the borrowed weights, activations and outputs.
func (b *batchState) clear() {
	clear(b.prods)
	b.prods = b.prods[:0]
}
