// Package serve is `pipe serve`: an OpenAI-compatible HTTP server (net/http)
// on one loaded model, built on the library decode loop (package decode).
//
// # Routes
//
//   - POST /v1/chat/completions (also /chat/completions) and POST
//     /v1/completions: OpenAI request and response shapes (messages or
//     prompt, max_tokens, temperature, top_p, top_k, min_p, repeat_penalty,
//     repeat_last_n, frequency_penalty, presence_penalty, min_keep, seed,
//     stop, stream, logprobs / top_logprobs, logit_bias, grammar,
//     json_schema, response_format); with "stream":
//     true the reply is server-sent events (a chat's first delta is the
//     role with content null), a last chunk with finish_reason and usage,
//     then `data: [DONE]`. usage.prompt_tokens_details.cached_tokens counts
//     the prompt tokens whose KV was reused.
//     n_predict (llama-server's name) wins over max_tokens; the server's
//     MaxTokens (-n) is the limit of a request that sets neither; a limit
//     past the context is clamped to what fits (finish_reason "length"); a
//     prompt that leaves no room is llama-server's exceed_context_size_error;
//     any "model" is answered by the one served. Answers and chunks carry
//     system_fingerprint (Options.Fingerprint); verbose: true adds
//     __verbose. Streamed chunks carry the engine's telemetry in an
//     extension field "pipe" (telemetry.go). A chat's reasoning_format
//     (or Options.ReasoningFormat) deepseek or auto returns a leading
//     <think>…</think> as reasoning_content (reasoning.go).
//   - GET /v1/models, GET /health, GET /metrics (Prometheus text format,
//     pipe's series and llama-server's llamacpp: ones, llamametrics.go;
//     501 with NoMetrics).
//   - POST /slots/{id}?action=save|restore|erase with SlotSavePath
//     (slotfile.go; 501 without it). /models and /health also answer with /v1, as
//     llama-server's do.
//   - GET /: the chat page (page.go), embedded in the binary; it streams a
//     chat and draws the telemetry (404 with NoUI, llama-server's --no-ui);
//     /manifest.webmanifest, /sw.js and /_app/version.json make it an
//     installable web app (public, as llama-server's UI files).
//   - With ContextShift a generation that fills its context drops older
//     tokens and goes on (shift.go), as llama-server's --context-shift.
//   - llama-server's native API (native.go): POST /completion and
//     /completions (prompt as text, token ids, both mixed,
//     {"prompt_string"}, or several prompts in one request answered as an
//     array, nativeprompt.go; return_progress's prompt_progress events,
//     progress.go; n_predict, stream,
//     cache_prompt, return_tokens, n_probs, post_sampling_probs,
//     response_fields; content,
//     tokens, stop_type, timings, completion_probabilities), POST /tokenize
//     and /detokenize, GET /props and /slots (501 with NoSlots), POST
//     /apply-template (applytemplate.go: the rendered chat prompt).
//   - Embeddings (embeddings.go), with Embeddings: POST /v1/embeddings
//     (OpenAI's list, float or base64) and /embedding, /embeddings
//     (llama-server's array), a prompt per input in /completion's shapes,
//     pooled by Pooling; 501 without Embeddings, as llama-server's.
//   - OpenAI's Responses API (responses.go): POST /v1/responses (and
//     /responses) translated to a chat completion, answered as a response
//     object or Responses' events; /v1/responses/input_tokens and
//     /v1/chat/completions/input_tokens count a prompt's tokens.
//   - llama-server's opt-in agent routes (agentroutes.go): GET/POST
//     /tools with Options.Tools, its built-in tools acting on this host
//     (toolsapi.go, serve/hosttools), and GET/POST /cors-proxy with
//     MCPProxy (corsproxy.go); without them, 403 "this feature is
//     disabled". A chat's media parts are checked against MediaPath and
//     refused as a text model's (media.go).
//
// A chat's template fields (chattemplate.go) are llama-server's:
// add_generation_prompt, continue_final_message (an assistant's last
// message is continued), chat_template_kwargs as Jinja variables beside
// the date; a reasoning budget (budget.go) forces </think> after N tokens
// of reasoning.
//
// A request's sampling hooks — logit_bias (token ids or strings, pairs or an
// object), ignore_eos, the capture of each token's probabilities, and a
// grammar (grammar, json_schema, response_format, lazily with
// grammar_triggers: a sample/grammar mask, grammar.go) — are a sample.Chain
// the session samples with (probs.go; docs/slots.md); tools and
// tool_choice render through the Jinja template and come back as
// tool_calls parsed per template family, enforced by a grammar (tools.go,
// serve/toolcall); /v1/messages and /v1/messages/count_tokens translate
// Anthropic's Messages API to a chat completion (anthropic.go); a request field pipe cannot honour (the legacy
// functions, samplers pipe does not have) is a 400 naming it, never
// ignored (fields.go).
//
// Anything else is 404; a wrong method 405; bad JSON, bad fields and a
// request that does not fit the context 400; an oversized body 413 (the
// limit follows the context, bodyLimit); a body that is not
// application/json 415; a missing or wrong API key 401 (every route but
// /health); a Host or browser Origin the server does not answer 403
// (guard.go; the origins are llama-server's --cors-origins, and every
// OPTIONS is a CORS preflight answered 200 before authentication, cors.go). A request's JSON
// type errors name the field and the type it needs in JSON's words.
//
// # Invariants
//
// One model is loaded for the server's lifetime and one decode.Session holds
// its KV cache, so the expert cache stays warm across requests. Requests
// queue for a single decode slot and are decoded one at a time; a request
// is parsed, sized and tokenized before it queues. A request's prompt reuses
// the KV of the longest prefix it shares with what the session holds
// (decode.Session.Reuse) when the previous request was its tenant's and it
// extends that request's whole prompt or names the same prompt_cache_key
// (tenant.go), so a chat that grows by one turn prefills only the new turn
// and no client learns another's prompt from cached_tokens.
//
// With Parallel N above 1 (parallel.go) there are N slots of Ctx/N
// positions instead (with KVUnified, sharing one pool of Ctx), decoded together by a decode.Batch (continuous
// batching: a step is one forward pass over every slot with work); a
// request takes a free slot (by shared prompt, --slot-prompt-similarity,
// else least recently used), reuses its KV under the same tenant rule slot
// by slot, and queues while all are busy.
//
// # Concurrency and cancellation
//
// Each request runs on its net/http goroutine; the slot (a channel of
// capacity one) serialises everything that touches the Model or Session. A
// request's context is cancelled when its client disconnects or the server
// shuts down; the decode loop checks it at every token and inside the
// forward pass, so the slot is free within one token. Serve shuts down on
// its context's cancellation: it cancels running and queued requests, waits
// for their handlers (bounded by ShutdownGrace) and returns nil.
//
// # Logging
//
// Every request logs one zerolog event `request` (id, method, path, status,
// duration_ms and, for generations, prompt_tokens, cached_tokens,
// completion_tokens, queue_ms, ttft_ms, tok_s, cache_hit_pct, read_MiB, stall_ms,
// finish_reason; null where not applicable). net/http's own errors are
// logged as `http_error` events.
package serve

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"log"
	"net"
	"net/http"
	"strings"
	"time"

	"github.com/rs/zerolog"

	"github.com/pipe-engine/pipe/decode"
	"github.com/pipe-engine/pipe/model"
	"github.com/pipe-engine/pipe/sample"
	"github.com/pipe-engine/pipe/serve/hosttools"
)

