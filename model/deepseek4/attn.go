package deepseek4

// attn.go: the attention block (llama.cpp's build_attention_impl and the
// raw, CSA and HCA attentions), the compressors
// (build_{hca,overlap}_compressed_kv_from_state) and the lightning indexer
// (build_lid_top_k), for the n tokens of one sequence at positions pos0….

import (
	"fmt"
	"math"
	"sort"

	"github.com/pipe-engine/pipe/kernels"
	"github.com/pipe-engine/pipe/model"
)

// fwhtMin is the smallest Hadamard block llama.cpp builds (64).
const fwhtMin = 64

// attnIn are one call's projections of the normed input h.
type attnIn struct {
	q, kv, qr  []float32 // per token: heads of q, the shared kv row, the normed q_a
	ckv, csc   []float32 // compressor rows (ratio > 0)
	ikv, isc   []float32 // indexer compressor rows (ratio 4)
	iq, iw     []float32 // indexer queries and head weights (ratio 4)
	n, pos0, l int
}

// attention returns the attention block's output (n × E) for the normed
// input h of layer l, storing the tokens' rows in st.
func (m *Model) attention(st *model.State, l int, h []float32, n, pos0 int) ([]float32, error) {
	L := &m.layers[l]
	in, err := m.project(L, h, n, pos0, l)
	if err != nil {
		return nil, err
	}
	att := make([]float32, n*m.nh*m.hd)
	var rr rowReader
	for t := 0; t < n; t++ {
		pos := pos0 + t
		m.storeRaw(st, l, pos, in.kv[t*m.hd:(t+1)*m.hd])
		if L.ratio != 0 {
			if err := m.compress(st, l, L.comp, m.slots[l].comp, 0, in.ckv, in.csc, t, pos); err != nil {
				return nil, err
			}
		}
		if L.ratio == 4 {
			if err := m.compress(st, l, L.idx, m.slots[l].lid, 2*compRows(4)*compWidth(4, m.hd), in.ikv, in.isc, t, pos); err != nil {
				return nil, err
			}
		}
		m.attendToken(st, l, &in, t, pos, att[t*m.nh*m.hd:(t+1)*m.nh*m.hd], &rr)
	}
	return m.outProj(L, att, n)
}

// rope is the rotation of layer l's heads and kv: compress_rope_freq_base
// on compressed layers, rope.freq_base on the others.
func (m *Model) rope(l int) angles {
	if m.layers[l].ratio != 0 {
		return m.ropeCmp
	}
	return m.ropeRaw
}

// project computes q, kv and, on compressed layers, the compressors' and
// indexer's inputs for the n tokens of h.
func (m *Model) project(L *layer, h []float32, n, pos0, l int) (attnIn, error) {
	hp := m.d.HParams
	in := attnIn{n: n, pos0: pos0, l: l}
	qr, hd, nh := hp.MLA.QLoraRank, m.hd, m.nh
	mm := func(w *model.Weight, x []float32, rows int) ([]float32, error) {
		y := make([]float32, n*rows)
		return y, model.MatMul(m.pool, w, x, n, y)
	}
	var err error
	if in.qr, err = mm(&L.wqA, h, qr); err != nil {
		return in, err
	}
	model.NormRows(in.qr, in.qr, n, m.eps, L.qaNorm)
	if in.q, err = mm(&L.wqB, in.qr, nh*hd); err != nil {
		return in, err
	}
	for r := 0; r < n*nh; r++ {
		model.RMSNorm(in.q[r*hd:(r+1)*hd], in.q[r*hd:(r+1)*hd], m.eps, nil)
	}
	if in.kv, err = mm(&L.wkv, h, hd); err != nil {
		return in, err
	}
	model.NormRows(in.kv, in.kv, n, m.eps, L.kvNorm)
	rp := m.rope(l)
	cs := make([]float32, rp.TableLen())
	for t := 0; t < n; t++ {
		rp.Angles(pos0+t, cs)
		for i := 0; i < nh; i++ {
			rotate(in.q[(t*nh+i)*hd+m.nope:(t*nh+i+1)*hd], cs, 1)
		}
		rotate(in.kv[t*hd+m.nope:(t+1)*hd], cs, 1)
	}
	if L.ratio == 0 {
		return in, nil
	}
	cw := compWidth(L.ratio, hd)
	if in.ckv, err = mm(&L.comp.wkv, h, cw); err != nil {
		return in, err
	}
	if in.csc, err = mm(&L.comp.wgate, h, cw); err != nil {
		return in, err
	}
	if L.ratio != 4 {
		return in, nil
	}
	return in, m.projectIndexer(L, h, &in)
}

