package decode

import (
	"cmp"
	"context"
	"errors"
	"fmt"
	"math"
	"time"

	"github.com/pipe-engine/pipe/metrics"
	"github.com/pipe-engine/pipe/model"
	"github.com/pipe-engine/pipe/sample"
	"github.com/pipe-engine/pipe/stages"
	"github.com/pipe-engine/pipe/tokenizer"
)

// SessionOptions configure NewSession.
type SessionOptions struct {
	// Ctx is the KV positions (0: Options.Ctx, else sized at first use).
	Ctx      int
	Sampling sample.Params
	// Force replaces sampled tokens, in order, until it is used up
	// (teacher forcing, for tests).
	Force []int32
	// System and NoThink shape Chat's rendering.
	System  string
	NoThink bool
}

// Session is one token sequence on a Model: its KV cache, sampler and, for
// Chat, the conversation so far.
type Session struct {
	m     *Model
	o     SessionOptions
	st    *stages.Session // nil until sized
	smp   *sample.Chain
	force []int32

	hist      []int32 // tokens in the KV cache, in order
	unfed     int32   // the last sampled token when it was not fed (EOG, stop), else -1
	past      []tokenizer.Message
	turn      int
	inPrefill bool
	prefill0  int // the prompt pass's first position
	prefillN  int // and its tokens
}

// NewSession starts a sequence.
func (m *Model) NewSession(o SessionOptions) (*Session, error) {
	if o.Ctx < 0 {
		return nil, fmt.Errorf("%w: context %d must be >= 0", stages.ErrConfig, o.Ctx)
	}
	smp, err := sample.NewChain(o.Sampling, sample.Hooks{})
	if err != nil {
		return nil, err
	}
	s := &Session{m: m, o: o, smp: smp, force: o.Force, unfed: -1}
	if o.System != "" {
		s.past = append(s.past, tokenizer.Message{Role: "system", Content: o.System})
	}
	if n := cmp.Or(o.Ctx, m.o.Ctx); n > 0 {
		if err := s.size(n); err != nil {
			return nil, err
		}
	}
	return s, nil
}

func (s *Session) size(nCtx int) error {
	if train := s.m.eng.Desc().HParams.NCtxTrain; train > 0 && nCtx > train {
		s.m.log().Warn().Str("event", "ctx_beyond_train").Int("ctx", nCtx).Int("n_ctx_train", train).
			Msgf("the context of %d positions (-c, or prompt + -n) is beyond the %d the model was trained on: output past position %d may degrade", nCtx, train, train)
	}
	st, err := s.m.eng.NewSession(nCtx, s.m.o.KV)
	if err != nil {
		return err
	}
	s.st = st
	return nil
}

// SetSampling replaces the sampler (its history and random state start
// afresh).
func (s *Session) SetSampling(p sample.Params) error {
	smp, err := sample.NewChain(p, sample.Hooks{})
	if err != nil {
		return err
	}
	s.smp = smp
	return nil
}

// SetChain replaces the sampler with c: a request's sampler and its hooks
// (logit bias, mask, probability capture; see sample.Chain). The session
// feeds c the prompt tokens it prefills and every token it generates.
func (s *Session) SetChain(c *sample.Chain) { s.smp = c }

// Ctx is the session's KV positions (0 before it is sized).
func (s *Session) Ctx() int {
	if s.st == nil {
		return 0
	}
	return s.st.State.NCtx
}

// Tokens are the tokens in the KV cache, in order (the caller must not
// modify them).
func (s *Session) Tokens() []int32 { return s.hist }

// Reuse rewinds the KV cache to the longest prefix it shares with ids,
// keeping at least one token of ids to feed, and returns that prefix's
// length: Generate(ids[n:]) then continues as if ids had been fed whole.
// A model with recurrent layers (qwen35moe) keeps the cache only when ids
// extend everything in it, else starts over (model.State.Rewind).
func (s *Session) Reuse(ids []int32) int {
	n := 0
	for n < len(s.hist) && n < len(ids)-1 && s.hist[n] == ids[n] {
		n++
	}
	if s.st != nil {
		n = s.st.State.Rewind(n) // a recurrent state keeps only a whole prefix
	}
	s.hist = s.hist[:n]
	s.unfed = -1
	return n
}

