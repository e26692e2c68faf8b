package serve

import (
	"encoding/json"
	"errors"
	"net/http"
)

// /completion's prompt in every shape llama-server (3f545becc,
// tokenize_input_prompts) takes:
//
//   - "text", or [1, 2, 3] (token ids), or ["text", 12, "more"] (strings
//     and ids mixed into one prompt: the texts tokenized, BOS only before a
//     leading text), or {"prompt_string": "text"} (multimodal_data is
//     refused: pipe runs text models only);
//   - an array of those (one without a bare number at its top), which is
//     several prompts in one request: each is generated on its own and the
//     answer is an array of the answers (each with its "index"), or in a
//     stream the events of each in turn, tagged with their index.

// subPrompt is one prompt: text, token ids, or parts of both.
type subPrompt struct {
	text  string
	ids   []int32
	parts []promptPart // mixed; nil otherwise
}

// promptPart is a mixed prompt's text or token id.
type promptPart struct {
	text  string
	id    int32
	isID  bool
	first bool // the prompt's first part (a text there gets BOS)
}

// nativePrompt is /completion's prompt: one or several subPrompts.
type nativePrompt struct {
	subs []subPrompt
}

// errNativePrompt: the prompt is not one of llama-server's shapes.
var errNativePrompt = errors.New(`prompt: want a string, an array of token ids, an array of strings and token ids, {"prompt_string": …}, or an array of those`)

// errMultimodal: a {"prompt_string", "multimodal_data"} prompt.
var errMultimodal = errors.New("prompt: multimodal_data: pipe serve runs text models only")

func (p *nativePrompt) UnmarshalJSON(b []byte) error {
	var elems []json.RawMessage
	if json.Unmarshal(b, &elems) != nil || hasNumber(elems) {
		sp, err := parseSubPrompt(b)
		if err != nil {
			return err
		}
		p.subs = []subPrompt{sp}
		return nil
	}
	if len(elems) == 0 {
		return errNativePrompt
	}
	p.subs = make([]subPrompt, len(elems))
	for i, e := range elems {
		sp, err := parseSubPrompt(e)
		if err != nil {
			return err
		}
		p.subs[i] = sp
	}
	return nil
}

// hasNumber reports whether an array has a number at its top level (a
// prompt of ids, or of ids and text, not a list of prompts).
func hasNumber(elems []json.RawMessage) bool {
	for _, e := range elems {
		var n json.Number
		if json.Unmarshal(e, &n) == nil {
			return true
		}
	}
	return false
}

// parseSubPrompt takes one prompt: a string, an array of ids, an array of
// strings and ids, or an object with prompt_string.
func parseSubPrompt(b []byte) (subPrompt, error) {
	var sp subPrompt
	if json.Unmarshal(b, &sp.text) == nil {
		return sp, nil
	}
	if json.Unmarshal(b, &sp.ids) == nil && len(sp.ids) > 0 {
		return sp, nil
	}
	sp.ids = nil
	var obj struct {
		Text       *string         `json:"prompt_string"`
		Multimodal json.RawMessage `json:"multimodal_data"`
	}
	if b = trimSpace(b); len(b) > 0 && b[0] == '{' {
		if json.Unmarshal(b, &obj) != nil || obj.Text == nil {
			return sp, errNativePrompt
		}
		if len(obj.Multimodal) > 0 && string(obj.Multimodal) != "null" {
			return sp, errMultimodal
		}
		sp.text = *obj.Text
		return sp, nil
	}
	return parseMixed(b)
}

// parseMixed takes an array of strings and token ids with both in it.
func parseMixed(b []byte) (subPrompt, error) {
	var elems []json.RawMessage
	if json.Unmarshal(b, &elems) != nil {
		return subPrompt{}, errNativePrompt
	}
	var sp subPrompt
	texts, ids := 0, 0
	for i, e := range elems {
		var s string
		var id int32
		switch {
		case json.Unmarshal(e, &s) == nil:
			sp.parts = append(sp.parts, promptPart{text: s, first: i == 0})
			texts++
		case json.Unmarshal(e, &id) == nil:
			sp.parts = append(sp.parts, promptPart{id: id, isID: true, first: i == 0})
			ids++
		default:
			return subPrompt{}, errNativePrompt
		}
	}
	if texts == 0 || ids == 0 {
		return subPrompt{}, errNativePrompt
	}
	return sp, nil
}

func trimSpace(b []byte) []byte {
	for len(b) > 0 && (b[0] == ' ' || b[0] == '\t' || b[0] == '\n' || b[0] == '\r') {
		b = b[1:]
	}
	return b
}

// apply makes sp the job's prompt: a text, or token ids (a mixed prompt's
// texts tokenized here, as llama-server's tokenize_mixed does).
func (sp subPrompt) apply(s *nativeAPI, j *job) {
	j.prompt, j.given = sp.text, sp.ids
	if sp.parts == nil {
		return
	}
	tok := s.o.Model.Tokenizer()
	j.prompt, j.given = "", []int32{}
	for _, p := range sp.parts {
		if p.isID {
			j.given = append(j.given, p.id)
		} else {
			j.given = tok.AppendEncode(j.given, p.text, p.first, false)
		}
	}
}

// several answers a request of several prompts (or of one mixed prompt):
// each generated in turn (queued for the slot like any request), the
// answers an array in the prompts' order, or the stream's events of each
// prompt in turn.
func (s *nativeAPI) several(x *exchange, base job, subs []subPrompt, returnTokens bool) {
	var st *sse
	if base.stream {
		st = &sse{w: x.w, rc: http.NewResponseController(x.w), timeout: s.o.WriteTimeout}
	}
	var answers []any
	collect := &answers
	if len(subs) == 1 { // one mixed prompt: its answer alone
		collect = nil
	}
	for i, sp := range subs {
		j := base
		j.stops = append([]string(nil), base.stops...)
		sp.apply(s, &j)
		if err := s.in.admit(x.r, &j, nil); err != nil {
			s.rq.failGen(x, st, err)
			return
		}
		x.gen = &outcome{}
		n := &native{gen: s.gen, j: &j, o: x.gen, w: x.w, returnTokens: returnTokens, pf: s.gen.probFormat(&j),
			stream: st, index: i, collect: collect}
		if err := s.gen.generate(x.r.Context(), &j, n, x.start, x.gen); err != nil {
			s.rq.failGen(x, st, err)
			return
		}
	}
	if collect != nil && st == nil {
		x.err = writeJSON(x.w, s.o.WriteTimeout, http.StatusOK, answers)
	}
}