// projectIndexer computes the indexer's compressor rows, its queries
// (rotated at the token's position, then Hadamard-transformed) and its
// head weights.
func (m *Model) projectIndexer(L *layer, h []float32, in *attnIn) error {
	n, id, ih := in.n, m.own.IdxDim, m.own.IdxHeads
	in.ikv, in.isc = make([]float32, n*2*id), make([]float32, n*2*id)
	in.iq, in.iw = make([]float32, n*ih*id), make([]float32, n*ih)
	for _, p := range []struct {
		w *model.Weight
		x []float32
		y []float32
	}{{&L.idx.wkv, h, in.ikv}, {&L.idx.wgate, h, in.isc}, {&L.idxQB, in.qr, in.iq}, {&L.idxProj, h, in.iw}} {
		if err := model.MatMul(m.pool, p.w, p.x, n, p.y); err != nil {
			return err
		}
	}
	scale := 1 / float32(math.Sqrt(float64(float32(id*ih))))
	for i := range in.iw {
		in.iw[i] *= scale
	}
	cs := make([]float32, m.ropeCmp.TableLen())
	nr := m.nrot
	for t := 0; t < n; t++ {
		m.ropeCmp.Angles(in.pos0+t, cs)
		for i := 0; i < ih; i++ {
			head := in.iq[(t*ih+i)*id : (t*ih+i+1)*id]
			rotate(head[id-nr:], cs, 1)
		}
	}
	fwht(in.iq, fwhtSize(id))
	return nil
}

// rotate applies ggml's "normal" RoPE to x's pairs (2i, 2i+1) from the
// table cs (cos, sin per pair); sign −1 rotates back (ggml_rope_ext_back).
func rotate(x, cs []float32, sign float32) {
	for i := 0; i < len(cs)/2; i++ {
		c, s := cs[2*i], sign*cs[2*i+1]
		x0, x1 := x[2*i], x[2*i+1]
		x[2*i] = float32(x0*c) - float32(x1*s)
		x[2*i+1] = float32(x0*s) + float32(x1*c)
	}
}

// fwhtSize is the Hadamard block llama.cpp uses for rows of width w: the
// largest power of two from 64 up that divides w.
func fwhtSize(w int) int {
	n := fwhtMin
	for w%(2*n) == 0 {
		n *= 2
	}
	return n
}

// fwht transforms every n-wide block of x as ggml's fwht op: scaled by
// 1/√n, then the butterflies (u+v, u−v) from stride 1 up.
func fwht(x []float32, n int) {
	scale := 1 / float32(math.Sqrt(float64(n)))
	for o := 0; o+n <= len(x); o += n {
		r := x[o : o+n]
		for i := range r {
			r[i] *= scale
		}
		for ln := 1; ln < n; ln <<= 1 {
			for i := 0; i < n; i += 2 * ln {
				for j := 0; j < ln; j++ {
					u, v := r[i+j], r[i+ln+j]
					r[i+j], r[i+ln+j] = u+v, u-v
				}
			}
		}
	}
}

// storeRaw writes position pos's kv row into layer l's raw ring.
func (m *Model) storeRaw(st *model.State, l, pos int, kv []float32) {
	ring := st.Recurrent(m.slots[l].fixed)
	w := m.geom.window
	row := ring[(pos%w)*m.hd : (pos%w+1)*m.hd]
	copy(row, kv)
	roundKV(st, row)
}

