package model

// NewKV allocates a KV cache of nCtx positions with one layer per entry of
// widths, each holding K and V rows of that many floats.
func NewKV(nCtx int, widths []int, t KVType) (*State, error) {
	return NewHybrid(nCtx, widths, make([]int, len(widths)), t)
}

// NewHybrid allocates the state of a model whose layer l holds either K and
// V rows of widths[l] floats for nCtx positions, or (widths[l] == 0) a
// recurrent state of rec[l] float32s, zeroed.
func NewHybrid(nCtx int, widths, rec []int, t KVType) (*State, error) {
	return newState(nCtx, widths, rec, nil, nil, t)
}
