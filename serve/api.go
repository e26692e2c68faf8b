package serve

import (
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"reflect"
	"strings"

	"github.com/pipe-engine/pipe/sample"
	"github.com/pipe-engine/pipe/sample/grammar"
	"github.com/pipe-engine/pipe/tokenizer"
)

// ErrRequest marks a request the client must fix (HTTP 400).
var ErrRequest = errors.New("bad request")

func badRequest(format string, a ...any) error {
	return fmt.Errorf("%w: %s", ErrRequest, fmt.Sprintf(format, a...))
}

// samplingFields are the OpenAI (and llama-server) sampling fields a request
// may set; nil means the server's default.
type samplingFields struct {
	Temperature      *float32 `json:"temperature"`
	TopP             *float32 `json:"top_p"`
	TopK             *int     `json:"top_k"`
	MinP             *float32 `json:"min_p"`
	RepeatPenalty    *float32 `json:"repeat_penalty"`
	FrequencyPenalty *float32 `json:"frequency_penalty"`
	PresencePenalty  *float32 `json:"presence_penalty"`
	RepeatLastN      *int     `json:"repeat_last_n"`
	MinKeep          *int     `json:"min_keep"`
	Seed             *int64   `json:"seed"`
}

// commonFields are shared by both completion routes.
type commonFields struct {
	Model               string    `json:"model"`
	MaxTokens           *int      `json:"max_tokens"`
	MaxCompletionTokens *int      `json:"max_completion_tokens"`
	NPredict            *int      `json:"n_predict"` // llama-server's; wins over max_tokens, -1 = no limit
	Stop                stopField `json:"stop"`
	Stream              bool      `json:"stream"`
	N                   *int      `json:"n"`
	// PromptCacheKey (OpenAI's prompt_cache_key) names the client whose
	// earlier prompts' KV this request may reuse (see tenant).
	PromptCacheKey string `json:"prompt_cache_key"`
	// StreamOptions.IncludeUsage ends a stream with a usage chunk (emit.go).
	StreamOptions *struct {
		IncludeUsage bool `json:"include_usage"`
	} `json:"stream_options"`
	// Sampler hooks (probs.go): logit_bias, ignore_eos (llama-server's: a
	// banned end-of-generation), n_probs and post_sampling_probs.
	LogitBias         json.RawMessage `json:"logit_bias"`
	IgnoreEOS         bool            `json:"ignore_eos"`
	NProbs            *int            `json:"n_probs"`
	PostSamplingProbs bool            `json:"post_sampling_probs"`
	// Verbose adds __verbose to an OpenAI answer (llama-server's).
	Verbose bool `json:"verbose"`
	// ReturnProgress asks a stream for prompt_progress events (progress.go).
	ReturnProgress bool `json:"return_progress"`
	shiftFields         // n_keep, n_discard (shift.go)
	samplingFields
	grammarFields // grammar.go
}

// chatRequest is POST /v1/chat/completions.
type chatRequest struct {
	Messages        []chatMessage `json:"messages"`
	ReasoningFormat *string       `json:"reasoning_format"`
	Logprobs        *bool         `json:"logprobs"`
	TopLogprobs     *int          `json:"top_logprobs"`
	commonFields
	toolFields         // tools.go
	budgetFields       // budget.go
	chatTemplateFields // chattemplate.go
}

// completionRequest is POST /v1/completions.
type completionRequest struct {
	Prompt   promptField `json:"prompt"`
	Logprobs *int        `json:"logprobs"` // n_probs' alias
	commonFields
}

type chatMessage struct {
	Role       string       `json:"role"`
	Content    contentField `json:"content"`
	ToolCalls  []toolCallIn `json:"tool_calls"`   // an assistant turn's (tools.go)
	ToolCallID string       `json:"tool_call_id"` // a tool turn's
}

// contentField is a message's content: a string or an array of parts:
// "text" parts (text joins them, parts keeps them) and llama-server's media
// parts (image_url, input_audio, input_video), kept in media with their
// part index for checkMedia (media.go).
type contentField struct {
	text  string
	parts []string
	media []mediaRef // msg unset: the message's index is the caller's
}

// String is the content's text.
func (c contentField) String() string { return c.text }

// prefill is the content as llama.cpp continues an assistant's last
// message: its parts joined by a blank line (common_chat_msg::render_content).
func (c contentField) prefill() string {
	if c.parts == nil {
		return c.text
	}
	return strings.Join(c.parts, "\n\n")
}

