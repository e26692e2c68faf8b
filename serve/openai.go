package serve

import (
	"net/http"
	"time"
)

// openAI is the OpenAI routes: POST /v1/chat/completions and
// /v1/completions, GET /v1/models.
type openAI struct {
	parts
	created int64 // the server's start, the model's "created"
}

func (a *openAI) chat(x *exchange)       { a.complete(x, true) }
func (a *openAI) completion(x *exchange) { a.complete(x, false) }

func (a *openAI) complete(x *exchange, chat bool) {
	body, ok := a.rq.readBody(x)
	if !ok {
		return
	}
	parse, prefix := parseCompletion, "cmpl-"
	if chat {
		parse, prefix = parseChat, "chatcmpl-"
	}
	j, err := parse(body, a.o.Sampling)
	if err = a.in.admit(x.r, &j, err); err != nil {
		a.rq.failGen(x, nil, err)
		return
	}
	sh := shape{chat: chat, id: prefix + x.id, model: a.o.ModelID, created: time.Now().Unix(), fp: a.o.Fingerprint, pf: a.gen.probFormat(&j), tools: j.tools, usage: j.includeUsage}
	if j.verbose || a.o.Verbose && !j.stream {
		sh.verbose = func(o *outcome, content string) *nativeFinal {
			f := a.gen.final(&j, o, content, nil)
			return &f
		}
	}
	if j.n > 1 {
		a.severalChoices(x, &j, sh)
		return
	}
	var em emitter = &collector{sh: sh, w: x.w, timeout: a.o.WriteTimeout}
	var st *sse
	if j.stream {
		st = &sse{sh: sh, w: x.w, rc: http.NewResponseController(x.w), timeout: a.o.WriteTimeout}
		em = st
		if j.tools != nil {
			em = &toolStream{sse: st, tj: j.tools}
		}
	}
	em = a.withReasoning(&j, em)
	x.gen = &outcome{}
	if err := a.gen.generate(x.r.Context(), &j, em, x.start, x.gen); err != nil {
		a.rq.failGen(x, st, err)
	}
}

func (a *openAI) models(x *exchange) {
	type entry struct {
		ID      string   `json:"id"`
		Aliases []string `json:"aliases"`
		Tags    []string `json:"tags"`
		Object  string   `json:"object"`
		Created int64    `json:"created"`
		OwnedBy string   `json:"owned_by"`
	}
	e := entry{ID: a.o.ModelID, Aliases: nonNilStrings(a.o.ModelAliases), Tags: nonNilStrings(a.o.ModelTags), Object: "model", Created: a.created, OwnedBy: "pipe"}
	_ = writeJSON(x.w, a.o.WriteTimeout, http.StatusOK, struct {
		Object string  `json:"object"`
		Data   []entry `json:"data"`
	}{"list", []entry{e}})
}
