package kernels

import (
	"github.com/pipe-engine/pipe/internal/buf"
	"github.com/pipe-engine/pipe/quant"
)

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

// gemmKernel is a multi-token kernel of one weight type.
type gemmKernel struct {
	tile int // tokens per call
	// pack, if set, writes a tile's activations to dst (packBytes(cols)
	// bytes) in the layout run reads.
	pack      func(acts []*Activation, dst []byte)
	packBytes func(cols int) int
	run       gemmRun
	// next, if set, is a kernel with a smaller tile for the tokens left
	// after the whole tiles of this one.
	next *gemmKernel
	// minFill > 0 lets a last, partial tile of at least minFill tokens run
	// this kernel padded with copies of its last token (cheaper than the
	// smaller kernels for those tokens); the padding's outputs are
	// discarded.
	minFill int
}

// gemmSet is a named set of multi-token kernels.
type gemmSet struct {
	name    string
	kernels map[quant.Type]*gemmKernel
}

// nativeGEMMSets lists the assembly kernel sets usable on this machine
// (filled at init by the architecture's files), for tests and benchmarks;
// implementations install the fastest of them.
var nativeGEMMSets []gemmSet

// gemmStep is one tile of a product: tokens [v, v+valid); valid < k.tile
// for a padded tile.
type gemmStep struct {
	k     *gemmKernel
	v     int
	valid int
	acts  []*Activation // k.tile activations (padded with copies)
	pk    []byte        // packed activations (nil if k does not pack)
}

// gemmJob is the multi-token plan of one product (part of job).
type gemmJob struct {
	plan []gemmStep
	rest int           // first token left to the vector kernel
	buf  []byte        // packed tiles, reused across products
	pad  []float32     // outputs of a padded tile (tile × rows)
	acts []*Activation // a padded tile's activations
}

// on reports whether the product runs multi-token kernels.
func (g *gemmJob) on() bool { return len(g.plan) > 0 }

// prepare plans the tiles of m's multi-token kernels for rows of type t
// against acts and packs their activations. The plan is empty when no tile
// fits (a single token, or no kernel for t): the vector kernels run.
func (g *gemmJob) prepare(m *implementation, t quant.Type, acts []*Activation, rows int) {
	g.plan, g.rest = g.plan[:0], 0
	n := len(acts)
	size := 0
	for k := m.gemm[t]; k != nil && g.rest < n; k = k.next {
		for n-g.rest >= k.tile {
			g.plan = append(g.plan, gemmStep{k: k, v: g.rest, valid: k.tile, acts: acts[g.rest : g.rest+k.tile]})
			g.rest += k.tile
		}
		if r := n - g.rest; k.minFill > 0 && r >= k.minFill {
			g.acts = append(g.acts[:0], acts[g.rest:]...)
			for len(g.acts) < k.tile {
				g.acts = append(g.acts, acts[n-1])
			}
			g.plan = append(g.plan, gemmStep{k: k, v: g.rest, valid: r, acts: g.acts})
			g.pad = buf.Grow(g.pad, k.tile*rows)
			g.rest = n
		}
	}
	for _, st := range g.plan {
		if st.k.pack != nil {
			size += st.k.packBytes(acts[0].cols)
		}
	}
	g.buf = buf.Grow(g.buf, size)
	off := 0
	for i := range g.plan {
		st := &g.plan[i]
		if st.k.pack == nil {
			continue
		}
		n := st.k.packBytes(acts[0].cols)
		st.pk = g.buf[off : off+n]
		st.k.pack(st.acts, st.pk)
		off += n
	}
}

// runGEMM computes rows [r0, r1) of the product for every token: the
// planned tiles with the multi-token kernels, the remaining tokens with the
// vector kernel. Rows go in sub-chunks of about chunkBytes so they stay in
// cache while every tile reads them.
func (j *job) runGEMM(r0, r1 int) {
	sub := max(1, chunkBytes/j.rb)
	for s := r0; s < r1; s += sub {
		j.gemmRows(s, min(s+sub, r1))
	}
}

func (j *job) gemmRows(r0, r1 int) {
	w := j.w[r0*j.rb : r1*j.rb]
	for _, st := range j.gemm.plan {
		if st.valid == st.k.tile {
			st.k.run(w, j.rb, r1-r0, st.acts, st.pk, j.y[st.v*j.rows+r0:], j.rows)
			continue
		}
		// padded tile: every token's rows [r0, r1) go to pad, the real
		// tokens' are copied out (threads own disjoint rows of pad)
		pad := j.gemm.pad
		st.k.run(w, j.rb, r1-r0, st.acts, st.pk, pad[r0:], j.rows)
		for t := 0; t < st.valid; t++ {
			copy(j.y[(st.v+t)*j.rows+r0:(st.v+t)*j.rows+r1], pad[t*j.rows+r0:t*j.rows+r1])
		}
	}
	for v := j.gemm.rest; v < len(j.acts); v++ {
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
