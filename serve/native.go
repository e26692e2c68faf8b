package serve

import (
	"bytes"
	"encoding/json"
	"net/http"
	"strings"
	"time"
	"unicode/utf8"

	"github.com/pipe-engine/pipe/sample"
)

// llama-server's native API, beside the OpenAI one: POST /completion,
// /tokenize and /detokenize, GET /props and /slots, in the shapes
// llama-server (tools/server) gives them.

// nativeRequest is POST /completion.
type nativeRequest struct {
	Prompt       nativePrompt `json:"prompt"`
	CachePrompt  *bool        `json:"cache_prompt"` // default true
	ReturnTokens bool         `json:"return_tokens"`
	IDSlot       *int         `json:"id_slot"`  // -1: any
	Logprobs     *int         `json:"logprobs"` // n_probs' alias
	// ResponseFields keeps only these fields of the answer (see pick).
	ResponseFields []string `json:"response_fields"`
	commonFields
}

func parseNative(body []byte, def sample.Params) (job, bool, error) {
	if err := checkFields(body); err != nil {
		return job{}, false, err
	}
	var r nativeRequest
	if err := json.Unmarshal(body, &r); err != nil {
		return job{}, false, jsonError(err)
	}
	var j job
	j.noCache, j.fields, j.idSlot = r.CachePrompt != nil && !*r.CachePrompt, r.ResponseFields, r.IDSlot
	if len(r.Prompt.subs) > 0 {
		j.prompt, j.given = r.Prompt.subs[0].text, r.Prompt.subs[0].ids
		j.morePrompts = r.Prompt.subs
	}
	if j.prompt == "" && j.given == nil && (len(r.Prompt.subs) == 0 || r.Prompt.subs[0].parts == nil) {
		return j, false, badRequest("prompt: a non-empty prompt is required")
	}
	if err := r.toJob(def, &j); err != nil {
		return j, false, err
	}
	if err := r.resolve(false, &j); err != nil {
		return j, false, err
	}
	return j, r.ReturnTokens, nProbs(r.NProbs, r.Logprobs, false, &j)
}

// nativeAPI is llama-server's native routes: POST /completion (and
// /completions), /tokenize and /detokenize.
type nativeAPI struct{ parts }

func (s *nativeAPI) completion(x *exchange) {
	body, ok := s.rq.readBody(x)
	if !ok {
		return
	}
	j, returnTokens, err := parseNative(body, s.o.Sampling)
	if subs := j.morePrompts; err == nil && (len(subs) > 1 || subs[0].parts != nil) {
		j.morePrompts = nil
		s.several(x, j, subs, returnTokens)
		return
	}
	if err = s.in.admit(x.r, &j, err); err != nil {
		s.rq.failGen(x, nil, err)
		return
	}
	x.gen = &outcome{}
	n := &native{gen: s.gen, j: &j, o: x.gen, w: x.w, returnTokens: returnTokens, pf: s.gen.probFormat(&j)}
	var em emitter = n
	var st *sse
	if j.stream {
		st = &sse{w: x.w, rc: http.NewResponseController(x.w), timeout: s.o.WriteTimeout}
		n.stream = st
	}
	if err := s.gen.generate(x.r.Context(), &j, em, x.start, x.gen); err != nil {
		s.rq.failGen(x, st, err)
	}
}

// native is /completion's emitter: one JSON object at the end, or (stream)
// an event per piece of text and a last one with stop: true; no [DONE].
type native struct {
	gen          *generator
	j            *job
	o            *outcome // the generation's, filled as it goes
	w            http.ResponseWriter
	stream       *sse // nil: not streaming
	returnTokens bool
	buf          strings.Builder
	ids          []int32
	predicted    int
	pf           *probFormat // nil: no n_probs
	probs        []sample.TokenProbs
	index        int    // the prompt's, in a request of several (nativeprompt.go)
	collect      *[]any // non-nil: a request of several prompts' answers, appended to by end
}

