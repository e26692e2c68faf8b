package model

// embed.go: embeddings as llama.cpp computes them. A State in embeddings
// mode (State.Embeddings) makes Forward return each token's output-norm
// row — the hidden state the LM head would read, llama.cpp's t_embd /
// "result_norm" — instead of its logits; Pool turns a sequence's rows into
// its embedding by llama_pooling_type (build_pooling in llama-graph.cpp),
// and Normalize is common_embd_normalize.

import (
	"errors"
	"fmt"
	"math"
)

// Pooling is how a sequence's rows become its embedding (llama.cpp's
// llama_pooling_type; rank, a reranker's classification head, is not one
// of them).
type Pooling int

// The poolings.
const (
	PoolNone Pooling = iota // every token's row
	PoolMean                // the mean of the rows
	PoolCLS                 // the first token's row
	PoolLast                // the last token's row
)

// ErrPooling: a pooling name that is not none, mean, cls or last.
var ErrPooling = errors.New("unsupported pooling")

var poolNames = [...]string{PoolNone: "none", PoolMean: "mean", PoolCLS: "cls", PoolLast: "last"}

// String is the pooling's llama.cpp name.
func (p Pooling) String() string {
	if p < 0 || int(p) >= len(poolNames) {
		return fmt.Sprintf("Pooling(%d)", int(p))
	}
	return poolNames[p]
}

// ParsePooling reads llama.cpp's --pooling names; "rank" (a reranker's
// head, which pipe's models do not have) and anything else is ErrPooling.
func ParsePooling(s string) (Pooling, error) {
	for p, n := range poolNames {
		if s == n {
			return Pooling(p), nil
		}
	}
	if s == "rank" {
		return 0, fmt.Errorf("%w: rank (a reranker's classification head; pipe computes embeddings only: none, mean, cls or last)", ErrPooling)
	}
	return 0, fmt.Errorf("%w: %q (want none, mean, cls or last)", ErrPooling, s)
}

// Pool returns the embeddings of one sequence's rows (one per token, in
// order): every row for PoolNone (the rows themselves), else one row — the
// mean (each row times 1/n, summed in token order, as llama.cpp's product
// with its inp_mean column), the first row (cls) or the last. The pooled
// row is a new slice; rows are not modified.
func Pool(rows [][]float32, p Pooling) ([][]float32, error) {
	if len(rows) == 0 {
		return nil, errors.New("model: pooling of no rows")
	}
	switch p {
	case PoolNone:
		return rows, nil
	case PoolCLS:
		return [][]float32{append([]float32(nil), rows[0]...)}, nil
	case PoolLast:
		return [][]float32{append([]float32(nil), rows[len(rows)-1]...)}, nil
	case PoolMean:
		out := make([]float32, len(rows[0]))
		w := 1 / float32(len(rows))
		for _, r := range rows {
			if len(r) != len(out) {
				return nil, fmt.Errorf("model: pooling rows of %d and %d floats", len(out), len(r))
			}
			for i, v := range r {
				out[i] += float32(v * w) // rounded apart: no fused multiply-add on arm64
			}
		}
		return [][]float32{out}, nil
	}
	return nil, fmt.Errorf("%w: %v", ErrPooling, p)
}

// Normalize writes v scaled by its norm into dst (len(v) floats; dst may
// be v), as llama.cpp's common_embd_normalize: norm -1 none, 0 the largest
// magnitude mapped to 32760 (an int16 range), 2 Euclidean, any other p the
// p-norm. The sum is a float64 of float32 terms (squares as float32
// products), and a zero norm leaves zeros.
func Normalize(dst, v []float32, norm int) {
	sum := 0.0
	switch norm {
	case -1:
		sum = 1
	case 0:
		for _, x := range v {
			sum = max(sum, math.Abs(float64(x)))
		}
		sum /= 32760
	case 2:
		for _, x := range v {
			sum += float64(x * x)
		}
		sum = math.Sqrt(sum)
	default:
		for _, x := range v {
			sum += math.Pow(math.Abs(float64(x)), float64(norm))
		}
		sum = math.Pow(sum, 1/float64(norm))
	}
	scale := float32(0)
	if sum > 0 {
		scale = float32(1 / sum)
	}
	for i, x := range v {
		dst[i] = x * scale
	}
}
