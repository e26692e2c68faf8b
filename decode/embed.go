package decode

// embed.go: a prompt's embeddings (llama-server's --embedding). The prompt
// runs on a state of its own, in embeddings mode (model.State.Embeddings:
// the output norm's rows, no LM head), so no session's cache changes; the
// rows are pooled by model.Pool.

import (
	"context"
	"time"

	"github.com/pipe-engine/pipe/model"
	"github.com/pipe-engine/pipe/stages"
)

// Embedding is what Embed computed for one prompt.
type Embedding struct {
	// Rows: one per prompt token (model.PoolNone), else the pooled row.
	Rows [][]float32
	// Passes are the forward passes the prompt took (llama_decode calls);
	// Prefill their time.
	Passes  int
	Prefill time.Duration
}

// Embed returns the embeddings of ids under pooling p, not normalised
// (model.Normalize). The prompt is fed on a fresh state of len(ids)
// positions, in passes of at most ubatch tokens (<= 0: the engine's
// prefill chunk). Nothing else may run a forward pass on the model
// meanwhile: a Session's caller holds it, and a Batch runs Embed through
// Batch.Exclusive.
func (m *Model) Embed(ctx context.Context, ids []int32, p model.Pooling, ubatch int) (Embedding, error) {
	if len(ids) == 0 {
		return Embedding{}, ErrEmptyPrompt
	}
	st, err := m.eng.NewSession(len(ids), m.o.KV)
	if err != nil {
		return Embedding{}, err
	}
	st.State.Embeddings = true
	rows, d, err := st.PrefillBy(ctx, ids, true, ubatch, nil)
	passes := passesOf(len(ids), ubatch)
	m.forwards.Add(int64(passes))
	if err != nil {
		return Embedding{}, err
	}
	pooled, err := model.Pool(rows, p)
	if err != nil {
		return Embedding{}, err
	}
	return Embedding{Rows: pooled, Passes: passes, Prefill: d}, nil
}

// passesOf is the forward passes PrefillBy makes for n tokens in batches of
// batch (<= 0: the prefill chunk), each in passes of at most the chunk.
func passesOf(n, batch int) int {
	chunk := stages.PrefillChunk
	if batch <= 0 {
		batch = chunk
	}
	k := 0
	for b := 0; b < n; b += batch {
		end := min(b+batch, n)
		k += (end - b + chunk - 1) / chunk
	}
	return k
}

// Exclusive runs f on the scheduler goroutine between two passes, with the
// model to itself (Model.Embed beside a Batch): the slots' generations
// wait for it. A ctx that ends before f starts returns its error.
func (b *Batch) Exclusive(ctx context.Context, f func() error) error {
	c := &ctl{id: -1, f: func(*slot) error { return f() }, done: make(chan error, 1)}
	select {
	case b.ctl <- c:
	case <-ctx.Done():
		return ctx.Err()
	case <-b.quit:
		return ErrBatchClosed
	}
	return <-c.done
}
