package serve

import (
	"context"
	"fmt"
	"time"

	"github.com/pipe-engine/pipe/decode"
	"github.com/pipe-engine/pipe/metrics"
	"github.com/pipe-engine/pipe/sample"
)

// outcome is what one generation did, for the response's usage, the request
// log event and /metrics.
type outcome struct {
	promptTokens int // tokens of the whole prompt
	cachedTokens int // of them, reused from the previous request's KV
	genTokens    int
	finish       string // "stop" or "length"
	stopType     string // llama-server's stop_type: "eos", "word", "limit" or "none"
	stopWord     string // the stop sequence that ended it (stop_type "word")
	maxTokens    int    // the limit it ran with (-1: none)
	queue        time.Duration
	ttft         time.Duration // request arrival → first generated token
	prefill      time.Duration
	decode       time.Duration
	lastTok      time.Duration    // the first generated token → the last (llama-server's predicted_ms)
	eng          metrics.Counters // the engine counters' change during the generation
	slot         int              // the decode slot it ran in (id_slot)
	// truncated: the context was full — the limit was what it left, or
	// it was shifted (shift.go) — llama-server's "truncated".
	truncated bool
	ctxBound  bool // maxTokens is what the context left, not the asked limit
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
	text(p piece) error
	end(o *outcome) error
}

// piece is text that is safe to send, the tokens it completes, and the
// engine's work for the last of them.
type piece struct {
	text      string
	reasoning string // a thinking model's reasoning (thinkEmitter), apart from text
	ids       []int32
	probs     []sample.TokenProbs // of ids, when the request asked for them
	tel       *telemetry
}

