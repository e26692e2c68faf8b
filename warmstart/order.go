package warmstart

// Order is the order in which a warm start reads its keys: layer by layer,
// each layer's keys in their given order (hottest first), starting at the
// layer after the one the pipeline last looked up and wrapping around, so
// the reads arrive ahead of the computation and a layer it has already
// passed is read last (for the next token). It is not safe for concurrent
// use.
type Order struct {
	layers [][]Key
	left   int
}

// NewOrder queues keys by layer.
func NewOrder(keys []Key) *Order {
	q := &Order{left: len(keys)}
	for _, k := range keys {
		if k.Layer >= len(q.layers) {
			q.layers = append(q.layers, make([][]Key, k.Layer+1-len(q.layers))...)
		}
		q.layers[k.Layer] = append(q.layers[k.Layer], k)
	}
	return q
}

// Next pops the first key of the first non-empty layer after last (the
// layer the pipeline looked up last; -1 before any lookup), in cyclic order.
// ok is false once every key was popped.
func (q *Order) Next(last int) (k Key, ok bool) {
	if q.left == 0 {
		return Key{}, false
	}
	n := len(q.layers)
	for i := 1; i <= n; i++ {
		l := ((last+i)%n + n) % n
		if row := q.layers[l]; len(row) > 0 {
			q.layers[l] = row[1:]
			q.left--
			return row[0], true
		}
	}
	return Key{}, false
}
