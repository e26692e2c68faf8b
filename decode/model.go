// Package decode is the library decode loop: it loads a model onto a
// stages.Engine and turns prompts into generated tokens. It owns what every
// front end needs and none should repeat — tokenization and chat rendering
// (through package tokenizer), sampling, end-of-generation, KV sizing and
// the per-token sink — so `pipe run`,
// `pipe run -i` and `pipe serve` differ only in where prompts come from and
// where text goes.
//
// # Use
//
//	m, err := decode.Open(ctx, decode.Options{Engine: cfg})
//	defer m.Close()
//	s, err := m.NewSession(decode.SessionOptions{Sampling: params})
//	ids, _, err := m.Encode(decode.Prompt{Text: "…", Chat: true})
//	res, err := s.Generate(ctx, ids, decode.GenOptions{MaxTokens: 64}, func(t decode.Token) error {
//		fmt.Print(t.Text)
//		return nil
//	})
//
// A Session keeps its KV cache between calls: Generate appends to what it
// holds, Chat renders only what a new user message adds (as llama-cli does),
// and Reuse rewinds to the longest prefix a new prompt shares with it.
// Embed (embed.go) runs a prompt on a state of its own in embeddings mode
// and pools its output-norm rows, as llama.cpp's embeddings; beside an open
// Batch it runs through Batch.Exclusive, between two passes.
//
// # Warm start
//
// With Options.HotSet, Open reads the model's hot set (the experts' routing
// popularity saved by earlier runs; a stale or corrupt one is ignored with a
// warning) and starts reading its hottest experts into the expert cache in
// the background while the dense weights load (stages.Inputs.WarmKeys);
// every routing is counted, and Close saves this run's counts plus half the
// earlier popularity (SaveHotSet, which a server may also call itself).
// warmstart.go wires the model to a warmstart.Run, which keeps that account;
// the hot set, its file and the warm reads' order are package warmstart's.
//
// # Concurrency
//
// A Model runs one forward pass at a time: its Sessions must be driven by one
// goroutine at a time between them (a server queues requests). The callback
// runs on that goroutine; returning ErrStop from it ends the generation
// cleanly, any other error aborts it.
//
// A Batch (batch.go) is the concurrent alternative: N slots, each its own
// sequence, one scheduler goroutine running forward passes over every slot
// with work (continuous batching: each layer's experts read once for the
// batch), requests joining and leaving between passes; Batch.Generate is
// safe to call from many goroutines. A Model with an open Batch runs no
// Session.
//
// # Memory
//
// The KV cache of a session is sized once, when the session is made or, for a
// session of size 0, at its first Generate (prompt + MaxTokens) or Chat
// (DefaultCtx). Open reserves KV room for the --cache-mb auto budget from
// Options.Ctx or Options.Reserve before any weights are loaded.
package decode

import (
	"cmp"
	"context"
	"errors"
	"fmt"
	"math"
	"slices"
	"sync/atomic"
	"time"

	"github.com/rs/zerolog"

	"github.com/pipe-engine/pipe/kernels"
	"github.com/pipe-engine/pipe/metrics"
	"github.com/pipe-engine/pipe/model"
	_ "github.com/pipe-engine/pipe/model/archs" // registers every architecture
	"github.com/pipe-engine/pipe/sink"
	"github.com/pipe-engine/pipe/stages"
	"github.com/pipe-engine/pipe/tokenizer"
	"github.com/pipe-engine/pipe/warmstart"
)

// DefaultCtx is the context of a chat or served session when none is given.
const DefaultCtx = 4096