// contentPart is one part of an array content.
type contentPart struct {
	Type     string `json:"type"`
	Text     string `json:"text"`
	ImageURL struct {
		URL string `json:"url"`
	} `json:"image_url"`
	InputAudio mediaData `json:"input_audio"`
	InputVideo mediaData `json:"input_video"`
}

// mediaData is an input_audio or input_video part's data (or url, as
// llama-server reads either).
type mediaData struct {
	Data string `json:"data"`
	URL  string `json:"url"`
}

func (d mediaData) ref() string {
	if d.Data != "" {
		return d.Data
	}
	return d.URL
}

func (c *contentField) UnmarshalJSON(b []byte) error {
	var s string
	if err := json.Unmarshal(b, &s); err == nil {
		*c = contentField{text: s}
		return nil
	}
	var parts []contentPart
	if err := json.Unmarshal(b, &parts); err != nil {
		return errors.New("content: want a string or an array of parts")
	}
	var sb strings.Builder
	c.parts = make([]string, 0, len(parts))
	for i, p := range parts {
		switch p.Type {
		case "text":
			sb.WriteString(p.Text)
			c.parts = append(c.parts, p.Text)
		case "image_url":
			c.media = append(c.media, mediaRef{part: i, kind: "image", url: p.ImageURL.URL})
		case "input_audio":
			c.media = append(c.media, mediaRef{part: i, kind: "audio", url: p.InputAudio.ref()})
		case "input_video":
			c.media = append(c.media, mediaRef{part: i, kind: "video", url: p.InputVideo.ref()})
		default:
			return fmt.Errorf("content[%d]: part type %q is not supported (text, image_url, input_audio or input_video)", i, p.Type)
		}
	}
	c.text = sb.String()
	return nil
}

// chatMedia is the media parts of a chat's messages, in order.
func chatMedia(msgs []chatMessage) []mediaRef {
	var out []mediaRef
	for i, m := range msgs {
		for _, r := range m.Content.media {
			r.msg = i
			out = append(out, r)
		}
	}
	return out
}

// promptField is a completion prompt: a string or an array of one string.
type promptField string

func (p *promptField) UnmarshalJSON(b []byte) error {
	var s string
	if err := json.Unmarshal(b, &s); err == nil {
		*p = promptField(s)
		return nil
	}
	var ss []string
	if err := json.Unmarshal(b, &ss); err != nil || len(ss) != 1 {
		return errors.New("prompt: want a string or an array of exactly one string")
	}
	*p = promptField(ss[0])
	return nil
}

// stopField is "stop": a string or an array of strings.
type stopField []string

func (s *stopField) UnmarshalJSON(b []byte) error {
	var one string
	if err := json.Unmarshal(b, &one); err == nil {
		*s = stopField{one}
		return nil
	}
	var many []string
	if err := json.Unmarshal(b, &many); err != nil {
		return errors.New("stop: want a string or an array of strings")
	}
	*s = many
	return nil
}

// maxStops bounds the stop sequences of one request.
const maxStops = 16

// job is a validated request, ready for the decode slot: one small part
// per concern, their fields promoted so a handler reads j.prompt or
// j.params alike.
type job struct {
	jobInput              // what to continue: a chat, a text or token ids
	jobTemplate           // how the chat template renders a chat
	jobPlacement          // where it runs: slot, prompt cache, tenant
	jobSampling           // how tokens are picked and when generation ends
	jobGrammar            // the grammar that constrains the tokens
	jobOutput             // what the answer carries and how it is sent
	tools        *toolJob // tools, tool_choice (nil: no tools; tools.go)
}

// jobInput is what a job continues.
type jobInput struct {
	chat        bool
	messages    []tokenizer.Message // chat
	prompt      string              // completion
	given       []int32             // /completion's prompt given as token ids
	morePrompts []subPrompt         // /completion's prompts as parsed (nativeprompt.go)
	media       []mediaRef          // a chat's media parts (media.go)
	ids         []int32
}

// jobTemplate is how the chat template renders a chat job (chattemplate.go,
// budget.go).
type jobTemplate struct {
	reasoning   string                     // the request's reasoning_format ("": the server's)
	think       *bool                      // the request's chat_template_kwargs.enable_thinking (nil: the server's --no-think)
	vars        map[string]json.RawMessage // the rest of its chat_template_kwargs (chattemplate.go)
	noGenPrompt bool                       // add_generation_prompt: false
	prefill     *string                    // the continued last message's text (continue_final_message)
	budget      *int                       // the request's reasoning budget (nil: the server's; budget.go)
	budgetMsg   *string                    // the request's reasoning_budget_message (nil: the server's)
}

