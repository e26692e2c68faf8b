package serve

import (
	"encoding/json"
	"net/http"
	"strings"
	"time"
)

// respMsg is what a Responses answer is made from.
type respMsg struct {
	id, msgID, rsID, model string
	tools                  *toolJob
}

// items are the answer's output items: the reasoning, the message, the
// function calls (llama-server's to_json_oaicompat_resp).
func (m respMsg) items(reasoning, text string) []map[string]any {
	var calls []toolCallOut
	if m.tools != nil {
		text, calls = m.tools.answer(text)
	}
	out := []map[string]any{}
	if reasoning != "" {
		out = append(out, m.reasoningItem(reasoning, "completed"))
	}
	if text != "" {
		out = append(out, m.messageItem(text, "completed"))
	}
	for _, c := range calls {
		out = append(out, callItem(c))
	}
	return out
}

func (m respMsg) reasoningItem(text, status string) map[string]any {
	content := []map[string]any{}
	if text != "" {
		content = append(content, map[string]any{"type": "reasoning_text", "text": text})
	}
	return map[string]any{"id": m.rsID, "type": "reasoning", "summary": []any{}, "content": content,
		"encrypted_content": "", "status": status}
}

func outputText(text string) map[string]any {
	return map[string]any{"type": "output_text", "annotations": []any{}, "logprobs": []any{}, "text": text}
}

func (m respMsg) messageItem(text, status string) map[string]any {
	content := []map[string]any{}
	if status == "completed" {
		content = append(content, outputText(text))
	}
	return map[string]any{"id": m.msgID, "type": "message", "role": "assistant", "status": status, "content": content}
}

func callItem(c toolCallOut) map[string]any {
	return map[string]any{"id": "fc_" + c.ID, "type": "function_call", "status": "completed", "arguments": c.Function.Arguments,
		"call_id": "call_" + c.ID, "name": c.Function.Name}
}

// body is the response object.
func (m respMsg) body(status string, output []map[string]any, o *outcome) map[string]any {
	t := time.Now().Unix()
	r := map[string]any{"id": m.id, "object": "response", "created_at": t, "status": status, "model": m.model}
	if o == nil {
		return r
	}
	r["completed_at"], r["output"] = t, output
	r["usage"] = map[string]any{"input_tokens": o.promptTokens, "output_tokens": o.genTokens,
		"total_tokens": o.promptTokens + o.genTokens, "input_tokens_details": map[string]int{"cached_tokens": o.cachedTokens}}
	return r
}

// respCollector is a Responses answer in one body.
type respCollector struct {
	m              respMsg
	w              http.ResponseWriter
	timeout        time.Duration
	buf, reasoning strings.Builder
}

func (c *respCollector) begin() error { return nil }
func (c *respCollector) text(p piece) error {
	c.buf.WriteString(p.text)
	c.reasoning.WriteString(p.reasoning)
	return nil
}
func (c *respCollector) end(o *outcome) error {
	return writeJSON(c.w, c.timeout, http.StatusOK, c.m.body("completed", c.m.items(c.reasoning.String(), c.buf.String()), o))
}

// respStream is a Responses answer as its server-sent events:
// response.created and response.in_progress; a reasoning item
// (output_item.added, reasoning_text.delta…) and a message item
// (output_item.added, content_part.added, output_text.delta…) as their
// text comes, the message's text held back while a tool call may be
// starting (toolJob.safePrefix); at the end each function call
// (output_item.added, function_call_arguments.delta), the .done events of
// every item and response.completed with the output and usage.
type respStream struct {
	*sse
	m                respMsg
	held             heldText // the text, and how much was sent
	reasoning        strings.Builder
	rsOpen, textOpen bool
}

func (e *respStream) begin() error {
	h := e.w.Header()
	h.Set("Content-Type", "text/event-stream")
	h.Set("Cache-Control", "no-cache")
	h.Set("X-Accel-Buffering", "no")
	e.w.WriteHeader(http.StatusOK)
	e.started = true
	for _, ev := range []string{"response.created", "response.in_progress"} {
		if err := e.send(ev, map[string]any{"response": e.m.body("in_progress", nil, nil)}); err != nil {
			return err
		}
	}
	return nil
}

// send writes one event; data gets its "type".
func (e *respStream) send(name string, data map[string]any) error {
	data["type"] = name
	b, err := json.Marshal(data)
	if err != nil {
		return err
	}
	return e.raw([]byte("event: " + name + "\ndata: " + string(b) + "\n\n"))
}

func (e *respStream) text(p piece) error {
	if p.reasoning != "" {
		e.reasoning.WriteString(p.reasoning)
		if !e.rsOpen {
			e.rsOpen = true
			if err := e.send("response.output_item.added", map[string]any{"item": e.m.reasoningItem("", "in_progress")}); err != nil {
				return err
			}
		}
		if err := e.send("response.reasoning_text.delta", map[string]any{"item_id": e.m.rsID, "delta": p.reasoning}); err != nil {
			return err
		}
	}
	s := e.held.add(p.text, e.m.tools)
	if s == "" {
		return nil
	}
	return e.textDelta(s)
}

func (e *respStream) textDelta(s string) error {
	if !e.textOpen {
		e.textOpen = true
		if err := e.send("response.output_item.added", map[string]any{"item": e.m.messageItem("", "in_progress")}); err != nil {
			return err
		}
		part := map[string]any{"type": "output_text", "text": ""}
		if err := e.send("response.content_part.added", map[string]any{"item_id": e.m.msgID, "part": part}); err != nil {
			return err
		}
	}
	return e.send("response.output_text.delta", map[string]any{"item_id": e.m.msgID, "delta": s})
}

func (e *respStream) end(o *outcome) error {
	txt := e.held.all()
	output := e.m.items(e.reasoning.String(), txt)
	for _, it := range output {
		if err := e.done(it, txt); err != nil {
			return err
		}
	}
	return e.send("response.completed", map[string]any{"response": e.m.body("completed", output, o)})
}

// done ends one output item: the rest of a message's text, a function
// call's added and arguments events, then the item's .done events.
func (e *respStream) done(it map[string]any, txt string) error {
	switch it["type"] {
	case "message":
		text := it["content"].([]map[string]any)[0]["text"].(string)
		if rest, ok := strings.CutPrefix(text, e.held.sentText()); ok && rest != "" {
			if err := e.textDelta(rest); err != nil {
				return err
			}
		}
		if err := e.send("response.output_text.done", map[string]any{"item_id": e.m.msgID, "text": text}); err != nil {
			return err
		}
		if err := e.send("response.content_part.done", map[string]any{"item_id": e.m.msgID, "part": outputText(text)}); err != nil {
			return err
		}
	case "function_call":
		added := map[string]any{}
		for k, v := range it {
			added[k] = v
		}
		added["arguments"], added["status"] = "", "in_progress"
		if err := e.send("response.output_item.added", map[string]any{"item": added}); err != nil {
			return err
		}
		if err := e.send("response.function_call_arguments.delta", map[string]any{"item_id": it["id"], "delta": it["arguments"]}); err != nil {
			return err
		}
	}
	return e.send("response.output_item.done", map[string]any{"item": it})
}