// Options configure Open.
type Options struct {
	// Engine is the user's configuration of the pipeline; Open passes it to
	// stages.Open as it is, with the inputs it derives from the fields
	// below (the KV cache from KV, Ctx and Reserve; the load progress; the
	// warm start).
	Engine stages.Config
	KV     model.KVType
	// Ctx is the KV positions of a session made with size 0 (-c); 0 sizes
	// each session at its first use (see the package doc).
	Ctx int
	// Reserve is the KV positions --cache-mb auto keeps room for when Ctx is
	// 0 (EstimatePositions bounds a one-shot run); 0 means DefaultCtx.
	Reserve int
	// AutoCache, when above 0, is the expert-cache budget that --cache-mb
	// auto stands for (stages.Inputs.AutoBytes; the demo model's).
	AutoCache int64
	// Sink configures the per-token CSV, log events and status line; Open
	// fills its Log and Threads from Engine.
	Sink sink.Options
	// LoadFields are extra fields of the `load` event (e.g. the seed).
	LoadFields []sink.Field
	// HotSet configures the warm start: the hot set read at Open and saved
	// at Close (see warmstart.go).
	HotSet warmstart.Options
	// Progress, if set, sees long work as it goes (see Progress): on Open's
	// goroutine during the load, on the decoding goroutine during a prompt
	// pass.
	Progress func(Progress)
}

// Phase names the long work a Progress reports.
type Phase string

const (
	// PhaseLoad: the dense weights are read (Done and Total in bytes).
	PhaseLoad Phase = "load"
	// PhasePrefill: a prompt pass (Done and Total in token-layers: each of
	// Tokens tokens through each layer; layers without routed experts count
	// with the next one that has them).
	PhasePrefill Phase = "prefill"
)

// Progress is how far long work has got. The last report of a phase has
// Done == Total (also when the work ends early with an error, a caller
// cannot rely on it: clear a display when the call returns).
type Progress struct {
	Phase       Phase
	Done, Total int64
	Tokens      int // PhasePrefill: the pass's prompt tokens
}

// EstimatePositions bounds the positions a one-shot run of a prompt needs
// before it is tokenized: a token is at least one byte, so the prompt's length
// in bytes bounds its tokens; 64 covers a chat template's markup.
func EstimatePositions(promptBytes, maxTokens int) int {
	return promptBytes + 64 + max(maxTokens, 0)
}

// Model is a loaded model with its tokenizer and sink.
type Model struct {
	eng    *stages.Engine
	tok    *tokenizer.Tokenizer
	sink   *sink.Sink
	o      Options
	active *Session // the session running a forward pass (route observer)
	onRte  func(Route)
	hot    *hotState // nil without Options.HotSet

	forwards atomic.Int64 // forward passes since Open (a prefill counts as one)
	closed   bool
}

// Open loads the model at o.Engine.Path, starts its pipeline and opens the
// sink (creating the CSV).
func Open(ctx context.Context, o Options) (*Model, error) {
	if o.Ctx < 0 || o.Reserve < 0 {
		return nil, fmt.Errorf("%w: context %d / reserve %d must be >= 0", stages.ErrConfig, o.Ctx, o.Reserve)
	}
	in := stages.Inputs{KVElemBytes: 2, KVPositions: cmp.Or(o.Ctx, o.Reserve, DefaultCtx), AutoBytes: o.AutoCache}
	if o.KV == model.KVF32 {
		in.KVElemBytes = 4
	}
	if o.Progress != nil {
		in.LoadProgress = func(done, total int64) { o.Progress(Progress{Phase: PhaseLoad, Done: done, Total: total}) }
	}
	var hot *hotLoader
	if o.HotSet.Path != "" {
		hot = &hotLoader{o: o.HotSet, log: o.Engine.Log}
		in.WarmKeys = hot.keys
	}
	eng, err := stages.Open(ctx, o.Engine, in)
	if err != nil {
		return nil, err
	}
	m := &Model{eng: eng, o: o}
	if err := m.init(hot); err != nil {
		eng.Close()
		return nil, err
	}
	return m, nil
}

