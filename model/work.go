package model

// work.go: the work of a decode token that is not weight streaming, as a
// family counts it (Family.TokenWork): attention over the KV cache, the
// recurrent mixers' state and the short convolutions.

// TokenWork is the state one decode token at a context depth reads and
// writes beside the weights, in elements, by block kind.
type TokenWork struct {
	// Attention is the KV cache elements attention reads: per attention
	// layer, positions × its cached row (K and V of the KV heads).
	Attention int64 `json:"attention"`
	// Recurrent is the recurrent state elements read and written: per
	// recurrent layer its state (for a gated delta-net, an S×S matrix per
	// value head) once read and once written.
	Recurrent int64 `json:"recurrent"`
	// Conv is the short convolutions' elements: per convolution, its
	// kernel length × its channels.
	Conv int64 `json:"conv"`
}

// Total is the sum of the three kinds.
func (w TokenWork) Total() int64 { return w.Attention + w.Recurrent + w.Conv }

// AttentionWork is the KV elements layers attention layers of a cached
// row of row elements per position (K and V together) read at a depth of
// positions positions.
func AttentionWork(layers, row, positions int) int64 {
	return int64(layers) * int64(row) * int64(max(positions, 0))
}

// HybridWork is the work of a model whose layers keep either K and V rows
// of its KV heads (n_head_kv × head_dim each) per position or, where
// recurrent(il), a recurrent state of recFloats read and written per token
// and a convolution of convFloats elements.
func HybridWork(hp *HParams, recurrent func(il int) bool, recFloats, convFloats, positions int) TokenWork {
	nRec := 0
	for il := 0; il < hp.NLayer; il++ {
		if recurrent(il) {
			nRec++
		}
	}
	return TokenWork{
		Attention: AttentionWork(hp.NLayer-nRec, 2*hp.NHeadKV*hp.HeadDim, positions),
		Recurrent: 2 * int64(nRec) * int64(recFloats),
		Conv:      int64(nRec) * int64(convFloats),
	}
}

// TokenWorkOf is d's family's TokenWork at a depth of positions (every
// layer attention, AttentionOnly's, for an architecture that is not
// registered).
func TokenWorkOf(d *Desc, positions int) TokenWork {
	if f, ok := Lookup(d.Arch); ok {
		return f.TokenWork(d, positions)
	}
	return AttentionOnly{}.TokenWork(d, positions)
}

// TokenWork implements Family: K and V of the KV heads in every layer.
func (AttentionOnly) TokenWork(d *Desc, positions int) TokenWork {
	hp := &d.HParams
	return TokenWork{Attention: AttentionWork(hp.NLayer, 2*hp.NHeadKV*hp.HeadDim, positions)}
}