// jobPlacement is where a job runs, what it may reuse and what it keeps
// when its context fills.
type jobPlacement struct {
	noCache  bool   // /completion's cache_prompt: false (prefill the whole prompt)
	idSlot   *int   // /completion's id_slot: the slot to run on (nil or -1: any)
	cacheKey string // prompt_cache_key
	who      tenant // set by the handler
	nKeep    *int   // n_keep (nil: the server's --keep; shift.go)
	nDiscard *int   // n_discard (nil: half of what is not kept)
}

// jobSampling is how a job's tokens are picked and when it ends.
type jobSampling struct {
	maxTokens int // < 0: until end-of-generation or the context is full
	stops     []string
	n         int // choices (n; 0: 1)
	params    sample.Params
	seed      *int64          // as requested (nil: the server's default)
	biasRaw   json.RawMessage // logit_bias as given
	ignoreEOS bool
	bias      []sample.Bias // logit_bias and ignore_eos, resolved by prepare
}

// jobGrammar is the grammar that constrains a job's tokens.
type jobGrammar struct {
	gram       *grammar.Grammar // grammar, json_schema or response_format (nil: none)
	grammarSrc string           // its GBNF text
	mask       sample.Mask      // gram's matcher, made by prepare
	lazy       bool             // grammar_lazy with triggers
	triggers   []grammar.Trigger
}

// jobOutput is what a job's answer carries and how it is sent.
type jobOutput struct {
	fields       []string // /completion's response_fields (none: all)
	progress     bool     // return_progress: prompt_progress events in the stream (progress.go)
	verbose      bool     // __verbose in an OpenAI answer
	stream       bool
	includeUsage bool     // stream_options.include_usage (emit.go)
	probs        probsReq // logprobs, n_probs
}

// textBytes is the length of the job's text: its tokens are at least
// decode.Model.MinTokens of it.
func (j *jobInput) textBytes() int {
	if !j.chat {
		return len(j.prompt)
	}
	n := 0
	for _, m := range j.messages {
		n += len(m.Content)
	}
	return n
}

func (c *commonFields) toJob(def sample.Params, j *job) error {
	if err := c.choices(j); err != nil { // choices.go
		return err
	}
	j.maxTokens = -1 // "model" may name anything: one model is served
	for _, v := range []*int{c.MaxTokens, c.MaxCompletionTokens} {
		if v != nil {
			if *v < 1 {
				return badRequest("max_tokens %d must be >= 1", *v)
			}
			j.maxTokens = *v
		}
	}
	if v := c.NPredict; v != nil {
		if *v < -1 {
			return badRequest("n_predict %d must be >= 0, or -1 (no limit)", *v)
		}
		j.maxTokens = *v
	}
	if len(c.Stop) > maxStops {
		return badRequest("stop: %d sequences, at most %d", len(c.Stop), maxStops)
	}
	for _, s := range c.Stop {
		if s == "" {
			return badRequest("stop: empty sequence")
		}
	}
	j.stops, j.stream, j.progress = c.Stop, c.Stream, c.ReturnProgress
	if err := c.shiftFields.parse(j); err != nil {
		return err
	}
	j.includeUsage = c.Stream && c.StreamOptions != nil && c.StreamOptions.IncludeUsage
	p := c.samplingFields.apply(def)
	if err := p.Validate(); err != nil {
		return badRequest("%v", err)
	}
	if p.Temp > 2 || p.Temp < 0 {
		return badRequest("temperature %v must be in [0, 2]", p.Temp)
	}
	if v := c.RepeatLastN; v != nil && *v < -1 {
		return badRequest("repeat_last_n %d must be >= 0, or -1 (the whole history)", *v)
	}
	j.params, j.seed, j.cacheKey = p, c.Seed, c.PromptCacheKey
	j.probs.post, j.biasRaw, j.ignoreEOS = c.PostSamplingProbs, c.LogitBias, c.IgnoreEOS
	return nil
}