// nativeChunk is one streamed piece.
type nativeChunk struct {
	Index           int     `json:"index"`
	Content         string  `json:"content"`
	Tokens          []int32 `json:"tokens"`
	Stop            bool    `json:"stop"`
	IDSlot          int     `json:"id_slot"`
	TokensPredicted int     `json:"tokens_predicted"`
	TokensEvaluated int     `json:"tokens_evaluated"`
	// CompletionProbabilities are the piece's tokens' (n_probs).
	CompletionProbabilities []map[string]any `json:"completion_probabilities,omitempty"`
	Pipe                    *telemetry       `json:"pipe,omitempty"`
}

// nativeFinal is the whole answer, or the stream's last event.
type nativeFinal struct {
	Index              int            `json:"index"`
	Content            string         `json:"content"`
	Tokens             []int32        `json:"tokens"`
	IDSlot             int            `json:"id_slot"`
	Stop               bool           `json:"stop"`
	Model              string         `json:"model"`
	TokensPredicted    int            `json:"tokens_predicted"`
	TokensEvaluated    int            `json:"tokens_evaluated"`
	GenerationSettings map[string]any `json:"generation_settings"`
	Prompt             string         `json:"prompt"`
	HasNewLine         bool           `json:"has_new_line"`
	Truncated          bool           `json:"truncated"`
	StopType           string         `json:"stop_type"`
	StoppingWord       string         `json:"stopping_word"`
	TokensCached       int            `json:"tokens_cached"`
	Timings            timings        `json:"timings"`
	// CompletionProbabilities are every token's (n_probs; not streamed).
	CompletionProbabilities []map[string]any `json:"completion_probabilities,omitempty"`
}

// timings are llama-server's per-request timings.
type timings struct {
	CacheN              int     `json:"cache_n"`
	PromptN             int     `json:"prompt_n"`
	PromptMs            float64 `json:"prompt_ms"`
	PromptPerTokenMs    float64 `json:"prompt_per_token_ms"`
	PromptPerSecond     float64 `json:"prompt_per_second"`
	PredictedN          int     `json:"predicted_n"`
	PredictedMs         float64 `json:"predicted_ms"`
	PredictedPerTokenMs float64 `json:"predicted_per_token_ms"`
	PredictedPerSecond  float64 `json:"predicted_per_second"`
}

func timingsOf(o *outcome) timings {
	per := func(n int, d time.Duration) (float64, float64) {
		if n == 0 || d <= 0 {
			return 0, 0
		}
		return ms(d) / float64(n), float64(n) / d.Seconds()
	}
	t := timings{CacheN: o.cachedTokens, PromptN: o.promptTokens - o.cachedTokens, PromptMs: ms(o.prefill),
		PredictedN: o.genTokens, PredictedMs: ms(o.lastTok)}
	t.PromptPerTokenMs, t.PromptPerSecond = per(t.PromptN, o.prefill)
	// as llama-server's: the first token comes from the prompt pass, so the
	// rate is over the steps after it (the first token to the last)
	t.PredictedPerTokenMs, t.PredictedPerSecond = per(max(o.genTokens-1, 0), o.lastTok)
	return t
}

func (n *native) begin() error {
	if n.stream != nil && !n.stream.started { // the first of several prompts begins the stream
		return n.stream.begin()
	}
	return nil
}

func (n *native) text(p piece) error {
	n.predicted += len(p.ids)
	if n.stream != nil {
		c := nativeChunk{Index: n.index, Content: p.text, Tokens: nonNil(p.ids), TokensPredicted: n.predicted, IDSlot: n.o.slot,
			TokensEvaluated: n.o.promptTokens, Pipe: p.tel}
		if n.pf != nil && len(p.probs) > 0 {
			c.CompletionProbabilities = n.pf.entries(p.probs)
		}
		return n.stream.event(c)
	}
	n.buf.WriteString(p.text)
	n.probs = append(n.probs, p.probs...)
	if n.returnTokens {
		n.ids = append(n.ids, p.ids...)
	}
	return nil
}