// compress keeps token t's compressor rows (kv, and score plus the
// position's ape row) in layer l's pending rows at offset off of its fixed
// slot (after the raw ring), and when pos ends a block writes the block's
// compressed row to slot.
func (m *Model) compress(st *model.State, l int, c *compressor, slot, off int, kvs, scs []float32, t, pos int) error {
	ratio := m.layers[l].ratio
	R, cw := compRows(ratio), compWidth(ratio, c.width)
	fixed := st.Recurrent(m.slots[l].fixed)[m.geom.window*m.hd+off:]
	kvRing, scRing := fixed[:R*cw], fixed[R*cw:2*R*cw]
	row := pos % R
	copy(kvRing[row*cw:(row+1)*cw], kvs[t*cw:(t+1)*cw])
	sc := scRing[row*cw : (row+1)*cw]
	copy(sc, scs[t*cw:(t+1)*cw])
	ape := make([]float32, cw)
	if err := model.DequantizeRow(c.ape.Type, c.ape.Data, cw, pos%ratio, ape); err != nil {
		return fmt.Errorf("%s row %d: %w", c.ape.Name, pos%ratio, err)
	}
	for i := range sc {
		sc[i] += ape[i]
	}
	if (pos+1)%ratio != 0 {
		return nil
	}
	start := pos + 1 - ratio
	comp := m.pool2(c, kvRing, scRing, R, cw, ratio, start)
	model.RMSNorm(comp, comp, m.eps, c.norm)
	cs := make([]float32, m.ropeCmp.TableLen())
	m.ropeCmp.Angles(start, cs)
	rotate(comp[c.width-m.nrot:], cs, 1)
	if slot == m.slots[l].lid {
		fwht(comp, fwhtSize(c.width))
	}
	st.Store(slot, pos/ratio, comp, nil)
	return nil
}

// pool2 is a block's compressed row: per channel, the softmax over the
// block's positions (ratio 128) or over the previous block's first half
// and this block's second half (ratio 4; none before position 0) of the
// scores, weighing the kv values, summed in double as ggml's sum_rows.
func (m *Model) pool2(c *compressor, kvRing, scRing []float32, R, cw, ratio, start int) []float32 {
	w := c.width
	type src struct{ pos, col int }
	var srcs []src
	if ratio == 4 {
		for j := 0; j < ratio; j++ {
			srcs = append(srcs, src{start - ratio + j, 0})
		}
		for j := 0; j < ratio; j++ {
			srcs = append(srcs, src{start + j, w})
		}
	} else {
		for j := 0; j < ratio; j++ {
			srcs = append(srcs, src{start + j, 0})
		}
	}
	comp := make([]float32, w)
	s, v := make([]float32, len(srcs)), make([]float32, len(srcs))
	for ch := 0; ch < w; ch++ {
		for j, p := range srcs {
			if p.pos < 0 {
				s[j], v[j] = negInf, 0
				continue
			}
			o := (p.pos%R)*cw + p.col + ch
			s[j], v[j] = scRing[o], kvRing[o]
		}
		model.Softmax(s)
		var sum float64
		for j := range s {
			sum += float64(v[j] * s[j])
		}
		comp[ch] = float32(sum)
	}
	return comp
}

// attendToken is token t's attention (every head) at position pos over the
// window's raw rows and the compressed rows it sees, rotated back, into
// out (n_head × head_dim).
func (m *Model) attendToken(st *model.State, l int, in *attnIn, t, pos int, out []float32, rr *rowReader) {
	L, hd := &m.layers[l], m.hd
	w := m.geom.window
	lo := max(0, pos-w+1)
	var blocks []int
	switch L.ratio {
	case 128:
		for b := 0; b < (pos+1)/128; b++ {
			blocks = append(blocks, b)
		}
	case 4:
		blocks = m.topBlocks(st, l, in, t, pos, rr)
	}
	nr := pos - lo + 1
	keys := make([]float32, (nr+len(blocks))*hd)
	ring := st.Recurrent(m.slots[l].fixed)
	for j := lo; j <= pos; j++ {
		copy(keys[(j-lo)*hd:(j-lo+1)*hd], ring[(j%w)*hd:(j%w+1)*hd])
	}
	for i, b := range blocks {
		rr.read(st, m.slots[l].comp, b, hd, keys[(nr+i)*hd:(nr+i+1)*hd])
	}
	n := nr + len(blocks)
	scores := make([]float32, n)
	rp := m.rope(l)
	cs := make([]float32, rp.TableLen())
	rp.Angles(pos, cs)
	for h := 0; h < m.nh; h++ {
		q := in.q[(t*m.nh+h)*hd : (t*m.nh+h+1)*hd]
		o := out[h*hd : (h+1)*hd]
		kernels.AttendF32(q, keys, keys, hd, n, kernels.Head{Scale: m.kqScale(), Sink: L.sinks[h], HasSink: true}, scores, o)
		rotate(o[m.nope:], cs, -1)
	}
}