// Options configure a Server.
type Options struct {
	// Model is the loaded model; the caller opens and closes it.
	Model *decode.Model
	// ModelID is the model's name in /v1/models and in responses.
	ModelID string
	// ModelAliases and ModelTags are listed in /v1/models' entry as
	// "aliases" and "tags" (llama-server's --alias and --tags; the caller
	// makes ModelID the first alias, as llama-server does).
	ModelAliases, ModelTags []string
	// NoUI turns the chat page off: / and /page/ are 404 (llama-server's
	// --no-ui).
	NoUI bool
	// ModelPath is the model file, for /props.
	ModelPath string
	// Version is the server's build, for /props' build_info.
	Version string
	// Fingerprint names the build in OpenAI responses' system_fingerprint
	// (llama-server's b<build>-<commit>).
	Fingerprint string
	// Ctx is the KV positions of the served session (0: decode.DefaultCtx).
	Ctx int
	// Sampling are the defaults of fields a request leaves out; Seed is the
	// seed of a request without one (negative: a random seed per request).
	Sampling sample.Params
	Seed     int64
	// MaxTokens is the limit of generated tokens of a request that sets
	// none; a request's own limit wins (llama-server's -n; 0 or negative:
	// none).
	MaxTokens int
	// Stops end every request's text, besides its own "stop" (llama-server's
	// -r, --reverse-prompt).
	Stops []string
	// NoThink renders chats with an empty think block (Qwen3).
	NoThink bool
	// TemplateKwargs are every chat's chat_template_kwargs, under the
	// request's own (llama-server's --chat-template-kwargs): enable_thinking
	// (a bool) over NoThink, the rest Jinja variables.
	TemplateKwargs map[string]json.RawMessage
	// ReasoningFormat is the chats' reasoning format when a request sets
	// none (reasoning.go; "": ReasoningNone).
	ReasoningFormat string
	// ReasoningBudget is the most tokens a chat's reasoning may take before
	// </think> is forced, when a request sets none (llama-server's
	// --reasoning-budget; nil or -1: none, 0: end it at once; budget.go);
	// ReasoningBudgetMessage is forced before </think>.
	ReasoningBudget        *int
	ReasoningBudgetMessage string
	// APIKey, if set, is required as `Authorization: Bearer KEY` on every
	// route but /health.
	APIKey string
	// AllowedHosts are host names, besides IP literals, localhost and the
	// listening host, that requests may name in their Host header ("*":
	// any). A DNS name the server does not know is how DNS rebinding
	// reaches a loopback server from a web page, so it is refused (403).
	AllowedHosts []string
	// CORSOrigins are the web origins whose pages may call the API from a
	// browser besides the server's own (llama-server's --cors-origins:
	// scheme://host[:port], "*": any, "localhost": any of localhost,
	// 127.0.0.1, ::1; none: "*" with an APIKey, else "localhost"); a request
	// with another Origin is refused (403) and its preflight gets no
	// Access-Control-Allow-Origin. CORSMethods and CORSHeaders are the
	// preflight's Allow-Methods and Allow-Headers (""; llama-server's
	// defaults); CORSNoCredentials turns Allow-Credentials off (cors.go).
	CORSOrigins       []string
	CORSMethods       string
	CORSHeaders       string
	CORSNoCredentials bool
	Log               zerolog.Logger
	// Verbose adds __verbose to every OpenAI answer that is not streamed,
	// as llama-server's --verbose (a request's "verbose": true does it for
	// that request).
	Verbose bool
	// NoSlots and NoMetrics turn GET /slots and GET /metrics off (501, as
	// llama-server's --no-slots and its default without --metrics; pipe
	// serve's --metrics is off by default too).
	NoSlots, NoMetrics bool
	// Parallel is the decode slots (llama-server's --parallel; 0 or 1: one
	// session, requests decoded one at a time): above 1, Ctx is split among
	// them and they decode together (parallel.go). Ubatch is the most prompt
	// tokens a slot feeds per pass (0: 512); SlotSimilarity is
	// --slot-prompt-similarity (0: a free slot by least recent use only).
	Parallel       int
	KVUnified      bool // the slots share one pool of Ctx positions (llama-server's --kv-unified)
	Ubatch         int
	SlotSimilarity float64
	// Batch is llama-server's --batch-size (-b): the one session feeds a
	// prompt Batch tokens at a time and a return_progress stream gets an
	// event after each (0: 512, the engine's forward pass; the output is
	// the same bits whatever it is).
	Batch int
	// ContextShift lets a generation that fills its slot's context go on
	// after dropping older tokens (llama-server's --context-shift,
	// shift.go); Keep is how many of the prompt's first tokens always stay
	// (--keep; -1: all of the prompt; a request's n_keep wins).
	ContextShift bool
	Keep         int
	// Embeddings turns on POST /v1/embeddings, /embeddings and /embedding
	// (embeddings.go; llama-server's --embedding, else they are 501);
	// Pooling is how a prompt's rows become its embedding (none: every
	// token's row, which /v1/embeddings refuses), and EmbdNormalize the
	// normalisation of a pooled one when a request sets none (nil: 2,
	// Euclidean; llama-server's --embd-normalize).
	Embeddings    bool
	Pooling       model.Pooling
	EmbdNormalize *int
	// Tools are llama-server's built-in tools served at /tools ("all" or
	// their names; none: /tools is 403), which act on this host
	// (toolsapi.go, serve/hosttools); with them the CORS origins default
	// to "localhost" whatever the APIKey, as llama-server's. MCPProxy
	// serves /cors-proxy (corsproxy.go; off: 403).
	Tools    []string
	MCPProxy bool
	// MediaPath is the directory a chat's file:// media URLs name files
	// under (llama-server's --media-path; "": file:// URLs are refused);
	// pipe checks the file and answers a text model's error (media.go).
	MediaPath string
	// SlotSavePath is the directory of POST /slots/{id}?action=save|restore
	// files (llama-server's --slot-save-path; empty: the actions are 501).
	SlotSavePath string
	// MaxBodyBytes bounds a request body (0: what the context can use,
	// bodyLimit).
	MaxBodyBytes int64
	// Timeouts (0: the defaults below).
	ReadTimeout, WriteTimeout, IdleTimeout, ShutdownGrace time.Duration
}

