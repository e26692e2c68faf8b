// Package quality measures what a model's output costs in quality, as
// llama.cpp's llama-perplexity does: perplexity over a text, and the KL
// divergence, top-1 agreement and perplexity ratio of one setting's logits
// against saved logits of another (a lossless base).
//
// It follows tools/perplexity/perplexity.cpp at llama.cpp commit 3f545becc
// in every number it prints:
//
//   - chunking: the text is tokenized once (BOS prepended when the vocabulary
//     adds one) and cut into ⌊tokens/n_ctx⌋ chunks of n_ctx tokens (at most
//     Options.Chunks); fewer than 2·n_ctx tokens is an error;
//   - each chunk is evaluated in a fresh context; when the vocabulary adds
//     BOS, the chunk's first token is replaced by BOS (not prepended);
//   - scoring: the logits of positions n_ctx/2 … n_ctx−2 score the token
//     after them, so n_ctx−1−n_ctx/2 tokens per chunk; perplexity is
//     exp(mean −log p) over every scored token so far, printed per chunk as
//     "[i]%.4f," and at the end as "Final estimate: PPL = %.4f +/- %.5f";
//   - the per-position arithmetic (softmax.go) rounds as the C++ does.
//
// The --kl-divergence-base file has llama-perplexity's format (basefile.go):
// a base saved by either program is read by the other.
//
// The model is an Evaluator; the package knows nothing of how logits are
// made, so `pipe perplexity` runs it on the streaming engine under whatever
// cap and lossy setting the user gives.
package quality

import (
	"context"
	"errors"
	"fmt"
	"io"
	"math"
	"time"
)

// Evaluator computes a model's logits.
type Evaluator interface {
	// Eval feeds tokens at positions 0, 1, … of a fresh context (nothing of
	// an earlier call is kept) and calls fn with the logits of every
	// position from `from` on, in order; a row is valid only during the call.
	Eval(ctx context.Context, tokens []int32, from int, fn func(pos int, logits []float32) error) error
}

// Options configure Perplexity and KLDivergence.
type Options struct {
	// NCtx is the chunk length (-c); KLDivergence takes the base's.
	NCtx int
	// Chunks is the most chunks to evaluate (<= 0: all; --chunks).
	// KLDivergence evaluates every chunk of the base.
	Chunks int
	// AddBOS: the vocabulary adds BOS, which replaces each chunk's first
	// token.
	AddBOS bool
	BOS    int32
	// NVocab is the length of a logit row.
	NVocab int
	// Out receives llama-perplexity's result lines (its stdout).
	Out io.Writer
	// OnChunk, if set, is called after each chunk.
	OnChunk func(ChunkInfo)
}

// ChunkInfo is a finished chunk, for progress.
type ChunkInfo struct {
	Chunk, Chunks int           // 1-based chunk number and the total
	PPL           float64       // over every token scored so far
	Elapsed       time.Duration // since the first chunk started
}

// Sentinel errors.
var (
	// ErrTooShort: the text has fewer than 2·n_ctx tokens.
	ErrTooShort = errors.New("text too short for the context")
	// ErrOptions: a bad option or a logit row that does not fit them.
	ErrOptions = errors.New("bad perplexity options")
)

// Result is a perplexity run's outcome.
type Result struct {
	Chunks, NCtx int
	Tokens       int     // scored tokens
	PPL          float64 // exp of the mean negative log-likelihood
	PPLErr       float64 // its uncertainty, as llama-perplexity prints it (0: undefined)
	Elapsed      time.Duration
}

// first is the first scored position of a chunk of n tokens.
func first(n int) int { return n / 2 }

func (o *Options) check() error {
	switch {
	case o.NCtx < 4:
		return fmt.Errorf("%w: context %d (want >= 4)", ErrOptions, o.NCtx)
	case o.NVocab < 1:
		return fmt.Errorf("%w: vocabulary %d", ErrOptions, o.NVocab)
	case o.AddBOS && (o.BOS < 0 || int(o.BOS) >= o.NVocab):
		return fmt.Errorf("%w: BOS %d outside the vocabulary of %d", ErrOptions, o.BOS, o.NVocab)
	}
	return nil
}

// chunker evaluates chunk after chunk and hands each scored position's
// logits and target token to score.
type chunker struct {
	ev     Evaluator
	o      *Options
	tokens []int32 // the whole text
	buf    []int32 // one chunk, BOS substituted
	t0     time.Time
}

