package stages

import (
	"context"
	"fmt"
	"time"

	"github.com/pipe-engine/pipe/model"
)

// Score feeds tokens as a new sequence — the KV cache is rewound to
// position 0 — in forward passes of up to batch tokens (<= 0: PrefillChunk;
// 1: one token a pass, as decode steps run, the passes the lossy routing
// modes apply to), and hands fn the
// logits of every position from `from` on, in order (a row is valid only
// during the call). A pass wholly before `from` computes no logit rows
// beyond its last. Like Prefill it is a prompt pass: its expert I/O is not
// charged to the next generated token. Perplexity and KL divergence (package
// quality) are computed from it.
func (s *Session) Score(ctx context.Context, tokens []int32, from, batch int, fn func(pos int, logits []float32) error) (time.Duration, error) {
	if len(tokens) > s.State.NCtx {
		return 0, fmt.Errorf("%w: %d tokens to score, the context holds %d", model.ErrContextFull, len(tokens), s.State.NCtx)
	}
	defer s.beginPrompt()()
	s.State.Rewind(0)
	t0 := time.Now()
	err := s.score(ctx, tokens, from, batch, fn)
	return time.Since(t0), err
}

func (s *Session) score(ctx context.Context, tokens []int32, from, batch int, fn func(pos int, logits []float32) error) error {
	if batch <= 0 || batch > PrefillChunk {
		batch = PrefillChunk
	}
	for i := 0; i < len(tokens); i += batch {
		if err := ctx.Err(); err != nil {
			return err
		}
		if batch == 1 {
			s.eng.setStep(i + 1) // the cache's batch bookkeeping: one token, one step
		}
		chunk := tokens[i:min(i+batch, len(tokens))]
		all := i+len(chunk) > from
		rows, err := s.eng.Forward(ctx, s.State, chunk, all)
		if err != nil {
			return err
		}
		if !all {
			continue
		}
		for j, r := range rows {
			if p := i + j; p >= from {
				if err := fn(p, r); err != nil {
					return err
				}
			}
		}
	}
	return nil
}