// acquire waits for the decode slot (requests are decoded one at a time, in
// arrival order as far as the runtime's channel wake-ups go) or for ctx.
func (s *decodeSlot) acquire(ctx context.Context) (release func(), err error) {
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

// generator runs a prepared job (intake.go) in the decode slot, sending its
// text to an emitter, and describes a generation in llama-server's shapes
// (settings and final, native.go; probFormat, probs.go).
type generator struct {
	o      *Options
	slot   *decodeSlot // the session and its one-at-a-time gate (slot.go); nil with batch
	batch  *batchSlots // the slots of --parallel N > 1 (parallel.go); nil without
	met    *meters
	strips *strips // the running generation's per-layer hits and misses (telemetry.go)
	nCtx   int     // the session's context (a slot's, with batch)
}

// generate runs one prepared job in the decode slot, sending its text to
// em. o is filled as far as the generation got, also when it fails.
func (s *generator) generate(ctx context.Context, j *job, em emitter, start time.Time, o *outcome) error {
	if err := s.checkSlot(j); err != nil {
		return err
	}
	if s.batch != nil {
		return s.generateBatched(ctx, j, em, start, o)
	}
	o.promptTokens = len(j.ids)
	release, err := s.slot.acquire(ctx)
	if err != nil {
		return err
	}
	defer release()
	o.queue = time.Since(start)
	ids := j.ids
	s.limit(j, o)
	chain, err := s.chainOf(j)
	if err != nil {
		return err
	}
	s.slot.sess.SetChain(chain)
	if err := em.begin(); err != nil {
		return err
	}
	if j.noCache {
		s.slot.sess.Reuse(ids[:1]) // cache_prompt: false: prefill it all
	}
	o.cachedTokens = s.slot.reuse(j.who, ids)
	before := s.counters()
	defer func() {
		now := s.counters()
		o.eng = now.Sub(before)
		s.met.setEngine(now)
		s.met.generation(*o)
	}()
	gen := s.sessionGen
	if s.o.ContextShift {
		gen = s.shifting(s.shiftPlan(j), ids, gen, func(seq []int32) []int32 { return seq[s.slot.sess.Reuse(seq):] }, o)
	}
	return s.run(ctx, j, chain, ids[o.cachedTokens:], gen, em, start, o)
}

// chainOf is job j's sampler: its parameters, its seed (the server's when
// it sets none) and its hooks.
func (s *generator) chainOf(j *job) (*sample.Chain, error) {
	p := j.params
	seed := s.o.Seed
	if j.seed != nil {
		seed = *j.seed
	}
	p.Seed = decode.ResolveSeed(seed)
	chain, err := sample.NewChain(p, j.hooks())
	if err != nil {
		return nil, badRequest("%v", err)
	}
	return chain, nil
}

// genFunc generates up to maxTokens tokens from the prompt tokens ids,
// calling onPrompt (if set and the generator can) after each -b batch of
// the prompt pass with the tokens of ids fed so far, and onToken for each
// generated token: the one session (sessionGen) or a slot of the batch
// (batchGen, parallel.go).
type genFunc func(ctx context.Context, ids []int32, maxTokens int, onPrompt func(fed int) error, onToken func(decode.Token) error) (decode.Result, error)

// sessionGen is the genFunc of the one session (in the decode slot).
// Its forward passes (the session has the model to itself) count on
// /metrics, each with one busy slot.
func (s *generator) sessionGen(ctx context.Context, ids []int32, maxTokens int, onPrompt func(fed int) error, onToken func(decode.Token) error) (decode.Result, error) {
	f0 := s.o.Model.Forwards()
	defer func() { s.met.passes(s.o.Model.Forwards()-f0, 1) }()
	return s.slot.sess.Generate(ctx, ids, decode.GenOptions{MaxTokens: maxTokens, Batch: s.o.Batch, OnPrompt: onPrompt}, onToken)
}

// limit sets o.maxTokens, the tokens job j may generate: what it asked
// for, else (negative) the server's -n (when set; the request's own limit
// wins, as in llama-server), at most what is left of the context, as
// llama-server clamps it (finish_reason "length", truncated) — but with
// ContextShift, where the context shifts when full (-1: no limit).
func (s *generator) limit(j *job, o *outcome) {
	asked, room := j.maxTokens, s.nCtx-len(j.ids)
	if c := s.o.MaxTokens; c > 0 && asked < 0 {
		asked = c
	}
	o.maxTokens, o.ctxBound = asked, false
	if !s.o.ContextShift && (asked < 0 || asked > room) {
		o.maxTokens, o.ctxBound = room, true
	}
}

// contextError: a prompt of at least prompt tokens leaves no room to
// generate in the context of nCtx (HTTP 400), llama-server's
// exceed_context_size_error, in its words and with its n_prompt_tokens and
// n_ctx. A prompt refused by its length alone, untokenized (cause: a
// decode.ErrTooLong), counts the fewest tokens its text can be.
type contextError struct {
	prompt, nCtx int
	cause        error
	text         string // the message, when not the generation's (embeddings.go)
}

func (e *contextError) Error() string {
	if e.text != "" {
		return e.text
	}
	return fmt.Sprintf("request (%d tokens) exceeds the available context size (%d tokens), try increasing it", e.prompt, e.nCtx)
}

func (e *contextError) Unwrap() []error { return []error{ErrRequest, e.cause} }

func (s *generator) run(ctx context.Context, j *job, chain *sample.Chain, feed []int32, gen genFunc, em emitter, start time.Time, o *outcome) error {
	st := stopper{stops: j.stops}
	byString := false
	tel := s.strips.newTracker(start, s.counters())
	var ids []int32               // tokens whose text is not sent yet
	var probs []sample.TokenProbs // and their probabilities (j.probs)
	var first time.Time           // the first token's callback: the prompt pass is over
	pr := progressReport{j: j, em: em, o: o, since: time.Now()}
	if s.batch == nil { // a batch slot's start comes with its cache (onPrompt(0))
		if err := pr.report(o.cachedTokens); err != nil {
			return err
		}
	}
	var onPrompt func(fed int) error // the prompt pass's batches, for return_progress only
	if j.progress && j.stream {
		onPrompt = func(fed int) error { return pr.report(o.cachedTokens + fed) }
	}
	res, err := gen(ctx, feed, o.maxTokens, onPrompt, func(t decode.Token) error {
		if first.IsZero() {
			first = time.Now()
			o.ttft = first.Sub(start)
			if err := pr.report(o.promptTokens); err != nil {
				return err
			}
		}
		if err := ctx.Err(); err != nil {
			return err
		}
		now := s.counters()
		s.met.setEngine(now)
		o.lastTok = time.Since(first)
		ids = append(ids, t.ID)
		if tp, ok := chain.Probs(); ok {
			probs = append(probs, tp)
		}
		p := piece{}
		p.text, byString = st.add(t.Text)
		if p.text != "" || byString {
			p.ids, ids, p.tel = ids, nil, tel.take(now, len(ids))
			p.probs, probs = probs, nil
			if byString {
				p.probs = s.dropStop(p.probs, st.word)
			}
			if err := em.text(p); err != nil {
				return err
			}
		}
		if byString {
			return decode.ErrStop
		}
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
		if tail := st.flush(); tail != "" || len(ids) > 0 {
			if err := em.text(piece{text: tail, ids: ids, probs: probs}); err != nil {
				return err
			}
		}
	}
	o.finish, o.stopType = "stop", "eos"
	switch {
	case byString:
		o.stopType, o.stopWord = "word", st.word
	case res.Stop == decode.StopLength:
		o.finish, o.stopType = "length", "limit"
		o.truncated = o.truncated || o.ctxBound
	}
	return em.end(o)
}

// dropStop drops the probabilities of the tokens that spelled the stop
// sequence word from the end of tps, as llama-server does (as many as word
// has tokens): the text they belong to is not sent.
func (s *generator) dropStop(tps []sample.TokenProbs, word string) []sample.TokenProbs {
	n := len(s.o.Model.Tokenizer().Encode(word, false, false))
	return tps[:max(len(tps)-n, 0)]
}
