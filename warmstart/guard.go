package warmstart

// Guard keeps a warm start's entries in the expert cache until the pipeline
// has passed their layer once. A prefill walks the layers in order and a
// prompt can route to more experts than the cache holds, so its misses need
// slots while the warm start's experts of the layers ahead wait for their
// turn; a policy that ranks an expert by its uses would evict those
// (admitted, never used yet) first, and the prompt would read them again a
// few layers later. So a warm entry is protected — a victim only when no
// unprotected entry is eligible — until the batches move from its layer to
// another (the lookups of its layer have been made, all waves of them): then
// it is an ordinary entry, used or not.
//
// The cache owns the entries and their protected marks; Guard keeps the
// bookkeeping of which keys to release when. Its zero value is ready; it is
// not safe for concurrent use (the cache calls it under its lock).
type Guard struct {
	byLayer [][]Key // protected keys by layer (one evicted since may linger: the cache skips it)
	n       int     // keys in byLayer
	cur     struct{ step, layer int }
	started bool
}

// Protect records k as protected until the pipeline passes its layer. It
// reports false (nothing recorded) for a key without a layer (Layer < 0).
func (g *Guard) Protect(k Key) bool {
	if k.Layer < 0 {
		return false
	}
	for len(g.byLayer) <= k.Layer {
		g.byLayer = append(g.byLayer, nil)
	}
	g.byLayer[k.Layer] = append(g.byLayer[k.Layer], k)
	g.n++
	return true
}

// Pass is called at every lookup batch (step, layer). When the batches leave
// a (step, layer), it returns the keys of the layer left, which lose their
// protection; another wave of the same layer's lookups releases nothing.
// The returned slice is valid until the next Protect.
func (g *Guard) Pass(step, layer int) []Key {
	if g.started && g.cur.step == step && g.cur.layer == layer {
		return nil
	}
	var keys []Key
	if g.started && g.cur.layer >= 0 && g.cur.layer < len(g.byLayer) {
		keys = g.byLayer[g.cur.layer]
		g.n -= len(keys)
		g.byLayer[g.cur.layer] = keys[:0]
	}
	g.started = true
	g.cur.step, g.cur.layer = step, layer
	return keys
}

// Active reports whether any key is protected.
func (g *Guard) Active() bool { return g.n > 0 }
