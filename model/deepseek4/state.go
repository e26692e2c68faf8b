package deepseek4

// state.go: where one sequence's deepseek4 state lives in a model.State.
// Every layer has a fixed part (a recurrent slot of float32): the raw
// (uncompressed) KV rows of the last `window` positions, a ring indexed by
// position, and on compressed layers the compressor's pending rows (kv and
// score of the last 2·4 positions, twice the head wide, on ratio-4 layers
// — with the indexer compressor's beside them — or of the last 128
// positions on ratio-128 layers), also indexed by position. A compressed
// layer also has one K-only KV slot of the head's width whose row b is the
// compressed block b, and a ratio-4 layer one of the indexer's width for
// its indexer blocks. Rows of those slots are read back through
// State.Attend over one row (a softmax of one score is exactly 1).

import (
	"github.com/pipe-engine/pipe/model"
	"github.com/pipe-engine/pipe/quant"
)

// geometry is what the state layout needs from the hyper-parameters.
type geometry struct {
	own    HParams
	nLayer int
	hd     int // a head's (and the shared KV row's) width
	window int
}

func geometryOf(d *model.Desc) geometry {
	return geometry{own: own(d), nLayer: d.HParams.NLayer, hd: d.HParams.HeadDim, window: max(d.HParams.SlidingWindow, 1)}
}

// compRows is the compressor's pending rows kept for a ratio: two blocks
// for the overlapping ratio 4, one for 128.
func compRows(ratio int) int {
	if ratio == 4 {
		return 2 * ratio
	}
	return ratio
}

// compWidth is the width of a compressor's kv (and score) rows: twice the
// head for the overlapping ratio 4.
func compWidth(ratio, hd int) int {
	if ratio == 4 {
		return 2 * hd
	}
	return hd
}

// fixedFloats is layer l's fixed part: the raw ring and the compressors'
// pending kv and score rows.
func (g geometry) fixedFloats(l int) int {
	n := g.window * g.hd
	r := g.own.ratio(l)
	if r == 0 {
		return n
	}
	n += 2 * compRows(r) * compWidth(r, g.hd)
	if r == 4 {
		n += 2 * compRows(r) * compWidth(r, g.own.IdxDim)
	}
	return n
}

// rowWidth is the compressed rows layer l keeps per position (as
// allocated: one per position, though one per block is used).
func (g geometry) rowWidth(l int) int {
	switch g.own.ratio(l) {
	case 4:
		return g.hd + g.own.IdxDim
	case 128:
		return g.hd
	}
	return 0
}

// slots are the model.State layers of each model layer.
type slots struct {
	fixed, comp, lid int // comp, lid: -1 when the layer has none
}

// fixedSlot is a recurrent slot of n floats.
type fixedSlot int

func (fixedSlot) Mix(*model.Pass, *model.State, int, []float32) error { return nil }
func (f fixedSlot) StateFloats() int                                  { return int(f) }

// layout is the State layers of every model layer and the decoder that
// allocates them.
func (g geometry) layout() ([]slots, *model.Decoder) {
	d := &model.Decoder{}
	kOnly := func(w int) int {
		d.Layers = append(d.Layers, model.Layer{Attn: model.Attention{Geom: model.Geom{NHead: 1, NHeadKV: 1, HeadDim: w}, Latent: &model.Latent{}}})
		return len(d.Layers) - 1
	}
	out := make([]slots, g.nLayer)
	for l := range out {
		d.Layers = append(d.Layers, model.Layer{Mixer: fixedSlot(g.fixedFloats(l))})
		out[l] = slots{fixed: len(d.Layers) - 1, comp: -1, lid: -1}
		if r := g.own.ratio(l); r != 0 {
			out[l].comp = kOnly(g.hd)
			if r == 4 {
				out[l].lid = kOnly(g.own.IdxDim)
			}
		}
	}
	return out, d
}

// rowReader reads rows of a K-only slot (through State.Attend over one
// row, whose output is the row itself).
type rowReader struct {
	zeros, score []float32
}

func (r *rowReader) read(st *model.State, slot, pos, width int, out []float32) {
	if len(r.zeros) < width {
		r.zeros = make([]float32, width)
		r.score = make([]float32, 1)
	}
	a := model.AttnArgs{Layer: slot, Dim: width, Lo: pos, Hi: pos, Scale: 1}
	st.Attend(&a, r.zeros, r.score, out[:width])
}

// roundKV rounds a row to what an F16 cache keeps (nothing for F32).
func roundKV(st *model.State, row []float32) {
	if st.Type == model.KVF32 {
		return
	}
	for i, v := range row {
		row[i] = quant.FP16ToFP32(quant.FP32ToFP16(v))
	}
}
