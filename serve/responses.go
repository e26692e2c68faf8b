package serve

import (
	"encoding/json"
	"net/http"
	"time"
)

// responsesAPI is OpenAI's Responses API as llama-server has it
// (tools/server at 3f545becc: server_chat_convert_responses_to_chatcmpl,
// to_json_oaicompat_resp): POST /v1/responses (and /responses) is translated
// to the chat completion it means and runs as one, on the same slot and
// template; the answer is a "response" object whose output items are the
// reasoning (thinking models), the message and the function calls, or,
// streamed, Responses' server-sent events. POST /v1/responses/input_tokens
// and /v1/chat/completions/input_tokens count a request's prompt tokens.
type responsesAPI struct{ parts }

// respRequest is the part of a Responses request that is not a chat's.
type respRequest struct {
	Input              json.RawMessage `json:"input"`
	Instructions       *string         `json:"instructions"`
	PreviousResponseID string          `json:"previous_response_id"`
	Tools              json.RawMessage `json:"tools"`
	ToolChoice         json.RawMessage `json:"tool_choice"`
	MaxOutputTokens    json.RawMessage `json:"max_output_tokens"`
	Reasoning          *struct {
		Effort json.RawMessage `json:"effort"`
	} `json:"reasoning"`
	Text *struct {
		Format json.RawMessage `json:"format"`
	} `json:"text"`
}

// chatBody is the chat completion request a Responses request means.
func (r *respRequest) chatBody(body []byte) ([]byte, error) {
	var out map[string]json.RawMessage
	if err := json.Unmarshal(body, &out); err != nil {
		return nil, jsonError(err)
	}
	if err := json.Unmarshal(body, r); err != nil {
		return nil, jsonError(err)
	}
	if isNull(r.Input) {
		return nil, fieldErr("input", "input: 'input' is required")
	}
	if r.PreviousResponseID != "" {
		return nil, fieldErr("previous_response_id", "previous_response_id: not supported: pipe serve keeps no responses (send the whole conversation as input)")
	}
	for _, k := range []string{"input", "instructions", "previous_response_id", "tools", "tool_choice", "max_output_tokens", "reasoning", "text", "store", "include", "truncation"} {
		delete(out, k)
	}
	msgs, err := respMessages(r.Input, r.Instructions)
	if err != nil {
		return nil, err
	}
	out["messages"] = mustJSON(msgs)
	if !isNull(r.MaxOutputTokens) {
		out["max_tokens"] = r.MaxOutputTokens
	}
	if r.Reasoning != nil && !isNull(r.Reasoning.Effort) {
		out["reasoning_effort"] = r.Reasoning.Effort
	}
	if err := r.chatTools(out); err != nil {
		return nil, err
	}
	if r.Text != nil && !isNull(r.Text.Format) {
		rf, err := respFormat(r.Text.Format)
		if err != nil {
			return nil, err
		}
		if rf != nil {
			out["response_format"] = rf
		}
	}
	return json.Marshal(out)
}

func mustJSON(v any) json.RawMessage {
	b, _ := json.Marshal(v)
	return b
}

// chatTools sets the chat request's tools ({type: function, name,
// description, parameters, strict} as a chat's {type: function, function:
// {…}}; a tool of another type — web search, files — is a 400 naming it)
// and tool_choice ({type: function, name} as a chat's named function).
func (r *respRequest) chatTools(out map[string]json.RawMessage) error {
	if !isNull(r.Tools) {
		var ts []map[string]json.RawMessage
		if err := json.Unmarshal(r.Tools, &ts); err != nil {
			return fieldErr("tools", "tools: 'tools' must be an array of objects")
		}
		chat := make([]map[string]any, 0, len(ts))
		for i, t := range ts {
			var typ string
			_ = json.Unmarshal(t["type"], &typ)
			if typ != "function" {
				return fieldErr("tools", "tools[%d].type %q: not supported: pipe serve calls function tools only", i, typ)
			}
			delete(t, "type")
			chat = append(chat, map[string]any{"type": "function", "function": t})
		}
		if len(chat) > 0 {
			out["tools"] = mustJSON(chat)
		}
	}
	if isNull(r.ToolChoice) {
		return nil
	}
	var named struct {
		Type string `json:"type"`
		Name string `json:"name"`
	}
	if json.Unmarshal(r.ToolChoice, &named) == nil && named.Type == "function" && named.Name != "" {
		out["tool_choice"] = mustJSON(map[string]any{"type": "function", "function": map[string]string{"name": named.Name}})
		return nil
	}
	out["tool_choice"] = r.ToolChoice
	return nil
}