func (n *native) end(o *outcome) error {
	f := n.gen.final(n.j, o, n.buf.String(), n.ids)
	f.Index = n.index
	if n.stream != nil {
		f.Content = ""
	} else if n.pf != nil && len(n.probs) > 0 {
		f.CompletionProbabilities = n.pf.entries(n.probs)
	}
	var out any = f
	if len(n.j.fields) > 0 {
		picked, err := pick(f, n.j.fields)
		if err != nil {
			return err
		}
		out = picked
	}
	if n.stream != nil {
		return n.stream.event(out)
	}
	if n.collect != nil {
		*n.collect = append(*n.collect, out)
		return nil
	}
	return writeJSON(n.w, n.gen.o.WriteTimeout, http.StatusOK, out)
}

// final is a generation's answer in /completion's shape; the OpenAI
// routes' __verbose (a request's verbose: true) too. Its prompt is the text
// as given, else (token ids, a chat) the prompt's tokens' text.
func (s *generator) final(j *job, o *outcome, content string, ids []int32) nativeFinal {
	f := nativeFinal{Content: content, Tokens: nonNil(ids), Stop: true, Model: s.o.ModelID, IDSlot: o.slot,
		TokensPredicted: o.genTokens, TokensEvaluated: o.promptTokens, GenerationSettings: s.settings(j, o.maxTokens),
		Prompt: j.prompt, HasNewLine: strings.Contains(content, "\n"), StopType: o.stopType, StoppingWord: o.stopWord,
		TokensCached: o.cachedTokens + o.genTokens, Timings: timingsOf(o), Truncated: o.truncated}
	if j.given != nil || j.chat {
		f.Prompt = s.o.Model.Tokenizer().Decode(j.ids, true)
	}
	return f
}

// pick is v's JSON object with only the fields paths name, as
// llama-server's response_fields keeps them: a path is keys joined by "/"
// into nested objects, and the value it names is kept under the path
// itself ("generation_settings/n_predict" at the top); a path that names
// nothing is left out.
func pick(v any, paths []string) (map[string]any, error) {
	b, err := json.Marshal(v)
	if err != nil {
		return nil, err
	}
	dec := json.NewDecoder(bytes.NewReader(b))
	dec.UseNumber() // numbers as they were written
	var whole map[string]any
	if err := dec.Decode(&whole); err != nil {
		return nil, err
	}
	out := make(map[string]any, len(paths))
	for _, p := range paths {
		var cur any = whole
		found := true
		for _, k := range strings.Split(p, "/") {
			m, _ := cur.(map[string]any) // nil (names nothing) when cur is not an object
			if cur, found = m[k]; !found {
				break
			}
		}
		if found {
			out[p] = cur
		}
	}
	return out, nil
}

func nonNil(ids []int32) []int32 {
	if ids == nil {
		return []int32{}
	}
	return ids
}

