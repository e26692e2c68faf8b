package serve

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"math"
	"strconv"
	"unicode/utf8"

	"github.com/pipe-engine/pipe/sample"
	"github.com/pipe-engine/pipe/tokenizer"
)

// Log-probabilities and the logit bias, as llama-server (tools/server at
// 3f545becc) takes and gives them: OpenAI's logprobs / top_logprobs on the
// chat route (top_logprobs defaults to 20 when logprobs is true), logprobs
// (a number, an alias of n_probs) on the completion routes, n_probs and
// post_sampling_probs on /completion; logit_bias as [[token, bias], …] or
// {"token": bias} where a token is an id or a string (its tokens all get the
// bias) and a bias is a number or false (banned).

// probsReq is what a request asked to see of each sampled token's
// probabilities.
type probsReq struct {
	on   bool
	top  int  // the most likely tokens shown beside it
	post bool // after the sampler chain (post_sampling_probs)
}

// hooks are the sampler hooks of a prepared job.
func (j *job) hooks() sample.Hooks {
	return sample.Hooks{Bias: j.bias, Mask: j.mask, Capture: j.probs.on, Top: j.probs.top, PostSampling: j.probs.post}
}

// defaultTopLogprobs is llama-server's top_logprobs when a chat request sets
// logprobs without it.
const defaultTopLogprobs = 20

// chatProbs reads a chat request's logprobs and top_logprobs.
func chatProbs(logprobs *bool, top *int, j *job) error {
	switch {
	case logprobs != nil && *logprobs:
		j.probs = probsReq{on: true, top: defaultTopLogprobs, post: j.probs.post}
		if top != nil {
			j.probs.top = *top
		}
	case top != nil:
		return fieldErr("top_logprobs", "top_logprobs requires logprobs to be set to true")
	}
	if j.probs.top < 0 {
		return fieldErr("top_logprobs", "top_logprobs %d must be >= 0", j.probs.top)
	}
	return nil
}

// nProbs reads n_probs, or its alias logprobs (a number) when n_probs is
// absent. /v1/completions shows the chosen token's log-probability also for
// logprobs 0 (OpenAI's); /completion only for n_probs > 0 (llama-server's).
func nProbs(nprobs, logprobs *int, zeroShows bool, j *job) error {
	name, v := "n_probs", nprobs
	if v == nil {
		name, v = "logprobs", logprobs
	}
	if v == nil {
		return nil
	}
	if *v < 0 {
		return fieldErr(name, "%s %d must be >= 0", name, *v)
	}
	if *v > 0 || zeroShows {
		j.probs.on, j.probs.top = true, *v
	}
	return nil
}

// parseBias resolves a request's logit_bias against the vocabulary.
func parseBias(raw json.RawMessage, tok *tokenizer.Tokenizer) ([]sample.Bias, error) {
	raw = bytes.TrimSpace(raw)
	if len(raw) == 0 || string(raw) == "null" {
		return nil, nil
	}
	switch raw[0] {
	case '[':
		return biasPairs(raw, tok)
	case '{':
		return biasObject(raw, tok)
	}
	return nil, fieldErr("logit_bias", "logit_bias: want an array of [token, bias] pairs or an object of token: bias")
}

func biasPairs(raw json.RawMessage, tok *tokenizer.Tokenizer) ([]sample.Bias, error) {
	var pairs [][]json.RawMessage
	if err := json.Unmarshal(raw, &pairs); err != nil {
		return nil, fieldErr("logit_bias", "logit_bias: want an array of [token, bias] pairs")
	}
	var out []sample.Bias
	for i, p := range pairs {
		where := fmt.Sprintf("logit_bias[%d]", i)
		if len(p) != 2 {
			return nil, fieldErr("logit_bias", "%s: want a [token, bias] pair", where)
		}
		v, err := biasValue(p[1], where)
		if err != nil {
			return nil, err
		}
		var id int32
		var text string
		switch {
		case json.Unmarshal(p[0], &id) == nil:
			out, err = biasID(out, id, v, tok, where)
		case json.Unmarshal(p[0], &text) == nil:
			out, err = biasText(out, text, v, tok, where)
		default:
			err = fieldErr("logit_bias", "%s: the token must be an id or a string", where)
		}
		if err != nil {
			return nil, err
		}
	}
	return out, nil
}

// biasObject reads {"token": bias, …} in the body's order.
func biasObject(raw json.RawMessage, tok *tokenizer.Tokenizer) ([]sample.Bias, error) {
	dec := json.NewDecoder(bytes.NewReader(raw))
	if _, err := dec.Token(); err != nil { // {
		return nil, fieldErr("logit_bias", "logit_bias: %v", err)
	}
	var out []sample.Bias
	for dec.More() {
		t, err := dec.Token()
		if err != nil {
			return nil, fieldErr("logit_bias", "logit_bias: %v", err)
		}
		key, _ := t.(string)
		var val json.RawMessage
		if err := dec.Decode(&val); err != nil {
			return nil, fieldErr("logit_bias", "logit_bias: %v", err)
		}
		where := fmt.Sprintf("logit_bias[%q]", key)
		v, err := biasValue(val, where)
		if err != nil {
			return nil, err
		}
		if id, perr := strconv.ParseInt(key, 10, 32); perr == nil {
			out, err = biasID(out, int32(id), v, tok, where)
		} else {
			out, err = biasText(out, key, v, tok, where)
		}
		if err != nil {
			return nil, err
		}
	}
	return out, nil
}