// init makes the tokenizer and the sink and logs the `load` event with the
// configuration the engine resolved.
func (m *Model) init(hot *hotLoader) error {
	cfg := m.eng.Config()
	tcfg, err := tokenizer.FromGGUF(m.eng.Desc().File)
	if err != nil {
		return fmt.Errorf("%s: tokenizer: %w", cfg.Path, err)
	}
	if m.tok, err = tokenizer.New(tcfg); err != nil {
		return fmt.Errorf("%s: tokenizer: %w", cfg.Path, err)
	}
	so := m.o.Sink
	so.Log, so.Threads = cfg.Log, cfg.Threads
	if cfg.Lossy.On() {
		so.ExtraColumns = append(slices.Clone(so.ExtraColumns), metrics.SkipColumns...)
	}
	if m.sink, err = sink.New(so); err != nil {
		return err
	}
	d, met := m.eng.Desc(), m.eng.Metrics()
	extra := append([]sink.Field{sink.F("model", cfg.Path), sink.F("arch", d.Arch), sink.F("moe_stream", cfg.Streams()),
		sink.F("dense_weights", string(cfg.Dense)), sink.F("overlap", !cfg.NoOverlap), sink.F("working_set_bytes", cfg.WorkingSet),
		sink.F("kernels", kernels.Implementation()), sink.F("kernels_source", kernels.Chosen().Source), sink.F("cpu", kernels.CPUKey())},
		m.o.LoadFields...)
	m.sink.Load(sink.LoadInfo{
		Seconds: met.Load.Seconds(), DenseBytes: d.DenseBytes, ExpertBytes: d.ExpertTotalBytes,
		BudgetBytes: cfg.Cache.Bytes, ODirect: met.ODirect, Lanes: cfg.IO.Lanes, Threads: cfg.Threads, Extra: extra,
	})
	m.sink.Set("model", cfg.Path)
	m.sink.Set("moe_stream", cfg.Streams())
	m.sink.Set("dense", string(cfg.Dense))
	m.sink.Set("overlap", !cfg.NoOverlap)
	m.setLossy()
	m.eng.Observe(m.route)
	m.initHotSet(hot)
	return nil
}

// Engine is the pipeline the model runs on.
func (m *Model) Engine() *stages.Engine { return m.eng }

// Tokenizer is the model's tokenizer.
func (m *Model) Tokenizer() *tokenizer.Tokenizer { return m.tok }

// Forwards is the forward passes run since Open, a prompt pass counting as
// one (llama-server's llama_decode calls, its n_decode_total); safe to call
// while a pass runs.
func (m *Model) Forwards() int64 { return m.forwards.Load() }

// Streaming reports whether routed experts are streamed (the resolved
// --moe-stream).
func (m *Model) Streaming() bool { return m.eng.Config().Streams() }

// Prompt is a prompt before tokenization.
type Prompt struct {
	Text    string
	Chat    bool   // render Text as a user message with the model's chat format
	System  string // system message (Chat only)
	NoThink bool   // Qwen3: an empty think block after the assistant header (Chat only)
	// Fit, when set, checks the rendered text's length in bytes before it
	// is tokenized (a chat template can make a short prompt enormous).
	Fit func(textBytes int) error
}

// Encode renders p (with the chat format when p.Chat) and tokenizes it; it
// returns the ids and the rendered text.
func (m *Model) Encode(p Prompt) ([]int32, string, error) {
	return m.EncodeContext(context.Background(), p)
}

// EncodeContext is Encode with a Jinja chat template's render stopped by
// ctx.
func (m *Model) EncodeContext(ctx context.Context, p Prompt) ([]int32, string, error) {
	text, special := p.Text, false
	if p.Chat {
		var msgs []tokenizer.Message
		if p.System != "" {
			msgs = append(msgs, tokenizer.Message{Role: "system", Content: p.System})
		}
		msgs = append(msgs, tokenizer.Message{Role: "user", Content: p.Text})
		var err error
		if text, err = m.tok.ChatContext(ctx, msgs, true, p.NoThink); err != nil {
			return nil, "", err
		}
		special = true
	}
	if p.Fit != nil {
		if err := p.Fit(len(text)); err != nil {
			return nil, text, err
		}
	}
	ids := m.tok.Encode(text, true, special)
	if len(ids) == 0 {
		return nil, text, ErrEmptyPrompt
	}
	return ids, text, nil
}

// ErrTooLong: a text cannot fit a context, known from its length alone
// (FitText).
var ErrTooLong = errors.New("cannot fit the context")

// MinTokens is a lower bound on the tokens of a text of n bytes (see
// tokenizer.Tokenizer.MaxTokenBytes).
func (m *Model) MinTokens(n int) int {
	per := max(m.tok.MaxTokenBytes(), 1)
	return (n + per - 1) / per
}

