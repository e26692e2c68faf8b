package main

import (
	"fmt"

	"github.com/pipe-engine/pipe/gguf"
	"github.com/pipe-engine/pipe/model"
	"github.com/pipe-engine/pipe/serve"
)

// EmbeddingFlags are pipe serve's embeddings options, llama-server's
// --embedding, --pooling and --embd-normalize.
type EmbeddingFlags struct {
	Embedding     bool   `name:"embedding" aliases:"embeddings" help:"Answer POST /v1/embeddings, /embeddings and /embedding (the output norm's rows, pooled by --pooling), as llama-server's; without it they are 501. Completions still work." group:"Server"`
	Pooling       string `name:"pooling" help:"How a prompt's rows become its embedding: none (every token's row; /v1/embeddings refuses it), mean, cls (the first token's) or last; default: the model's <arch>.pooling_type, else none, as llama-server's. rank (a reranker's head) is refused." placeholder:"none|mean|cls|last" group:"Server"`
	EmbdNormalize int    `name:"embd-normalize" help:"Normalisation of a pooled embedding when a request sets no embd_normalize: -1 none, 0 max absolute to int16, 1 taxicab, 2 Euclidean, >2 p-norm, as llama-server's." default:"2" group:"Server"`
}

// check refuses a --pooling pipe does not compute (rank, or a name
// llama.cpp does not have) before the model loads.
func (e *EmbeddingFlags) check() error {
	if e.Pooling == "" {
		return nil
	}
	if _, err := model.ParsePooling(e.Pooling); err != nil {
		return fmt.Errorf("%w: --pooling: %w", errFlag, err)
	}
	return nil
}

// pooling is --pooling, else the model's <arch>.pooling_type (llama.cpp's
// enum: 0 none, 1 mean, 2 cls, 3 last, 4 rank), else none.
func (e *EmbeddingFlags) pooling(f *gguf.File) (model.Pooling, error) {
	if e.Pooling != "" {
		p, err := model.ParsePooling(e.Pooling)
		if err != nil {
			return 0, fmt.Errorf("%w: --pooling: %w", errFlag, err)
		}
		return p, nil
	}
	key := f.Architecture() + ".pooling_type"
	if _, ok := f.Get(key); !ok {
		return model.PoolNone, nil
	}
	v, err := f.GetUint(key)
	if err != nil {
		return 0, fmt.Errorf("%w: %s: %w", model.ErrBadModel, key, err)
	}
	if v > uint64(model.PoolLast) {
		return 0, fmt.Errorf("%w: %s %d: the model's pooling is rank or unknown (pipe computes none, mean, cls or last); give --pooling", model.ErrPooling, key, v)
	}
	return model.Pooling(v), nil
}

// apply sets o's embeddings options for the model file f.
func (e *EmbeddingFlags) apply(o *serve.Options, f *gguf.File) error {
	p, err := e.pooling(f)
	if err != nil {
		return err
	}
	o.Embeddings, o.Pooling, o.EmbdNormalize = e.Embedding, p, &e.EmbdNormalize
	return nil
}