// biasValue is a bias: a number, or false (the token is banned).
func biasValue(raw json.RawMessage, where string) (float32, error) {
	var f float32
	if err := json.Unmarshal(raw, &f); err == nil {
		return f, nil
	}
	var b bool
	if err := json.Unmarshal(raw, &b); err == nil && !b {
		return float32(math.Inf(-1)), nil
	}
	return 0, fieldErr("logit_bias", "%s: the bias must be a number or false, got %s", where, raw)
}

func biasID(out []sample.Bias, id int32, v float32, tok *tokenizer.Tokenizer, where string) ([]sample.Bias, error) {
	if n := int32(tok.NVocab()); id < 0 || id >= n {
		return nil, fieldErr("logit_bias", "%s: token %d is not in the vocabulary (0..%d)", where, id, n-1)
	}
	return append(out, sample.Bias{ID: id, Value: v}), nil
}

// biasText biases every token of text (tokenized without special tokens,
// as llama-server's common_tokenize(vocab, text, false)).
func biasText(out []sample.Bias, text string, v float32, tok *tokenizer.Tokenizer, where string) ([]sample.Bias, error) {
	ids := tok.Encode(text, false, false)
	if len(ids) == 0 {
		return nil, fieldErr("logit_bias", "%s: %q has no tokens", where, text)
	}
	for _, id := range ids {
		out = append(out, sample.Bias{ID: id, Value: v})
	}
	return out, nil
}

// biasJSON is generation_settings.logit_bias: [{"bias", "token"}], a banned
// token's bias null (as llama-server's JSON writes -Inf).
func biasJSON(b []sample.Bias) []map[string]any {
	out := make([]map[string]any, 0, len(b))
	for _, x := range b {
		var v any = x.Value
		if math.IsInf(float64(x.Value), -1) {
			v = nil
		}
		out = append(out, map[string]any{"bias": v, "token": x.ID})
	}
	return out
}

// probFormat writes captured probabilities in llama-server's shape.
type probFormat struct {
	tok  *tokenizer.Tokenizer
	post bool
}

// probFormat is the format of a job's probabilities (nil: it asked for
// none).
func (s *generator) probFormat(j *job) *probFormat {
	if !j.probs.on {
		return nil
	}
	return &probFormat{tok: s.o.Model.Tokenizer(), post: j.probs.post}
}

// lowestLogprob stands for log 0 (llama-server's: JSON has no -Inf).
const lowestLogprob = -math.MaxFloat32

// value is the "logprob" (or, post-sampling, "prob") of p.
func (f *probFormat) value(p float64) (string, float64) {
	if p != p { // a softmax of logits that were all -Inf
		p = 0
	}
	if f.post {
		return "prob", p
	}
	if p <= 0 {
		return "logprob", lowestLogprob
	}
	return "logprob", math.Log(p)
}

// token is one token's id, text (its longest valid UTF-8 prefix), bytes and
// probability.
func (f *probFormat) token(id int32, p float64) map[string]any {
	b := f.tok.Piece(nil, id, false)
	txt := b
	for len(txt) > 0 && !utf8.Valid(txt) {
		txt = txt[:len(txt)-1]
	}
	bs := make([]int, len(b))
	for i, c := range b {
		bs[i] = int(c)
	}
	key, v := f.value(p)
	return map[string]any{"id": id, "token": string(txt), "bytes": bs, key: v}
}

// entries are the per-token objects of llama-server's
// completion_probabilities and OpenAI's logprobs.content.
func (f *probFormat) entries(tps []sample.TokenProbs) []map[string]any {
	out := make([]map[string]any, 0, len(tps))
	topKey := "top_logprobs"
	if f.post {
		topKey = "top_probs"
	}
	for _, tp := range tps {
		e := f.token(tp.ID, tp.P)
		top := make([]map[string]any, 0, len(tp.Top))
		for _, x := range tp.Top {
			top = append(top, f.token(x.ID, x.P))
		}
		e[topKey] = top
		out = append(out, e)
	}
	return out
}

// logprobs is a choice's "logprobs": {"content": entries}; legacy adds
// OpenAI's text-completion arrays (tokens, token_logprobs, top_logprobs)
// beside it.
func (f *probFormat) logprobs(tps []sample.TokenProbs, legacy bool) map[string]any {
	out := map[string]any{"content": f.entries(tps)}
	if !legacy || f.post {
		return out
	}
	toks, lps, tops := make([]string, 0, len(tps)), make([]float64, 0, len(tps)), make([]map[string]float64, 0, len(tps))
	for _, tp := range tps {
		e := f.token(tp.ID, tp.P)
		toks, lps = append(toks, e["token"].(string)), append(lps, e["logprob"].(float64))
		top := map[string]float64{}
		for _, x := range tp.Top {
			t := f.token(x.ID, x.P)
			top[t["token"].(string)] = t["logprob"].(float64)
		}
		tops = append(tops, top)
	}
	out["tokens"], out["token_logprobs"], out["top_logprobs"] = toks, lps, tops
	return out
}

// fieldError is a request field pipe cannot take as given (HTTP 400 whose
// error names it in param).
type fieldError struct {
	field string
	msg   string
}

func (e *fieldError) Error() string { return ErrRequest.Error() + ": " + e.msg }
func (e *fieldError) Unwrap() error { return ErrRequest }

func fieldErr(field, format string, a ...any) error {
	return &fieldError{field: field, msg: fmt.Sprintf(format, a...)}
}

// fieldOf is the request field an error names, if any.
func fieldOf(err error) (string, bool) {
	var fe *fieldError
	if errors.As(err, &fe) {
		return fe.field, true
	}
	return "", false
}