// run evaluates chunk i (0-based), calling score(row, target) for each of
// its scored positions in order.
func (c *chunker) run(ctx context.Context, i int, score func(row []float32, target int32) error) error {
	n := c.o.NCtx
	start := i * n
	c.buf = append(c.buf[:0], c.tokens[start:start+n]...)
	if c.o.AddBOS {
		c.buf[0] = c.o.BOS
	}
	last := n - 2
	err := c.ev.Eval(ctx, c.buf, first(n), func(pos int, row []float32) error {
		if pos > last {
			return nil // the last position's logits score nothing
		}
		if len(row) != c.o.NVocab {
			return fmt.Errorf("%w: a logit row of %d, the vocabulary has %d", ErrOptions, len(row), c.o.NVocab)
		}
		t := c.tokens[start+pos+1]
		if t < 0 || int(t) >= c.o.NVocab {
			return fmt.Errorf("%w: token %d outside the vocabulary of %d", ErrOptions, t, c.o.NVocab)
		}
		return score(row, t)
	})
	if err != nil {
		return fmt.Errorf("chunk %d: %w", i+1, err)
	}
	return nil
}

func (c *chunker) report(i, chunks int, ppl float64) {
	if c.o.OnChunk != nil {
		c.o.OnChunk(ChunkInfo{Chunk: i + 1, Chunks: chunks, PPL: ppl, Elapsed: time.Since(c.t0)})
	}
}

// Perplexity evaluates tokens (the text, tokenized with BOS when the
// vocabulary adds one) chunk by chunk and prints llama-perplexity's lines
// to o.Out. With save set, every scored position's log-probabilities go to
// it as a --kl-divergence-base file (and −log p is computed the way
// llama-perplexity computes it when it saves, in float32).
func Perplexity(ctx context.Context, ev Evaluator, tokens []int32, o Options, save io.Writer) (Result, error) {
	if err := o.check(); err != nil {
		return Result{}, err
	}
	n := o.NCtx
	if len(tokens) < 2*n {
		return Result{}, fmt.Errorf("%w: you need at least %d tokens to evaluate perplexity with a context of %d; the text tokenizes to only %d",
			ErrTooShort, 2*n, n, len(tokens))
	}
	chunks := len(tokens) / n
	if o.Chunks > 0 {
		chunks = min(chunks, o.Chunks)
	}
	res := Result{Chunks: chunks, NCtx: n}
	var bw *baseWriter
	lp := LogProbs{Q: make([]uint16, o.NVocab)}
	if save != nil {
		var err error
		if bw, err = newBaseWriter(save, n, o.NVocab, chunks, tokens); err != nil {
			return res, fmt.Errorf("--kl-divergence-base: %w", err)
		}
	}
	c := &chunker{ev: ev, o: &o, tokens: tokens, t0: time.Now()}
	var sum, sum2 float64
	count := 0
	for i := 0; i < chunks; i++ {
		err := c.run(ctx, i, func(row []float32, t int32) error {
			var v float64
			if bw != nil {
				v = quantize(row, t, &lp)
				if err := bw.row(&lp); err != nil {
					return fmt.Errorf("--kl-divergence-base: %w", err)
				}
			} else {
				v = nll(row, t)
			}
			sum += v
			sum2 += float64(v * v)
			return nil
		})
		if err != nil {
			return res, err
		}
		count += n - first(n) - 1
		ppl := math.Exp(sum / float64(count))
		if _, err := fmt.Fprintf(o.Out, "[%d]%.4f,", i+1, ppl); err != nil {
			return res, err
		}
		c.report(i, chunks, ppl)
	}
	if bw != nil {
		if err := bw.flush(); err != nil {
			return res, fmt.Errorf("--kl-divergence-base: %w", err)
		}
	}
	res.Tokens, res.Elapsed = count, time.Since(c.t0)
	mean := sum / float64(count)
	res.PPL = math.Exp(mean)
	v := sum2/float64(count) - float64(mean*mean)
	if v > 0 {
		res.PPLErr = math.Sqrt(v/float64(count-1)) * res.PPL
		_, err := fmt.Fprintf(o.Out, "\nFinal estimate: PPL = %.4f +/- %.5f\n", res.PPL, res.PPLErr)
		return res, err
	}
	_, err := fmt.Fprintf(o.Out, "\nUnexpected negative standard deviation of log(prob)\n")
	return res, err
}