// settings are a request's generation settings as llama-server names them
// (generation_settings, /props' default_generation_settings.params).
func (s *generator) settings(j *job, maxTokens int) map[string]any {
	p := s.o.Sampling
	var stops []string
	stream, cachePrompt := false, true
	var probs probsReq
	var bias []sample.Bias
	ignoreEOS := false
	grammarSrc := ""
	if j != nil {
		grammarSrc = j.grammarSrc
		p, stops, stream, cachePrompt = j.params, j.stops, j.stream, !j.noCache
		probs, bias, ignoreEOS = j.probs, j.bias, j.ignoreEOS
	}
	seed := s.o.Seed
	if j != nil && j.seed != nil {
		seed = *j.seed
	}
	shift := shiftPlan{keep: s.o.Keep}
	if j != nil {
		shift = s.shiftPlan(j)
	}
	return map[string]any{
		"n_keep": shift.keep, "n_discard": shift.discard,
		"n_predict": maxTokens, "seed": seed, "temperature": p.Temp, "top_k": p.TopK, "top_p": p.TopP,
		"min_p": p.MinP, "repeat_penalty": p.RepeatPenalty, "repeat_last_n": p.RepeatLastN,
		"frequency_penalty": p.FreqPenalty, "presence_penalty": p.PresencePenalty,
		"stop": nonNilStrings(stops), "stream": stream, "cache_prompt": cachePrompt,
		"min_keep": p.MinKeep, "n_probs": probs.top, "post_sampling_probs": probs.post, "ignore_eos": ignoreEOS,
		"logit_bias": biasJSON(bias), "grammar": grammarSrc,
		// llama-server's samplers pipe does not have, at the values that turn
		// them off (fields.go refuses a request that turns one on)
		"adaptive_target": -1.0, "adaptive_decay": 0.9, "mirostat": 0, "dynatemp_range": 0.0,
		"xtc_probability": 0.0, "typical_p": 1.0, "top_n_sigma": -1.0, "dry_multiplier": 0.0,
	}
}

func nonNilStrings(s []string) []string {
	if s == nil {
		return []string{}
	}
	return s
}

// tokenize is POST /tokenize: {"content", "add_special" (false),
// "parse_special" (true), "with_pieces" (false)} → {"tokens"}.
func (s *nativeAPI) tokenize(x *exchange) {
	body, ok := s.rq.readBody(x)
	if !ok {
		return
	}
	var r struct {
		Content      *string `json:"content"`
		AddSpecial   bool    `json:"add_special"`
		ParseSpecial *bool   `json:"parse_special"`
		WithPieces   bool    `json:"with_pieces"`
	}
	if err := json.Unmarshal(body, &r); err != nil {
		s.rq.fail(x, http.StatusBadRequest, "invalid_request_error", jsonError(err))
		return
	}
	type withPiece struct {
		ID    int32 `json:"id"`
		Piece any   `json:"piece"` // the text, or its bytes when not UTF-8
	}
	out := []any{}
	if r.Content != nil {
		tok := s.o.Model.Tokenizer()
		for _, id := range tok.Encode(*r.Content, r.AddSpecial, r.ParseSpecial == nil || *r.ParseSpecial) {
			if !r.WithPieces {
				out = append(out, id)
				continue
			}
			b := tok.Piece(nil, id, true)
			var piece any = string(b)
			if !utf8.Valid(b) {
				bs := make([]int, len(b))
				for i, c := range b {
					bs[i] = int(c)
				}
				piece = bs
			}
			out = append(out, withPiece{ID: id, Piece: piece})
		}
	}
	_ = writeJSON(x.w, s.o.WriteTimeout, http.StatusOK, map[string]any{"tokens": out})
}

// detokenize is POST /detokenize: {"tokens"} → {"content"}.
func (s *nativeAPI) detokenize(x *exchange) {
	body, ok := s.rq.readBody(x)
	if !ok {
		return
	}
	var r struct {
		Tokens []int32 `json:"tokens"`
	}
	if err := json.Unmarshal(body, &r); err != nil {
		s.rq.fail(x, http.StatusBadRequest, "invalid_request_error", jsonError(err))
		return
	}
	tok := s.o.Model.Tokenizer()
	n := int32(tok.NVocab())
	for i, id := range r.Tokens {
		if id < 0 || id >= n {
			s.rq.fail(x, http.StatusBadRequest, "invalid_request_error", badRequest("tokens[%d]: token %d is not in the vocabulary (0..%d)", i, id, n-1))
			return
		}
	}
	_ = writeJSON(x.w, s.o.WriteTimeout, http.StatusOK, map[string]string{"content": tok.Decode(r.Tokens, true)})
}
