package sample

import (
	"fmt"
	"math"
	"slices"

	"github.com/pipe-engine/pipe/kernels"
)

// Bias is added to one token's logit before the chain (llama.cpp's logit-bias
// sampler, the first of its chain); -Inf bans the token.
type Bias struct {
	ID    int32
	Value float32
}

// Mask restricts which tokens may come next (a grammar). The engine never
// sees it: a Chain applies it to each step's logits.
type Mask interface {
	// Apply sets the logit of every token the mask forbids now to -Inf.
	Apply(logits []float32) error
	// Accept advances the mask past the chosen token; an error means the
	// token is not allowed.
	Accept(id int32) error
}

// Hooks are one request's additions to the sampler chain.
type Hooks struct {
	Bias []Bias
	Mask Mask // nil: none
	// Capture records, for each sampled token, its probability and the Top
	// most likely tokens' (Chain.Probs).
	Capture bool
	Top     int
	// PostSampling takes the probabilities from the candidates the chain
	// left (after bias, mask, penalties, filters and temperature) instead of
	// the softmax of the model's own logits (llama-server's
	// post_sampling_probs).
	PostSampling bool
}

// Prob is one token's probability.
type Prob struct {
	ID int32
	P  float64
}

// TokenProbs are a sampled token's probability and the most likely tokens',
// most likely first (lowest id first on ties).
type TokenProbs struct {
	ID  int32
	P   float64
	Top []Prob
}

// Chain is a Sampler with a request's Hooks around it, in llama.cpp's
// server order: the probabilities of the model's logits are captured (unless
// PostSampling), the bias is added and the mask applied to a copy, the
// Sampler's chain runs and draws, and (PostSampling) the probabilities of the
// chain's survivors are captured. Not safe for concurrent use.
type Chain struct {
	s    *Sampler
	h    Hooks
	work []float32
	soft []float32 // capturePre's softmax
	heap []Candidate
	last TokenProbs
	have bool
}

// NewChain makes a Chain; it fails with ErrParams on a bad parameter or
// hook.
func NewChain(p Params, h Hooks) (*Chain, error) {
	s, err := New(p)
	if err != nil {
		return nil, err
	}
	if h.Top < 0 {
		return nil, fmt.Errorf("probabilities of the top %d tokens: %w (must be >= 0)", h.Top, ErrParams)
	}
	for _, b := range h.Bias {
		if b.ID < 0 || math.IsNaN(float64(b.Value)) || math.IsInf(float64(b.Value), 1) {
			return nil, fmt.Errorf("logit bias %v for token %d: %w (a token id >= 0, a bias that is a number or -Inf)", b.Value, b.ID, ErrParams)
		}
	}
	h.Bias = slices.Clone(h.Bias)
	return &Chain{s: s, h: h}, nil
}

// Params returns the sampler's settings.
func (c *Chain) Params() Params { return c.s.Params() }

// Sample picks the next token from logits (which it neither modifies nor
// keeps). It does not call Accept.
func (c *Chain) Sample(logits []float32) (int32, error) {
	c.have = false
	pre := c.h.Capture && !c.h.PostSampling
	if pre {
		c.topByLogit(logits)
	}
	work, err := c.shaped(logits)
	if err != nil {
		return 0, err
	}
	if !c.h.Capture || pre {
		id, err := c.s.Sample(work)
		if err != nil {
			return 0, err
		}
		if pre {
			c.capturePre(logits, id)
		}
		return id, nil
	}
	cand, err := c.s.Candidates(work)
	if err != nil {
		return 0, err
	}
	id := c.s.draw(cand)
	c.capturePost(cand, id)
	return id, nil
}

// shaped is logits with the bias added and the mask applied (a copy), or
// logits itself without either.
func (c *Chain) shaped(logits []float32) ([]float32, error) {
	if len(c.h.Bias) == 0 && c.h.Mask == nil {
		return logits, nil
	}
	c.work = append(c.work[:0], logits...)
	for _, b := range c.h.Bias {
		if int(b.ID) >= len(c.work) {
			return nil, fmt.Errorf("logit bias for token %d of %d: %w", b.ID, len(c.work), ErrParams)
		}
		c.work[b.ID] += b.Value
	}
	if c.h.Mask == nil {
		return c.work, nil
	}
	if err := c.h.Mask.Apply(c.work); err != nil {
		return nil, err
	}
	for _, l := range c.work {
		if l == l && !math.IsInf(float64(l), -1) {
			return c.work, nil
		}
	}
	return nil, fmt.Errorf("the mask allows none of %d tokens: %w", len(c.work), ErrLogits)
}

// topByLogit keeps the Top highest logits in c.heap, most likely first.
func (c *Chain) topByLogit(logits []float32) {
	n := c.h.Top
	c.heap = c.heap[:0]
	if n == 0 {
		return
	}
	for i, l := range logits {
		if l != l {
			continue
		}
		x := Candidate{ID: int32(i), Logit: l}
		if len(c.heap) < n {
			c.heap = append(c.heap, x)
			siftUp(c.heap, len(c.heap)-1, worse)
		} else if better(x, c.heap[0]) {
			c.heap[0] = x
			siftDown(c.heap, 0, worse)
		}
	}
	slices.SortFunc(c.heap, cmpCand)
}

// capturePre records the softmax of the model's logits (kernels.Softmax on a
// copy: float32 exponentials summed in float64, as the attention's; NaN
// logits count as -Inf): id's probability and the top tokens' (topByLogit
// ran before).
func (c *Chain) capturePre(logits []float32, id int32) {
	c.soft = append(c.soft[:0], logits...)
	for i, l := range c.soft {
		if l != l {
			c.soft[i] = float32(math.Inf(-1))
		}
	}
	kernels.Softmax(c.soft)
	c.last = TokenProbs{ID: id, P: float64(c.soft[id]), Top: c.last.Top[:0]}
	for _, x := range c.heap {
		c.last.Top = append(c.last.Top, Prob{ID: x.ID, P: float64(c.soft[x.ID])})
	}
	c.have = true
}

// capturePost records the chain's survivors (most likely first): id's
// probability and the first Top with a probability above 0.
func (c *Chain) capturePost(cand []Candidate, id int32) {
	c.last = TokenProbs{ID: id, Top: c.last.Top[:0]}
	for i, x := range cand {
		if x.ID == id {
			c.last.P = x.P
		}
		if i < c.h.Top && x.P > 0 {
			c.last.Top = append(c.last.Top, Prob{ID: x.ID, P: x.P})
		}
	}
	c.have = true
}

// Probs returns the probabilities the last Sample captured (a copy); ok is
// false without Hooks.Capture or when Sample failed.
func (c *Chain) Probs() (tp TokenProbs, ok bool) {
	if !c.have {
		return TokenProbs{}, false
	}
	tp = c.last
	tp.Top = slices.Clone(c.last.Top)
	return tp, true
}

// Accept records a generated token: the penalties' history and the mask.
func (c *Chain) Accept(id int32) error {
	c.s.Accept(id)
	if c.h.Mask != nil {
		return c.h.Mask.Accept(id)
	}
	return nil
}

// AcceptPrompt records prompt tokens in the penalties' history (the mask
// follows generated tokens only).
func (c *Chain) AcceptPrompt(ids []int32) { c.s.AcceptAll(ids) }