// verbose takes an OpenAI request's verbose: __verbose in the answer, not
// streamed by pipe (a 400 naming it).
func (c *commonFields) verbose(j *job) error {
	if c.Verbose && c.Stream {
		return fieldErr("verbose", "verbose: __verbose is not streamed by pipe serve")
	}
	j.verbose = c.Verbose
	return nil
}

// apply returns def with the request's fields set (the seed is resolved at
// decode time).
func (f *samplingFields) apply(def sample.Params) sample.Params {
	p := def
	set := func(dst *float32, v *float32) {
		if v != nil {
			*dst = *v
		}
	}
	set(&p.Temp, f.Temperature)
	set(&p.TopP, f.TopP)
	set(&p.MinP, f.MinP)
	set(&p.RepeatPenalty, f.RepeatPenalty)
	set(&p.FreqPenalty, f.FrequencyPenalty)
	set(&p.PresencePenalty, f.PresencePenalty)
	if f.TopK != nil {
		p.TopK = *f.TopK
	}
	if f.RepeatLastN != nil {
		p.RepeatLastN = *f.RepeatLastN
	}
	if f.MinKeep != nil {
		p.MinKeep = *f.MinKeep
	}
	return p
}

func parseChat(body []byte, def sample.Params) (job, error) {
	if err := checkFields(body); err != nil {
		return job{}, err
	}
	var r chatRequest
	if err := json.Unmarshal(body, &r); err != nil {
		return job{}, jsonError(err)
	}
	var j job
	j.chat = true
	msgs, err := chatMessages(r.Messages)
	if err != nil {
		return j, err
	}
	j.messages = msgs
	j.media = chatMedia(r.Messages)
	if r.ReasoningFormat != nil {
		j.reasoning = *r.ReasoningFormat
	}
	if err := r.chatTemplateFields.parse(r.Messages, &j); err != nil {
		return j, err
	}
	if err := r.toolFields.parse(&j); err != nil {
		return j, err
	}
	if err := r.budgetFields.parse(&j); err != nil {
		return j, err
	}
	if err := r.toJob(def, &j); err != nil {
		return j, err
	}
	if err := r.resolve(true, &j); err != nil {
		return j, err
	}
	if err := toolsBesideGrammar(&j); err != nil {
		return j, err
	}
	if err := r.verbose(&j); err != nil {
		return j, err
	}
	if r.Logprobs == nil && r.TopLogprobs == nil {
		// llama-server takes its native n_probs on the chat route too
		return j, nProbs(r.NProbs, nil, false, &j)
	}
	return j, chatProbs(r.Logprobs, r.TopLogprobs, &j)
}

func parseCompletion(body []byte, def sample.Params) (job, error) {
	if err := checkFields(body); err != nil {
		return job{}, err
	}
	var r completionRequest
	if err := json.Unmarshal(body, &r); err != nil {
		return job{}, jsonError(err)
	}
	var j job
	j.prompt = string(r.Prompt)
	if j.prompt == "" {
		return j, badRequest("prompt: a non-empty prompt is required")
	}
	if err := r.toJob(def, &j); err != nil {
		return j, err
	}
	if err := r.resolve(true, &j); err != nil {
		return j, err
	}
	if err := r.verbose(&j); err != nil {
		return j, err
	}
	return j, nProbs(r.NProbs, r.Logprobs, true, &j)
}

// usage is the OpenAI usage object.
type usage struct {
	PromptTokens        int           `json:"prompt_tokens"`
	CompletionTokens    int           `json:"completion_tokens"`
	TotalTokens         int           `json:"total_tokens"`
	PromptTokensDetails promptDetails `json:"prompt_tokens_details"`
}

// promptDetails.CachedTokens are the prompt tokens whose KV was reused from
// the previous request.
type promptDetails struct {
	CachedTokens int `json:"cached_tokens"`
}

type chatMsgOut struct {
	Role             string `json:"role,omitempty"`
	Content          string `json:"content"`
	ReasoningContent string `json:"reasoning_content,omitempty"`
}

type chatDelta struct {
	Role             string        `json:"role,omitempty"`
	Content          *string       `json:"content,omitempty"`
	ReasoningContent *string       `json:"reasoning_content,omitempty"`
	ToolCalls        []toolCallOut `json:"tool_calls,omitempty"`
}

type choice struct {
	Index        int     `json:"index"`
	Message      any     `json:"message,omitempty"` // *chatMsgOut or *toolMsgOut
	Delta        any     `json:"delta,omitempty"`   // *chatDelta or roleDelta
	Text         *string `json:"text,omitempty"`
	Logprobs     any     `json:"logprobs"` // nil: null
	FinishReason *string `json:"finish_reason"`
}