// topBlocks is the indexer's choice for token t at pos: the top_k of the
// blocks it completed by Σ_h relu(q_h·k_b)·w_h, in block order.
func (m *Model) topBlocks(st *model.State, l int, in *attnIn, t, pos int, rr *rowReader) []int {
	nb := (pos + 1) / 4
	if nb == 0 {
		return nil
	}
	id, ih := m.own.IdxDim, m.own.IdxHeads
	k := make([]float32, id)
	score := make([]float32, nb)
	for b := 0; b < nb; b++ {
		rr.read(st, m.slots[l].lid, b, id, k)
		var s float64
		for h := 0; h < ih; h++ {
			q := in.iq[(t*ih+h)*id : (t*ih+h+1)*id]
			var dot float32
			for i, v := range q {
				dot += float32(v * k[i])
			}
			s += float64(relu(dot) * in.iw[t*ih+h])
		}
		score[b] = float32(s)
	}
	ids := partialTop(score, min(nb, m.own.IdxTopK))
	sort.Ints(ids)
	return ids
}

// partialTop is the set ggml's top_k op chooses: libstdc++'s
// std::partial_sort of the indices by score, descending — a heap select
// whose ties go the way its heap moves them (the blocks' scores tie
// exactly when every head's relu is 0).
func partialTop(score []float32, k int) []int {
	ids := make([]int, len(score))
	for i := range ids {
		ids[i] = i
	}
	comp := func(a, b int) bool { return score[a] > score[b] }
	heap := ids[:k]
	for p := (k - 2) / 2; k >= 2 && p >= 0; p-- {
		adjustHeap(heap, p, heap[p], comp)
	}
	for i := k; i < len(ids); i++ {
		if comp(ids[i], heap[0]) {
			v := ids[i]
			ids[i] = heap[0]
			adjustHeap(heap, 0, v, comp)
		}
	}
	return append([]int(nil), heap...)
}

// adjustHeap is libstdc++'s std::__adjust_heap (with its __push_heap):
// the hole at hole of heap h sinks to a leaf along the larger children,
// then v rises from there.
func adjustHeap(h []int, hole, v int, comp func(a, b int) bool) {
	n, top, child := len(h), hole, hole
	for child < (n-1)/2 {
		child = 2 * (child + 1)
		if comp(h[child], h[child-1]) {
			child--
		}
		h[hole] = h[child]
		hole = child
	}
	if n&1 == 0 && child == (n-2)/2 {
		child = 2 * (child + 1)
		h[hole] = h[child-1]
		hole = child - 1
	}
	parent := (hole - 1) / 2
	for hole > top && comp(h[parent], v) {
		h[hole] = h[parent]
		hole = parent
		parent = (hole - 1) / 2
	}
	h[hole] = v
}

// outProj is the grouped low-rank output: each group of heads through its
// Wo_a matrix, the groups' results through Wo_b.
func (m *Model) outProj(L *layer, att []float32, n int) ([]float32, error) {
	g, r := m.own.OGroups, m.own.OLora
	gd := m.nh * m.hd / g
	oa := make([]float32, n*g*r)
	xs, ys := make([]float32, n*gd), make([]float32, n*r)
	for gi := 0; gi < g; gi++ {
		for t := 0; t < n; t++ {
			copy(xs[t*gd:(t+1)*gd], att[t*m.nh*m.hd+gi*gd:])
		}
		if err := model.MatMul(m.pool, &L.woA[gi], xs, n, ys); err != nil {
			return nil, err
		}
		for t := 0; t < n; t++ {
			copy(oa[t*g*r+gi*r:t*g*r+(gi+1)*r], ys[t*r:(t+1)*r])
		}
	}
	out := make([]float32, n*m.E)
	return out, model.MatMul(m.pool, &L.woB, oa, n, out)
}