// FitText returns an ErrTooLong error when a text of n bytes cannot fit a
// context of nCtx positions (nCtx <= 0: no bound) because even MinTokens(n)
// are more: tokenizing megabytes of text takes seconds and gigabytes, and
// this costs nothing.
func (m *Model) FitText(n, nCtx int) error {
	if nCtx <= 0 {
		return nil
	}
	if least := m.MinTokens(n); least > nCtx {
		return fmt.Errorf("%w: %d bytes of text are at least %d tokens, the context holds %d", ErrTooLong, n, least, nCtx)
	}
	return nil
}

// ErrEmptyPrompt: the prompt has no tokens.
var ErrEmptyPrompt = errors.New("the prompt is empty after tokenization")

// Route is one layer's routing of a forward pass, for an OnRoute observer.
type Route struct {
	Turn    int  // the session's Generate/Chat call, from 0
	Prefill bool // part of a prompt pass
	Pos     int  // position of the pass's first token
	Layer   int
	IDs     [][]int     // [token][rank] experts; valid only during the call
	W       [][]float32 // [token][rank] weights; valid only during the call
}

// OnRoute sets an observer of every layer's routing (nil: none). It runs on
// the decoding goroutine.
func (m *Model) OnRoute(f func(Route)) { m.onRte = f }

func (m *Model) route(_, layer int, ids [][]int, ws [][]float32) {
	m.countRoute(layer, ids)
	s := m.active
	if s != nil && s.inPrefill && m.o.Progress != nil {
		s.prefillProgress(layer, len(ids))
	}
	if m.onRte == nil || s == nil {
		return
	}
	m.onRte(Route{Turn: s.turn, Prefill: s.inPrefill, Pos: s.st.State.Pos, Layer: layer, IDs: ids, W: ws})
}

// Summary is the run summary so far (the sink's: every generated token of
// every session since Open).
func (m *Model) Summary() metrics.Summary { return m.sink.Summary() }

// Fail records why the run failed, for the summary (status=error or
// canceled).
func (m *Model) Fail(err error) { m.sink.Fail(err) }

// Close logs the `profile` (and `prefetch`) events, writes the sink's
// summary, stops the pipeline and frees the model. It returns the sink's
// error (a CSV that could not be written); it is safe to call twice.
func (m *Model) Close() error {
	if m.closed {
		return nil
	}
	m.closed = true
	m.logProfile()
	m.closeHotSet()
	m.setSkips()
	serr := m.sink.Close()
	eerr := m.eng.Close()
	return errors.Join(serr, eerr)
}

func (m *Model) logProfile() {
	log := m.eng.Config().Log
	met := m.eng.Metrics()
	pr := met.Profile
	nf := max(m.forwards.Load(), 1)
	n := float64(nf)
	per := func(d time.Duration) float64 { return float64(d) / 1e6 / n }
	log.Info().Str("event", "profile").Int64("forwards", nf).
		Float64("attention_ms", per(pr.Attention)).Float64("router_ms", per(pr.Router)).
		Float64("experts_ms", per(pr.Experts)).Float64("stall_ms", per(met.Counters.Stall)).
		Float64("lm_head_ms", per(pr.LMHead)).Float64("embed_ms", per(pr.Embed)).
		Msg("time per forward pass (prefill counted as one)")
	if ps := met.Speculation; ps.Speculative > 0 {
		log.Info().Str("event", "prefetch").Int64("reads", ps.Speculative).Int64("used", ps.SpeculativeUsed).
			Float64("precision", float64(ps.SpeculativeUsed)/float64(ps.Speculative)).
			Int64("withdrawn", ps.SpeculativeWithdrawn).Int64("promoted", ps.SpeculativePromoted).
			Int64("skipped", ps.SpeculativeSkipped).
			Msg("speculative reads: issued, routed to by their layer, withdrawn unread when the guess proved wrong")
	}
}

// ResolveSeed turns a sampling seed of -1 (or any negative) into a random
// one; others are returned as they are.
func ResolveSeed(seed int64) uint64 {
	if seed < 0 {
		seed = time.Now().UnixNano() & math.MaxInt64
	}
	return uint64(seed)
}

// log is the engine's logger (its resolved configuration's).
func (m *Model) log() *zerolog.Logger {
	l := m.eng.Config().Log
	return &l
}