// Defaults of Options.
const (
	DefaultReadTimeout   = 30 * time.Second  // request headers and body
	DefaultWriteTimeout  = 60 * time.Second  // each write of a response
	DefaultIdleTimeout   = 120 * time.Second // keep-alive between requests
	DefaultShutdownGrace = 10 * time.Second
)

// Server serves one model. Create it with New; its methods are Handler
// (the route table) and Serve. Each job is a type of its own:
//
//   - requests (handlers.go): the plumbing every route shares — the guard
//     (guard.go), the method and key checks, body reading, error answers
//     and the request log;
//   - intake (intake.go): a parsed job sized, tokenized and given its
//     sampler hooks before it queues (grammar.go, probs.go);
//   - generator (generate.go): a prepared job run in the decode slot
//     (decodeSlot, slot.go) or on a slot of the batch (batchSlots,
//     parallel.go), its text sent to an emitter (emit.go), and its
//     generation settings and final answer described (native.go);
//   - the route families: openAI (openai.go), nativeAPI (native.go) and
//     infoAPI (info.go: health, metrics, props, slots and the page), and
//     slotAPI (slotfile.go: slot save, restore, erase);
//   - the telemetry strip (strips, telemetry.go) and the Prometheus meters
//     (meters, metrics.go).
type Server struct {
	parts
	openai  openAI
	native  nativeAPI
	info    infoAPI
	slotAct slotAPI        // POST /slots/{id} (slotfile.go)
	tools   *hosttools.Set // --tools (agentroutes.go); nil: none
}

