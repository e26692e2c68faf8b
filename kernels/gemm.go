package kernels

import "github.com/pipe-engine/pipe/quant"

// Multi-token (GEMM-shaped) kernels. MatMul and MatMulQ over n tokens hand
// each chunk of weight rows to a gemmKernel in tiles of `tile` tokens: the
// kernel loads and unpacks every weight block once and applies it to all
// the tile's tokens. The tokens left over (n mod tile) run the single-vector
// kernel over the same rows. Each (row, token) output is computed with the
// exact integer block sums and the float32 accumulation order of the vector
// kernel (see the package doc), so MatMul equals MatVec bit for bit.
//
// Assembly kernels read their tile's activations from one packed buffer
// (built once per product, before the rows are split over threads) so a
// single pointer walks every token's block; the pure-Go kernels read the
// Activations directly.

// gemmRun computes y[t*ys+r] = row_r · acts[t] for r < rows and t <
// len(acts) == tile; rows of rb bytes packed in w. pk is the tile's packed
// activations (nil for kernels that do not pack).
type gemmRun func(w []byte, rb, rows int, acts []*Activation, pk []byte, y []float32, ys int)

// gemmKernel is the multi-token kernel of one weight type.
type gemmKernel struct {
	tile int // tokens per call
	// pack, if set, writes a tile's activations to dst (packBytes(cols)
	// bytes) in the layout run reads.
	pack      func(acts []*Activation, dst []byte)
	packBytes func(cols, tile int) int
	run       gemmRun
}

// gemmJob is the multi-token state of one product (part of job).
type gemmJob struct {
	k       *gemmKernel
	buf     []byte // packed tiles, reused across products
	tileLen int    // bytes per packed tile
}

// prepare selects m's multi-token kernel for rows of type t against acts
// and packs the activations; it leaves g.k nil when the vector kernels are
// to be used (a single token, fewer tokens than a tile, no kernel).
func (g *gemmJob) prepare(m *implementation, t quant.Type, acts []*Activation) {
	g.k = nil
	k := m.gemm[t]
	if k == nil || len(acts) < k.tile || len(acts) < 2 {
		return
	}
	g.k = k
	if k.pack == nil {
		return
	}
	tiles := len(acts) / k.tile
	g.tileLen = k.packBytes(acts[0].cols, k.tile)
	g.buf = grow(g.buf, tiles*g.tileLen)
	for i := 0; i < tiles; i++ {
		k.pack(acts[i*k.tile:(i+1)*k.tile], g.buf[i*g.tileLen:(i+1)*g.tileLen])
	}
}

// runGEMM computes rows [r0, r1) of the product for every token: whole
// tiles with the multi-token kernel, the remaining tokens with the vector
// kernel. Rows go in sub-chunks of about chunkBytes so they stay in cache
// while every tile reads them.
func (j *job) runGEMM(r0, r1 int) {
	sub := max(1, chunkBytes/j.rb)
	for s := r0; s < r1; s += sub {
		j.gemmRows(s, min(s+sub, r1))
	}
}

func (j *job) gemmRows(r0, r1 int) {
	k := j.gemm.k
	n := len(j.acts)
	w := j.w[r0*j.rb : r1*j.rb]
	full := n / k.tile * k.tile
	for v := 0; v < full; v += k.tile {
		var pk []byte
		if k.pack != nil {
			i := v / k.tile
			pk = j.gemm.buf[i*j.gemm.tileLen : (i+1)*j.gemm.tileLen]
		}
		k.run(w, j.rb, r1-r0, j.acts[v:v+k.tile], pk, j.y[v*j.rows+r0:], j.rows)
	}
	for v := full; v < n; v++ {
		a, y := j.acts[v], j.y[v*j.rows:]
		if j.rowsF != nil {
			j.rowsF(w, j.rb, a, y[r0:r1])
			continue
		}
		for r := r0; r < r1; r++ {
			y[r] = j.dot(j.w[r*j.rb:(r+1)*j.rb], a)
		}
	}
}
