package serve

import (
	"context"
	"errors"
	"math"
	"net/http"

	"github.com/pipe-engine/pipe/decode"
	"github.com/pipe-engine/pipe/sample"
)

// intake readies a parsed job on its request's own goroutine, before it
// queues for the decode slot: it renders and tokenizes the prompt, refuses
// one that cannot fit the context, turns the sampler hooks (logit_bias,
// ignore_eos, a grammar: grammar.go) into what the sampler takes, and names
// the job's tenant (tenant.go).
type intake struct {
	o      *Options
	nCtx   int        // the session's context
	gvocab vocabCache // the tokenizer's vocabulary for grammars (grammar.go)
}

// admit finishes a parsed request (err: the parse's) before it queues: it
// sizes and tokenizes it and names its tenant. The error, the parse's or
// its own, is the request's answer.
func (s *intake) admit(r *http.Request, j *job, err error) error {
	if err == nil && len(j.media) > 0 {
		err = checkMedia(s.o.MediaPath, j.media)
	}
	if err == nil {
		err = s.prepare(r.Context(), j)
	}
	if err != nil {
		return err
	}
	j.who = tenantOf(r, j.cacheKey)
	return nil
}

// encode renders and tokenizes a job's prompt; a chat template's render
// stops with ctx (the client went) and is refused untokenized when its text
// alone cannot fit the context.
func (s *intake) encode(ctx context.Context, j *job) ([]int32, error) {
	if j.given != nil {
		n := int32(s.o.Model.Tokenizer().NVocab())
		for i, id := range j.given {
			if id < 0 || id >= n {
				return nil, badRequest("prompt[%d]: token %d is not in the vocabulary (0..%d)", i, id, n-1)
			}
		}
		return j.given, nil
	}
	if !j.chat {
		ids, _, err := s.o.Model.Encode(decode.Prompt{Text: j.prompt})
		if errors.Is(err, decode.ErrEmptyPrompt) {
			return nil, badRequest("prompt: %v", err)
		}
		return ids, err
	}
	tok := s.o.Model.Tokenizer()
	text, err := renderChat(ctx, tok, j, s.o.withKwargs(j))
	if err != nil {
		return nil, badRequest("messages: %v", err)
	}
	if err := s.o.Model.FitText(len(text), s.nCtx); err != nil {
		return nil, &contextError{prompt: s.o.Model.MinTokens(len(text)), nCtx: s.nCtx, cause: err}
	}
	ids := tok.Encode(text, true, true)
	if len(ids) == 0 {
		return nil, badRequest("messages: %v", decode.ErrEmptyPrompt)
	}
	return ids, nil
}

// prepare sizes and tokenizes a job's prompt on the request's own
// goroutine, before it queues for the decode slot: a prompt whose length
// alone cannot fit the context is refused untokenized, and one whose tokens
// leave no room to generate is refused without waiting for the slot (a
// max_tokens past the context is clamped, limit).
func (s *intake) prepare(ctx context.Context, j *job) error {
	j.stops = append(j.stops, s.o.Stops...)
	if err := resolveTools(s.o.Model.Tokenizer(), j); err != nil {
		return err
	}
	if err := s.o.Model.FitText(j.textBytes(), s.nCtx); err != nil {
		return &contextError{prompt: s.o.Model.MinTokens(j.textBytes()), nCtx: s.nCtx, cause: err}
	}
	ids, err := s.encode(ctx, j)
	if err != nil {
		return err
	}
	if len(ids) >= s.nCtx {
		return &contextError{prompt: len(ids), nCtx: s.nCtx}
	}
	j.ids = ids
	return s.resolveHooks(j)
}

// resolveHooks turns a job's logit_bias and ignore_eos into the sampler's
// bias, its grammar into a fresh matcher (the mask), and bounds its top probabilities by the vocabulary.
func (s *intake) resolveHooks(j *job) error {
	tok := s.o.Model.Tokenizer()
	bias, err := parseBias(j.biasRaw, tok)
	if err != nil {
		return err
	}
	if j.ignoreEOS {
		for _, id := range tok.EOGs() {
			bias = append(bias, sample.Bias{ID: id, Value: float32(math.Inf(-1))})
		}
	}
	j.bias, j.mask = bias, nil
	if j.gram != nil {
		if j.ignoreEOS {
			// a complete grammar allows only end-of-generation
			return fieldErr("ignore_eos", "ignore_eos: cannot be used with a grammar or JSON schema, which ends with the end-of-generation token")
		}
		if j.mask, err = s.newMask(j); err != nil {
			return err
		}
	}
	s.withBudget(j) // budget.go
	j.probs.top = min(j.probs.top, tok.NVocab())
	return nil
}