// response is a completion, a chat completion or one chunk of either.
type response struct {
	ID      string `json:"id"`
	Object  string `json:"object"`
	Created int64  `json:"created"`
	Model   string `json:"model"`
	// SystemFingerprint names the build, in every chunk too (as
	// llama-server's, see Options.Fingerprint).
	SystemFingerprint string   `json:"system_fingerprint"`
	Choices           []choice `json:"choices"`
	Usage             *usage   `json:"usage,omitempty"`
	// Timings are llama-server's, on a stream's usage chunk.
	Timings *timings `json:"timings,omitempty"`
	// Verbose is llama-server's __verbose: the answer in /completion's
	// shape, for a request with verbose: true (not streamed).
	Verbose *nativeFinal `json:"__verbose,omitempty"`
	// PromptProgress is a return_progress chunk's (progress.go).
	PromptProgress *promptProgress `json:"prompt_progress,omitempty"`
	// Pipe is the engine's telemetry of a streamed chunk (an extension
	// field; see telemetry).
	Pipe *telemetry `json:"pipe,omitempty"`
}

type apiError struct {
	Error apiErrorBody `json:"error"`
}

// apiErrorBody.Code is the HTTP status, or OpenAI's string code where it
// has one (model_not_found); Param names the field at fault, if any.
type apiErrorBody struct {
	Message string  `json:"message"`
	Type    string  `json:"type"`
	Param   *string `json:"param,omitempty"`
	Code    any     `json:"code"`
	// NPromptTokens and NCtx are set on an exceed_context_size_error (see
	// contextError), as llama-server sets them.
	NPromptTokens *int `json:"n_prompt_tokens,omitempty"`
	NCtx          *int `json:"n_ctx,omitempty"`
}

// errorBody is err's error object with the type typ and the HTTP status
// code: a contextError's type is exceed_context_size_error, with its counts;
// a fieldError names its field in param.
func errorBody(code int, typ string, err error) apiErrorBody {
	body := apiErrorBody{Message: err.Error(), Type: typ, Code: &code}
	var ce *contextError
	if errors.As(err, &ce) {
		body.Type, body.NPromptTokens, body.NCtx = "exceed_context_size_error", &ce.prompt, &ce.nCtx
	}
	if f, ok := fieldOf(err); ok {
		body.Param = &f
	}
	return body
}

// jsonError turns a request body's decoding error into plain words: the
// field and the JSON type it needs, never Go's type names.
func jsonError(err error) error {
	var te *json.UnmarshalTypeError
	var se *json.SyntaxError
	switch {
	case errors.As(err, &te):
		field := te.Field
		if field == "" {
			field = "the body"
		}
		return badRequest("%s: want %s, got %s", field, jsonKind(te.Type), jsonValueWord(te.Value))
	case errors.As(err, &se):
		return badRequest("invalid JSON at byte %d: %s", se.Offset, strings.TrimPrefix(se.Error(), "json: "))
	case errors.Is(err, io.ErrUnexpectedEOF):
		return badRequest("invalid JSON: the body ends too early")
	}
	// the custom fields' own messages ("stop: want a string or …")
	return badRequest("%s", strings.TrimPrefix(err.Error(), "json: "))
}

// jsonKind names what a Go type holds in JSON's words.
func jsonKind(t reflect.Type) string {
	if t == nil {
		return "another type"
	}
	switch t.Kind() {
	case reflect.Int, reflect.Int8, reflect.Int16, reflect.Int32, reflect.Int64,
		reflect.Uint, reflect.Uint8, reflect.Uint16, reflect.Uint32, reflect.Uint64:
		return "an integer"
	case reflect.Float32, reflect.Float64:
		return "a number"
	case reflect.String:
		return "a string"
	case reflect.Bool:
		return "true or false"
	case reflect.Slice, reflect.Array:
		return "an array"
	case reflect.Pointer:
		return jsonKind(t.Elem())
	}
	return "an object"
}

// jsonValueWord is an UnmarshalTypeError's Value ("number 1.5", "string")
// with an article.
func jsonValueWord(v string) string {
	switch {
	case strings.HasPrefix(v, "number"):
		return "a " + v
	case v == "array" || v == "object":
		return "an " + v
	case v == "bool":
		return "true or false"
	}
	return "a " + v
}