// parts are the jobs every route family uses.
type parts struct {
	o   *Options // with New's defaults filled in
	rq  *requests
	in  *intake
	gen *generator
}

// New makes the server's session (its KV cache is allocated here).
func New(o Options) (*Server, error) {
	if o.Model == nil {
		return nil, errors.New("serve: no model")
	}
	if o.Ctx == 0 {
		o.Ctx = decode.DefaultCtx
	}
	def := func(d *time.Duration, v time.Duration) {
		if *d == 0 {
			*d = v
		}
	}
	def(&o.ReadTimeout, DefaultReadTimeout)
	def(&o.WriteTimeout, DefaultWriteTimeout)
	def(&o.IdleTimeout, DefaultIdleTimeout)
	def(&o.ShutdownGrace, DefaultShutdownGrace)
	if o.MaxBodyBytes == 0 {
		o.MaxBodyBytes = bodyLimit(o.Ctx, o.Model.Tokenizer().MaxTokenBytes())
	}
	if err := o.Sampling.Validate(); err != nil {
		return nil, err
	}
	if _, _, err := templateKwargs(o.TemplateKwargs); err != nil {
		return nil, fmt.Errorf("serve: TemplateKwargs: %w", err)
	}
	tools, err := newTools(&o)
	if err != nil {
		return nil, err
	}
	now := time.Now()
	met := newMeters()
	op := &o
	strips := &strips{m: o.Model}
	gen := &generator{o: op, met: met, strips: strips}
	if err := gen.makeSlots(); err != nil {
		return nil, err
	}
	nCtx := gen.nCtx
	p := parts{o: op,
		rq:  &requests{o: op, met: met, guard: newGuard(o), idBase: fmt.Sprintf("%x", now.UnixNano())},
		in:  &intake{o: op, nCtx: nCtx},
		gen: gen,
	}
	s := &Server{parts: p, openai: openAI{parts: p, created: now.Unix()}, native: nativeAPI{p},
		info: infoAPI{parts: p, met: met, nCtx: nCtx}, slotAct: slotAPI{p}, tools: tools}
	o.Model.OnRoute(strips.observe)
	return s, nil
}

