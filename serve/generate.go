package serve

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/pipe-engine/pipe/decode"
	"github.com/pipe-engine/pipe/metrics"
)

// outcome is what one generation did, for the response's usage, the request
// log event and /metrics.
type outcome struct {
	promptTokens int // tokens of the whole prompt
	cachedTokens int // of them, reused from the previous request's KV
	genTokens    int
	finish       string // "stop" or "length"
	queue        time.Duration
	ttft         time.Duration // request arrival → first generated token
	prefill      time.Duration
	decode       time.Duration
	eng          metrics.Counters // the engine counters' change during the generation
}

// tokS is the decode rate; ok is false when there is none to report.
func (o outcome) tokS() (float64, bool) {
	if o.genTokens == 0 || o.decode <= 0 {
		return 0, false
	}
	return float64(o.genTokens) / o.decode.Seconds(), true
}

func (o outcome) usage() *usage {
	return &usage{PromptTokens: o.promptTokens, CompletionTokens: o.genTokens,
		TotalTokens: o.promptTokens + o.genTokens, PromptTokensDetails: promptDetails{CachedTokens: o.cachedTokens}}
}

// emitter is where a generation's text goes: a JSON body or an SSE stream.
type emitter interface {
	// begin is called once the request is known to fit, before the prompt
	// pass (a stream sends its headers).
	begin() error
	text(s string) error
	end(o *outcome) error
}

// acquire waits for the decode slot (requests are decoded one at a time, in
// arrival order as far as the runtime's channel wake-ups go) or for ctx.
func (s *Server) acquire(ctx context.Context) (release func(), err error) {
	s.met.queue(1)
	defer s.met.queue(-1)
	select {
	case s.slot <- struct{}{}:
	case <-ctx.Done():
		return nil, ctx.Err()
	}
	s.met.setBusy(true)
	return func() { s.met.setBusy(false); <-s.slot }, nil
}

// encode renders and tokenizes a job's prompt.
func (s *Server) encode(j *job) ([]int32, error) {
	if !j.chat {
		ids, _, err := s.o.Model.Encode(decode.Prompt{Text: j.prompt})
		if errors.Is(err, decode.ErrEmptyPrompt) {
			return nil, badRequest("prompt: %v", err)
		}
		return ids, err
	}
	tok := s.o.Model.Tokenizer()
	text, err := tok.Chat(j.messages, true, s.o.NoThink)
	if err != nil {
		return nil, badRequest("messages: %v", err)
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
// and max_tokens do not fit is refused without waiting for the slot.
func (s *Server) prepare(j *job) error {
	if err := s.o.Model.FitText(j.textBytes(), s.nCtx); err != nil {
		return fmt.Errorf("%w: the prompt: %w", errContext, err)
	}
	ids, err := s.encode(j)
	if err != nil {
		return err
	}
	if want := max(j.maxTokens, 1); want > s.nCtx-len(ids) {
		return fmt.Errorf("%w: the prompt (%d tokens) + max_tokens (%d) exceeds the context of %d tokens",
			errContext, len(ids), want, s.nCtx)
	}
	j.ids = ids
	return nil
}

// generate runs one prepared job in the decode slot, sending its text to
// em. o is filled as far as the generation got, also when it fails.
func (s *Server) generate(ctx context.Context, j *job, em emitter, start time.Time, o *outcome) error {
	o.promptTokens = len(j.ids)
	release, err := s.acquire(ctx)
	if err != nil {
		return err
	}
	defer release()
	o.queue = time.Since(start)
	ids := j.ids
	p := j.params
	seed := s.o.Seed
	if j.seed != nil {
		seed = *j.seed
	}
	p.Seed = decode.ResolveSeed(seed)
	if err := s.sess.SetSampling(p); err != nil {
		return badRequest("%v", err)
	}
	if err := em.begin(); err != nil {
		return err
	}
	o.cachedTokens = s.reuse(j.who, ids)
	eng := s.o.Model.Engine()
	before := eng.Metrics().Counters
	defer func() {
		now := eng.Metrics().Counters
		o.eng = now.Sub(before)
		s.met.setEngine(now)
		s.met.generation(*o)
	}()
	return s.run(ctx, j, ids[o.cachedTokens:], em, start, o)
}

// errContext: the request does not fit the server's context (HTTP 400).
var errContext = fmt.Errorf("%w: context length exceeded", ErrRequest)

func (s *Server) run(ctx context.Context, j *job, feed []int32, em emitter, start time.Time, o *outcome) error {
	st := stopper{stops: j.stops}
	byString := false
	eng := s.o.Model.Engine()
	var first time.Time // the first token's callback: the prompt pass is over
	res, err := s.sess.Generate(ctx, feed, decode.GenOptions{MaxTokens: j.maxTokens}, func(t decode.Token) error {
		if first.IsZero() {
			first = time.Now()
			o.ttft = first.Sub(start)
		}
		if err := ctx.Err(); err != nil {
			return err
		}
		out, stop := st.add(t.Text)
		if out != "" {
			if err := em.text(out); err != nil {
				return err
			}
		}
		if stop {
			byString = true
			return decode.ErrStop
		}
		s.met.setEngine(eng.Metrics().Counters)
		return nil
	})
	o.genTokens, o.prefill = len(res.Tokens), res.Prefill
	if !first.IsZero() {
		o.decode = time.Since(first)
	}
	if err != nil {
		return err
	}
	if !byString {
		if tail := st.flush(); tail != "" {
			if err := em.text(tail); err != nil {
				return err
			}
		}
	}
	o.finish = "stop"
	if res.Stop == decode.StopLength {
		o.finish = "length"
	}
	return em.end(o)
}