// respFormat is the chat's response_format for Responses' text.format
// ({type: text | json_object | json_schema, schema}).
func respFormat(f json.RawMessage) (json.RawMessage, error) {
	var tf struct {
		Type   string          `json:"type"`
		Schema json.RawMessage `json:"schema"`
	}
	if err := json.Unmarshal(f, &tf); err != nil {
		return nil, fieldErr("text", "text.format: want {type, schema}: %v", err)
	}
	switch tf.Type {
	case "", "text":
		return nil, nil
	case "json_object":
		return mustJSON(map[string]string{"type": "json_object"}), nil
	case "json_schema":
		return mustJSON(map[string]any{"type": "json_schema", "json_schema": map[string]json.RawMessage{"schema": tf.Schema}}), nil
	}
	return nil, fieldErr("text", "text.format.type %q: want text, json_object or json_schema", tf.Type)
}

// parse reads a Responses body into a chat job.
func (a *responsesAPI) parse(x *exchange) (job, bool) {
	body, ok := a.rq.readBody(x)
	if !ok {
		return job{}, false
	}
	var r respRequest
	chat, err := r.chatBody(body)
	var j job
	if err == nil {
		j, err = parseChat(chat, a.o.Sampling)
	}
	if err = a.in.admit(x.r, &j, err); err != nil {
		a.rq.failGen(x, nil, err)
		return j, false
	}
	return j, true
}

func (a *responsesAPI) create(x *exchange) {
	j, ok := a.parse(x)
	if !ok {
		return
	}
	m := respMsg{id: "resp_" + x.id, msgID: "msg_" + x.id, rsID: "rs_" + x.id, model: a.o.ModelID, tools: j.tools}
	var em emitter = &respCollector{m: m, w: x.w, timeout: a.o.WriteTimeout}
	var st *sse
	if j.stream {
		st = &sse{w: x.w, rc: http.NewResponseController(x.w), timeout: a.o.WriteTimeout}
		em = &respStream{sse: st, m: m}
	}
	em = (&openAI{parts: a.parts}).withReasoning(&j, em)
	x.gen = &outcome{}
	if err := a.gen.generate(x.r.Context(), &j, em, x.start, x.gen); err != nil {
		a.rq.failGen(x, st, err)
	}
}

// inputTokens is /v1/responses/input_tokens: the rendered prompt's tokens.
func (a *responsesAPI) inputTokens(x *exchange) {
	if j, ok := a.parse(x); ok {
		writeInputTokens(x, a.o.WriteTimeout, len(j.ids))
	}
}

// chatInputTokens is /v1/chat/completions/input_tokens.
func (a *responsesAPI) chatInputTokens(x *exchange) {
	body, ok := a.rq.readBody(x)
	if !ok {
		return
	}
	j, err := parseChat(body, a.o.Sampling)
	if err = a.in.admit(x.r, &j, err); err != nil {
		a.rq.failGen(x, nil, err)
		return
	}
	writeInputTokens(x, a.o.WriteTimeout, len(j.ids))
}

func writeInputTokens(x *exchange, timeout time.Duration, n int) {
	_ = writeJSON(x.w, timeout, http.StatusOK, map[string]any{"object": "response.input_tokens", "input_tokens": n})
}