// GenOptions configure one Generate or Chat call.
type GenOptions struct {
	// MaxTokens is how many tokens to generate at most; negative: until
	// end-of-generation or the context is full.
	MaxTokens int
	// IgnoreEOS keeps generating past end-of-generation tokens.
	IgnoreEOS bool
	// OnLogits, if set, sees each step's logits before sampling (the slice is
	// valid only during the call).
	OnLogits func([]float32) error
	// Given is when the prompt was given, the start of the time to first
	// token (zero: when Generate or Chat was called); a front end that
	// tokenizes the prompt itself sets it before Encode.
	Given time.Time
	// Batch is the prompt pass's logical batch (llama.cpp's n_batch, -b):
	// the prompt is fed Batch tokens at a time (0: stages.PrefillChunk),
	// in forward passes of at most stages.PrefillChunk; the output is the
	// same bits whatever the Batch.
	Batch int
	// OnPrompt, if set, is called after each Batch of the prompt pass with
	// the prompt tokens fed so far; an error from it ends the generation.
	OnPrompt func(fed int) error
}

// Token is one sampled token as the callback sees it.
type Token struct {
	ID   int32
	Text string // the text it completes (may be empty mid-UTF-8; the last token carries the rest)
	EOG  bool   // an end-of-generation token (not fed, no text of its own)
}

// Stop is why a generation ended.
type Stop int

const (
	// StopLength: MaxTokens were generated (or the context is full).
	StopLength Stop = iota
	// StopEOG: the model produced an end-of-generation token.
	StopEOG
	// StopCallback: the callback returned ErrStop.
	StopCallback
)

func (s Stop) String() string {
	switch s {
	case StopEOG:
		return "eog"
	case StopCallback:
		return "stop"
	}
	return "length"
}

// ErrStop, returned by a Token callback, ends the generation after that
// token (which is not fed) without an error.
var ErrStop = errors.New("decode: stop")

// Result describes one Generate or Chat call.
type Result struct {
	PromptTokens int           // tokens fed before generating
	Tokens       []int32       // sampled tokens, including a final EOG
	Stop         Stop          // why it ended
	Prefill      time.Duration // the prompt pass
	Decode       time.Duration // from the first sample to the end
	TTFT         time.Duration // from GenOptions.Given to the first sampled token
	// Expert I/O of the call (zero without streaming), from the engine's
	// counters (metrics.Counters): bytes the reader lanes read during the
	// prompt pass and after it, and the expert-cache lookups of the decode
	// steps (as the CSV's cache_hit_pct counts them).
	PrefillReadBytes, DecodeReadBytes int64
	Lookups                           metrics.Lookups
	// Stall is the wait for expert bytes (set by a Batch, from its share of
	// each pass: see Step).
	Stall time.Duration
}

// HitPct is the decode's expert-cache hit rate in percent
// (metrics.Lookups.HitPct); ok is false without lookups.
func (r Result) HitPct() (pct float64, ok bool) { return r.Lookups.HitPct() }

// Generate feeds ids after what the session holds and generates up to
// o.MaxTokens tokens, calling onToken for each (nil: none). Every generated
// token but a final EOG (or one the callback stopped at) is fed, so each gets
// a sink row with the cost of the step that consumed it.
func (s *Session) Generate(ctx context.Context, ids []int32, o GenOptions, onToken func(Token) error) (Result, error) {
	if len(ids) == 0 {
		return Result{}, ErrEmptyPrompt
	}
	if o.Given.IsZero() {
		o.Given = time.Now()
	}
	if s.st == nil {
		if err := s.size(len(ids) + max(o.MaxTokens, 0)); err != nil {
			return Result{}, err
		}
	}
	pos, nCtx := s.st.State.Pos, s.st.State.NCtx
	n := o.MaxTokens
	if n < 0 {
		n = nCtx - pos - len(ids)
	}
	if pos+len(ids)+n > nCtx || len(ids)+pos > nCtx {
		if pos == 0 {
			return Result{}, fmt.Errorf("%w: prompt (%d tokens) + %d to generate exceeds the context -c %d", model.ErrContextFull, len(ids), n, nCtx)
		}
		return Result{}, fmt.Errorf("%w: the conversation needs %d positions, -c is %d", model.ErrContextFull, pos+len(ids)+n, nCtx)
	}
	s.m.active = s
	defer func() { s.m.active = nil; s.turn++ }()
	return s.run(ctx, ids, n, o, onToken)
}

