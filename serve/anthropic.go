package serve

import (
	"encoding/json"
	"net/http"
	"strings"
	"time"
)

// anthropic is the Anthropic Messages API on the same slot and templates:
// POST /v1/messages (text and tool use, streamed as Anthropic's events)
// and /v1/messages/count_tokens. A request is translated to the chat
// completion it means (system, user and assistant turns, tool_use blocks
// as tool_calls, tool_result blocks as tool turns, tools with their
// input_schema, tool_choice auto/any/tool/none, disable_parallel_tool_use,
// stop_sequences) and runs as one; the answer's text and tool calls come
// back as text and tool_use blocks with Anthropic's stop_reason. The key may
// come as x-api-key (guard.go). Errors keep the OpenAI error body.
type anthropic struct{ parts }

// anthropicRequest is the part of a Messages request pipe reads; the rest
// (sampling fields) passes through to the chat request unchanged.
type anthropicRequest struct {
	System     json.RawMessage `json:"system"`
	Messages   []anthMessage   `json:"messages"`
	Tools      []anthTool      `json:"tools"`
	ToolChoice *struct {
		Type                   string `json:"type"`
		Name                   string `json:"name"`
		DisableParallelToolUse bool   `json:"disable_parallel_tool_use"`
	} `json:"tool_choice"`
	StopSequences []string `json:"stop_sequences"`
	Stream        bool     `json:"stream"`
}

type anthMessage struct {
	Role    string          `json:"role"`
	Content json.RawMessage `json:"content"`
}

type anthTool struct {
	Name        string          `json:"name"`
	Description string          `json:"description"`
	InputSchema json.RawMessage `json:"input_schema"`
}

// anthBlock is one content block.
type anthBlock struct {
	Type      string          `json:"type"`
	Text      string          `json:"text"`
	ID        string          `json:"id"`
	Name      string          `json:"name"`
	Input     json.RawMessage `json:"input"`
	ToolUseID string          `json:"tool_use_id"`
	Content   json.RawMessage `json:"content"`
}

// blocks reads content: a string (one text block) or an array of blocks.
func blocks(field string, c json.RawMessage) ([]anthBlock, error) {
	var s string
	if json.Unmarshal(c, &s) == nil {
		return []anthBlock{{Type: "text", Text: s}}, nil
	}
	var bs []anthBlock
	if err := json.Unmarshal(c, &bs); err != nil {
		return nil, fieldErr(field, "%s: want a string or an array of content blocks", field)
	}
	return bs, nil
}

// blockText joins text blocks (tool_result content, system).
func blockText(field string, c json.RawMessage) (string, error) {
	if isNull(c) {
		return "", nil
	}
	bs, err := blocks(field, c)
	if err != nil {
		return "", err
	}
	var b strings.Builder
	for _, x := range bs {
		if x.Type != "text" {
			return "", fieldErr(field, "%s: block type %q is not supported (text only)", field, x.Type)
		}
		b.WriteString(x.Text)
	}
	return b.String(), nil
}

// chatBody is the chat completion request a Messages request means.
func (r *anthropicRequest) chatBody(body []byte) ([]byte, error) {
	var out map[string]any
	if err := json.Unmarshal(body, &out); err != nil {
		return nil, jsonError(err)
	}
	for _, k := range []string{"system", "messages", "tools", "tool_choice", "stop_sequences", "metadata", "thinking", "container", "mcp_servers", "service_tier"} {
		delete(out, k)
	}
	msgs, err := r.chatMessages()
	if err != nil {
		return nil, err
	}
	out["messages"] = msgs
	if len(r.StopSequences) > 0 {
		out["stop"] = r.StopSequences
	}
	r.chatTools(out)
	return json.Marshal(out)
}

// chatTools sets the chat request's tools and tool_choice.
func (r *anthropicRequest) chatTools(out map[string]any) {
	if len(r.Tools) == 0 {
		return
	}
	tools := make([]any, len(r.Tools))
	for i, t := range r.Tools {
		fn := map[string]any{"name": t.Name, "parameters": t.InputSchema}
		if t.Description != "" {
			fn["description"] = t.Description
		}
		tools[i] = map[string]any{"type": "function", "function": fn}
	}
	out["tools"] = tools
	out["parallel_tool_calls"] = true
	if tc := r.ToolChoice; tc != nil {
		out["parallel_tool_calls"] = !tc.DisableParallelToolUse
		switch tc.Type {
		case "any":
			out["tool_choice"] = "required"
		case "tool":
			out["tool_choice"] = map[string]any{"type": "function", "function": map[string]any{"name": tc.Name}}
		default: // auto, none, or what tool_choice's own check refuses
			out["tool_choice"] = tc.Type
		}
	}
}

