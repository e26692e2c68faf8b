package serve

import (
	"net/http"
)

// Several choices (n), as llama-server's: a chat or text completion with
// n > 1 is generated n times from the same prompt (the later runs reuse its
// KV), each with a fresh sampler — its own grammar state and, when the
// seed is fixed (the request's or the server's), seed + i — and answered
// as one response whose choices are indexed 0..n-1; usage counts the
// prompt once and every choice's tokens. Streamed, n must be 1.

// maxChoices bounds n.
const maxChoices = 16

// choices reads n.
func (c *commonFields) choices(j *job) error {
	if c.N == nil {
		return nil
	}
	switch n := *c.N; {
	case n < 1 || n > maxChoices:
		return fieldErr("n", "n=%d: must be in 1..%d", n, maxChoices)
	case n > 1 && c.Stream:
		return fieldErr("n", "n=%d: several choices are not streamed by pipe serve (n must be 1 with stream)", n)
	default:
		j.n = n
	}
	return nil
}

// severalChoices answers a job with n > 1: n generations collected, then
// one body.
func (a *openAI) severalChoices(x *exchange, j *job, sh shape) {
	var all *response
	x.gen = &outcome{}
	for i := range j.n {
		run := *j
		if i > 0 {
			if err := a.nextChoice(&run, i); err != nil {
				a.rq.failGen(x, nil, err)
				return
			}
		}
		var r *response
		em := a.withReasoning(&run, &collector{sh: sh, hold: &r})
		o := &outcome{}
		if err := a.gen.generate(x.r.Context(), &run, em, x.start, o); err != nil {
			a.rq.failGen(x, nil, err)
			return
		}
		r.Choices[0].Index = i
		if all == nil {
			all, *x.gen = r, *o
			continue
		}
		all.Choices = append(all.Choices, r.Choices[0])
		all.Usage.CompletionTokens += r.Usage.CompletionTokens
		all.Usage.TotalTokens += r.Usage.CompletionTokens
		x.gen.genTokens += o.genTokens
	}
	_ = writeJSON(x.w, a.o.WriteTimeout, http.StatusOK, all)
}

// nextChoice readies a copy of a job for its i-th choice: a fresh sampler
// (mask and budget) and, when the seed is fixed, seed + i.
func (a *openAI) nextChoice(run *job, i int) error {
	seed := a.o.Seed
	if run.seed != nil {
		seed = *run.seed
	}
	if seed >= 0 {
		s := seed + int64(i)
		run.seed = &s
	}
	return a.in.resolveHooks(run)
}