func (s *Session) run(ctx context.Context, ids []int32, n int, o GenOptions, onToken func(Token) error) (res Result, err error) {
	res = Result{PromptTokens: len(ids)}
	logits, err := s.prefill(ctx, ids, o, &res)
	if err != nil {
		return res, err
	}
	t0 := time.Now()
	c0 := s.m.eng.Metrics().Counters
	defer func() {
		res.Decode = time.Since(t0)
		d := s.m.eng.Metrics().Counters.Sub(c0)
		res.DecodeReadBytes, res.Lookups = d.ReadBytes, d.Decode
	}()
	tok := s.m.tok
	stream := tok.NewStream(false)
	s.unfed = -1
	for i := 0; i < n; i++ {
		next, err := s.sample(logits, o)
		if err != nil {
			return res, err
		}
		res.Tokens = append(res.Tokens, next)
		if i == 0 {
			res.TTFT = time.Since(o.Given)
			s.m.sink.FirstToken(res.TTFT)
		}
		if tok.IsEOG(next) && !o.IgnoreEOS {
			s.unfed, res.Stop = next, StopEOG
			return res, call(onToken, Token{ID: next, Text: stream.Flush(), EOG: true})
		}
		text := stream.Add(next)
		if i == n-1 {
			text += stream.Flush()
		}
		if err := call(onToken, Token{ID: next, Text: text}); err != nil {
			if errors.Is(err, ErrStop) {
				s.unfed, res.Stop = next, StopCallback
				return res, nil
			}
			return res, err
		}
		if logits, err = s.step(ctx, next, n); err != nil {
			return res, err
		}
	}
	res.Stop = StopLength
	return res, nil
}

func call(f func(Token) error, t Token) error {
	if f == nil {
		return nil
	}
	if err := f(t); err != nil && !(t.EOG && errors.Is(err, ErrStop)) {
		return err
	}
	return nil
}

// prefill feeds the prompt as one pass (in batches of o.Batch, each
// reported to o.OnPrompt) and returns the last position's logits.
func (s *Session) prefill(ctx context.Context, ids []int32, o GenOptions, res *Result) ([]float32, error) {
	s.inPrefill = true
	s.prefill0, s.prefillN = s.st.State.Pos, len(ids)
	c0 := s.m.eng.Metrics().Counters
	rows, d, err := s.st.PrefillBy(ctx, ids, false, o.Batch, o.OnPrompt)
	s.inPrefill = false
	if err == nil && s.m.o.Progress != nil {
		total := int64(len(ids)) * int64(s.m.eng.Desc().HParams.NLayer)
		s.m.o.Progress(Progress{Phase: PhasePrefill, Done: total, Total: total, Tokens: len(ids)})
	}
	s.m.forwards.Add(1)
	res.Prefill = d
	if err != nil {
		return nil, err
	}
	s.hist = append(s.hist, ids...)
	s.m.sink.Prefill(len(ids), d)
	res.PrefillReadBytes = s.m.eng.Metrics().Counters.Sub(c0).ReadBytes
	s.m.sink.PrefillRead(res.PrefillReadBytes)
	pt := s.st.PrefillTimes()
	s.m.sink.Set("prefill_stall_ms", msRound(pt.Stall))
	s.m.sink.Set("prefill_compute_ms", msRound(pt.Compute))
	if cfg := s.m.eng.Config(); cfg.Streams() {
		s.m.sink.Set("prefill_io_busy_ms", msRound(pt.IOBusy))
		s.m.sink.Set("prefill_slot_wait_ms", msRound(pt.SlotWait))
		if d > 0 {
			s.m.sink.Set("prefill_lanes_busy_pct", math.Round(1000*float64(pt.IOBusy)/(float64(d)*float64(cfg.IO.Lanes)))/10)
		}
		for _, l := range pt.Layers {
			s.m.sink.PrefillLayer(l, cfg.IO.Lanes)
		}
	}
	s.smp.AcceptPrompt(ids)
	return rows[0], nil
}