// Close stops the batch's scheduler (with --parallel above 1; Serve does it
// when it returns). The Model stays open: the caller closes it.
func (s *Server) Close() {
	if s.gen.batch != nil {
		s.gen.batch.b.Close()
	}
}

// bodyLimit is the largest body a context of nCtx positions can use: every
// token at the vocabulary's longest (maxToken bytes), every byte escaped in
// JSON (at most 6 bytes, \u0001), and 64 KiB for the rest of the request.
func bodyLimit(nCtx, maxToken int) int64 {
	return 64<<10 + 6*int64(nCtx)*int64(max(maxToken, 1))
}

// Handler is the server's routes.
func (s *Server) Handler() http.Handler {
	mux := http.NewServeMux()
	route, ai, nat, inf := s.rq.route, &s.openai, &s.native, &s.info
	for _, p := range []string{"", "/v1"} {
		mux.Handle(p+"/chat/completions", route(http.MethodPost, true, ai.chat))
		mux.Handle(p+"/models", route(http.MethodGet, true, ai.models))
		mux.Handle(p+"/health", route(http.MethodGet, false, inf.health))
	}
	// as llama-server's: /v1/completions is OpenAI's, /completions (and
	// /completion) the native one
	mux.Handle("/v1/completions", route(http.MethodPost, true, ai.completion))
	mux.Handle("/completions", route(http.MethodPost, true, nat.completion))
	mux.Handle("/completion", route(http.MethodPost, true, nat.completion))
	mux.Handle("/tokenize", route(http.MethodPost, true, nat.tokenize))
	mux.Handle("/detokenize", route(http.MethodPost, true, nat.detokenize))
	mux.Handle("/apply-template", route(http.MethodPost, true, (&templateAPI{s.parts}).apply))
	anth := &anthropic{s.parts}
	mux.Handle("/v1/messages", route(http.MethodPost, true, anth.messages))
	mux.Handle("/v1/messages/count_tokens", route(http.MethodPost, true, anth.countTokens))
	resp := &responsesAPI{s.parts}
	for _, p := range []string{"", "/v1"} {
		mux.Handle(p+"/responses", route(http.MethodPost, true, resp.create))
		mux.Handle(p+"/responses/input_tokens", route(http.MethodPost, true, resp.inputTokens))
		mux.Handle(p+"/chat/completions/input_tokens", route(http.MethodPost, true, resp.chatInputTokens))
	}
	emb := &embeddingsAPI{s.parts}
	mux.Handle("/v1/embeddings", route(http.MethodPost, true, emb.oai))
	mux.Handle("/embeddings", route(http.MethodPost, true, emb.native))
	mux.Handle("/embedding", route(http.MethodPost, true, emb.native))
	mux.Handle("/props", route(http.MethodGet, true, inf.props))
	slots, metrics := inf.slots, inf.metrics
	if s.o.NoSlots {
		slots = s.rq.notSupported("This server does not support slots endpoint. Start it with `--slots`")
	}
	if s.o.NoMetrics {
		metrics = s.rq.notSupported("This server does not support metrics endpoint. Start it with `--metrics`")
	}
	mux.Handle("/slots", route(http.MethodGet, true, slots))
	mux.Handle("/slots/{id}", route(http.MethodPost, true, s.slotAct.action))
	mux.Handle("/metrics", route(http.MethodGet, true, metrics))
	if !s.o.NoUI {
		mux.Handle("GET /{$}", route(http.MethodGet, false, inf.page))
		mux.Handle("GET /page/", route(http.MethodGet, false, inf.page))
		mux.Handle("GET /sw.js", route(http.MethodGet, false, inf.page))
		mux.Handle("GET /manifest.webmanifest", route(http.MethodGet, false, inf.page))
		mux.Handle("GET /_app/version.json", route(http.MethodGet, false, inf.version))
	}
	s.agentRoutes(mux)
	mux.Handle("/", route("", true, s.rq.notFound))
	return mux
}