// chatMessages translates system and messages.
func (r *anthropicRequest) chatMessages() ([]any, error) {
	var out []any
	if sys, err := blockText("system", r.System); err != nil {
		return nil, err
	} else if sys != "" {
		out = append(out, map[string]any{"role": "system", "content": sys})
	}
	for i, m := range r.Messages {
		bs, err := blocks("messages", m.Content)
		if err != nil {
			return nil, err
		}
		var text strings.Builder
		var calls []any
		for _, b := range bs {
			switch b.Type {
			case "text":
				text.WriteString(b.Text)
			case "tool_use":
				input := b.Input
				if isNull(input) {
					input = json.RawMessage("{}")
				}
				calls = append(calls, map[string]any{"id": b.ID, "type": "function",
					"function": map[string]any{"name": b.Name, "arguments": string(input)}})
			case "tool_result":
				c, err := blockText("messages", b.Content)
				if err != nil {
					return nil, err
				}
				out = append(out, map[string]any{"role": "tool", "tool_call_id": b.ToolUseID, "content": c})
			default:
				return nil, fieldErr("messages", "messages[%d]: content block type %q is not supported", i, b.Type)
			}
		}
		if text.Len() > 0 || len(calls) > 0 {
			msg := map[string]any{"role": m.Role, "content": text.String()}
			if len(calls) > 0 {
				msg["tool_calls"] = calls
			}
			out = append(out, msg)
		}
	}
	return out, nil
}

// parse reads a Messages body into a chat job.
func (a *anthropic) parse(x *exchange) (job, bool, bool) {
	body, ok := a.rq.readBody(x)
	if !ok {
		return job{}, false, false
	}
	var r anthropicRequest
	err := json.Unmarshal(body, &r)
	var chat []byte
	if err != nil {
		err = jsonError(err)
	} else {
		chat, err = r.chatBody(body)
	}
	var j job
	if err == nil {
		j, err = parseChat(chat, a.o.Sampling)
	}
	if err = a.in.admit(x.r, &j, err); err != nil {
		a.rq.failGen(x, nil, err)
		return j, r.Stream, false
	}
	return j, r.Stream, true
}

func (a *anthropic) messages(x *exchange) {
	j, stream, ok := a.parse(x)
	if !ok {
		return
	}
	m := anthMsg{id: "msg_" + x.id, model: a.o.ModelID, tools: j.tools}
	var em emitter = &anthCollector{m: m, w: x.w, timeout: a.o.WriteTimeout}
	var st *sse
	if stream {
		st = &sse{w: x.w, rc: http.NewResponseController(x.w), timeout: a.o.WriteTimeout}
		em = &anthStream{sse: st, m: m, input: len(j.ids)}
	}
	x.gen = &outcome{}
	if err := a.gen.generate(x.r.Context(), &j, em, x.start, x.gen); err != nil {
		a.rq.failGen(x, st, err)
	}
}

// countTokens is /v1/messages/count_tokens: the rendered prompt's tokens.
func (a *anthropic) countTokens(x *exchange) {
	j, _, ok := a.parse(x)
	if !ok {
		return
	}
	_ = writeJSON(x.w, a.o.WriteTimeout, http.StatusOK, map[string]int{"input_tokens": len(j.ids)})
}

// anthMsg is what a Messages answer is made from.
type anthMsg struct {
	id, model string
	tools     *toolJob
}

// content is the answer's blocks and its stop_reason and stop_sequence.
func (m anthMsg) content(text string, o *outcome) ([]map[string]any, string, *string) {
	var calls []toolCallOut
	if m.tools != nil {
		text, calls = m.tools.answer(text)
	}
	var bs []map[string]any
	if text != "" || len(calls) == 0 {
		bs = append(bs, map[string]any{"type": "text", "text": text})
	}
	for _, c := range calls {
		bs = append(bs, map[string]any{"type": "tool_use", "id": "toolu_" + c.ID, "name": c.Function.Name,
			"input": json.RawMessage(c.Function.Arguments)})
	}
	switch {
	case len(calls) > 0 && o.finish == "stop":
		return bs, "tool_use", nil
	case o.finish == "length":
		return bs, "max_tokens", nil
	case o.stopType == "word":
		w := o.stopWord
		return bs, "stop_sequence", &w
	}
	return bs, "end_turn", nil
}

func (m anthMsg) body(content []map[string]any, stop any, seq *string, in, out int) map[string]any {
	if content == nil {
		content = []map[string]any{}
	}
	return map[string]any{"id": m.id, "type": "message", "role": "assistant", "model": m.model,
		"content": content, "stop_reason": stop, "stop_sequence": seq,
		"usage": map[string]int{"input_tokens": in, "output_tokens": out}}
}

// anthCollector is a Messages answer in one body.
type anthCollector struct {
	m       anthMsg
	w       http.ResponseWriter
	timeout time.Duration
	buf     strings.Builder
}

func (c *anthCollector) begin() error       { return nil }
func (c *anthCollector) text(p piece) error { c.buf.WriteString(p.text); return nil }
func (c *anthCollector) end(o *outcome) error {
	bs, stop, seq := c.m.content(c.buf.String(), o)
	return writeJSON(c.w, c.timeout, http.StatusOK, c.m.body(bs, stop, seq, o.promptTokens, o.genTokens))
}