// prefillProgress reports a prompt pass's progress after layer of a forward
// pass of n tokens (the pass starts at the state's position).
func (s *Session) prefillProgress(layer, n int) {
	nl := int64(s.m.eng.Desc().HParams.NLayer)
	done := min(int64(s.st.State.Pos-s.prefill0)*nl+int64(layer+1)*int64(n), int64(s.prefillN)*nl)
	s.m.o.Progress(Progress{Phase: PhasePrefill, Done: done, Total: int64(s.prefillN) * nl, Tokens: s.prefillN})
}

func (s *Session) sample(logits []float32, o GenOptions) (int32, error) {
	if o.OnLogits != nil {
		if err := o.OnLogits(logits); err != nil {
			return 0, err
		}
	}
	next, err := s.smp.Sample(logits)
	if err != nil {
		return 0, err
	}
	if len(s.force) > 0 {
		next, s.force = s.force[0], s.force[1:]
	}
	if err := s.smp.Accept(next); err != nil {
		return 0, err
	}
	return next, nil
}

// step feeds one generated token and hands its metrics to the sink.
func (s *Session) step(ctx context.Context, tok int32, steps int) ([]float32, error) {
	logits, m, err := s.st.Step(ctx, tok, steps)
	s.m.forwards.Add(1)
	if err != nil {
		return nil, err
	}
	s.hist = append(s.hist, tok)
	if err := s.m.sink.Token(m); err != nil {
		return nil, err
	}
	return logits, nil
}

// Chat adds a user message to the conversation and generates the reply,
// feeding only what the message adds to the KV cache (the previous reply's
// end-of-turn token, then the rendered delta), as llama-cli's conversation
// mode does. The reply (without a final EOG) joins the conversation.
func (s *Session) Chat(ctx context.Context, user string, o GenOptions, onToken func(Token) error) (Result, error) {
	if o.Given.IsZero() {
		o.Given = time.Now()
	}
	if s.st == nil {
		if err := s.size(DefaultCtx); err != nil {
			return Result{}, err
		}
	}
	tok := s.m.tok
	msg := tokenizer.Message{Role: "user", Content: user}
	var ids []int32
	if len(s.hist) == 0 {
		text, err := tok.ChatContext(ctx, append(s.past, msg), true, s.o.NoThink)
		if err != nil {
			return Result{}, err
		}
		if err := s.m.FitText(len(text), s.st.State.NCtx); err != nil {
			return Result{}, fmt.Errorf("the rendered chat: %w", err)
		}
		ids = tok.Encode(text, true, true)
	} else {
		// The previous reply's end-of-turn token was sampled but not fed.
		if s.unfed >= 0 && tok.IsEOG(s.unfed) {
			ids = append(ids, s.unfed)
		} else if end, ok := tok.EndOfTurn(); ok {
			ids = append(ids, end)
		}
		text, err := tok.ChatDelta(ctx, s.past, msg, true, s.o.NoThink)
		if err != nil {
			return Result{}, err
		}
		if err := s.m.FitText(len(text), s.st.State.NCtx); err != nil {
			return Result{}, fmt.Errorf("the rendered turn: %w", err)
		}
		ids = tok.AppendEncode(ids, text, false, true)
	}
	s.past = append(s.past, msg)
	res, err := s.Generate(ctx, ids, o, onToken)
	if err != nil {
		return res, err
	}
	reply := res.Tokens
	if len(reply) > 0 && tok.IsEOG(reply[len(reply)-1]) {
		reply = reply[:len(reply)-1]
	}
	s.past = append(s.past, tokenizer.Message{Role: "assistant", Content: tok.Decode(reply, false)})
	return res, nil
}

// msRound is d in whole milliseconds, for the summary.
func msRound(d time.Duration) int64 { return d.Round(time.Millisecond).Milliseconds() }