// Serve answers on ln until ctx is cancelled, then shuts down gracefully and
// returns nil (or the listener's error).
func (s *Server) Serve(ctx context.Context, ln net.Listener) error {
	if s.o.APIKey == "" && !loopback(ln.Addr()) {
		s.o.Log.Warn().Str("event", "no_api_key").Str("addr", ln.Addr().String()).
			Msg("serving on a non-loopback address without --api-key: anyone who can reach it can use the model")
	}
	s.warnAgent(ln.Addr()) // agentroutes.go
	defer s.Close()
	base, cancel := context.WithCancel(context.WithoutCancel(ctx))
	defer cancel()
	srv := &http.Server{
		Handler:           s.Handler(),
		ReadHeaderTimeout: s.o.ReadTimeout,
		ReadTimeout:       s.o.ReadTimeout,
		IdleTimeout:       s.o.IdleTimeout,
		MaxHeaderBytes:    64 << 10,
		BaseContext:       func(net.Listener) context.Context { return base },
		ErrorLog:          log.New(httpErrors{s.o.Log}, "", 0),
	}
	errc := make(chan error, 1)
	go func() { errc <- srv.Serve(ln) }()
	s.o.Log.Info().Str("event", "listening").Str("addr", ln.Addr().String()).Str("model", s.o.ModelID).
		Int("ctx", s.gen.nCtx).Int("slots", s.gen.totalSlots()).Msg("listening")
	select {
	case err := <-errc:
		return err
	case <-ctx.Done():
	}
	cancel() // running and queued generations end within one token
	sctx, stop := context.WithTimeout(context.Background(), s.o.ShutdownGrace)
	defer stop()
	err := srv.Shutdown(sctx)
	if serr := <-errc; !errors.Is(serr, http.ErrServerClosed) && err == nil {
		err = serr
	}
	s.o.Log.Info().Str("event", "shutdown").Msg("server stopped")
	return err
}

func loopback(a net.Addr) bool {
	ta, ok := a.(*net.TCPAddr)
	return ok && ta.IP.IsLoopback()
}

// httpErrors logs net/http's error messages as JSON events.
type httpErrors struct{ log zerolog.Logger }

func (h httpErrors) Write(p []byte) (int, error) {
	h.log.Warn().Str("event", "http_error").Msg(strings.TrimSpace(string(p)))
	return len(p), nil
}
