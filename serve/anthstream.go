package serve

import (
	"encoding/json"
	"net/http"
	"strings"
)

// anthStream is a Messages answer as Anthropic's server-sent events:
// message_start, a text block (content_block_start, text_delta deltas,
// content_block_stop) while no tool call can have started (the text a
// tools stream holds back, toolJob.safePrefix), then per tool call a
// tool_use block with its whole input as one input_json_delta, message_delta
// with the stop_reason and usage, message_stop.
type anthStream struct {
	*sse
	m      anthMsg
	input  int      // prompt tokens
	held   heldText // the text, and how much was sent
	blocks int      // content blocks started
	open   bool     // a text block is open
}

func (e *anthStream) begin() error {
	h := e.w.Header()
	h.Set("Content-Type", "text/event-stream")
	h.Set("Cache-Control", "no-cache")
	h.Set("X-Accel-Buffering", "no")
	e.w.WriteHeader(http.StatusOK)
	e.started = true
	return e.send("message_start", map[string]any{"type": "message_start",
		"message": e.m.body(nil, nil, nil, e.input, 0)})
}

// send writes one event.
func (e *anthStream) send(name string, v any) error {
	b, err := json.Marshal(v)
	if err != nil {
		return err
	}
	return e.raw([]byte("event: " + name + "\ndata: " + string(b) + "\n\n"))
}

func (e *anthStream) text(p piece) error {
	s := e.held.add(p.text, e.m.tools)
	if s == "" {
		return nil
	}
	return e.textDelta(s)
}

func (e *anthStream) textDelta(s string) error {
	if !e.open {
		e.open = true
		if err := e.send("content_block_start", map[string]any{"type": "content_block_start", "index": e.blocks,
			"content_block": map[string]any{"type": "text", "text": ""}}); err != nil {
			return err
		}
	}
	return e.send("content_block_delta", map[string]any{"type": "content_block_delta", "index": e.blocks,
		"delta": map[string]any{"type": "text_delta", "text": s}})
}

func (e *anthStream) closeBlock() error {
	err := e.send("content_block_stop", map[string]any{"type": "content_block_stop", "index": e.blocks})
	e.blocks++
	return err
}

func (e *anthStream) end(o *outcome) error {
	txt := e.held.all()
	bs, stop, seq := e.m.content(txt, o)
	var uses []map[string]any
	for _, b := range bs {
		if b["type"] == "tool_use" {
			uses = append(uses, b)
		} else if rest, ok := strings.CutPrefix(b["text"].(string), e.held.sentText()); ok && rest != "" {
			if err := e.textDelta(rest); err != nil {
				return err
			}
		}
	}
	if e.open {
		if err := e.closeBlock(); err != nil {
			return err
		}
	}
	for _, u := range uses {
		start := map[string]any{"type": "tool_use", "id": u["id"], "name": u["name"], "input": map[string]any{}}
		if err := e.send("content_block_start", map[string]any{"type": "content_block_start", "index": e.blocks, "content_block": start}); err != nil {
			return err
		}
		delta := map[string]any{"type": "input_json_delta", "partial_json": string(u["input"].(json.RawMessage))}
		if err := e.send("content_block_delta", map[string]any{"type": "content_block_delta", "index": e.blocks, "delta": delta}); err != nil {
			return err
		}
		if err := e.closeBlock(); err != nil {
			return err
		}
	}
	if err := e.send("message_delta", map[string]any{"type": "message_delta",
		"delta": map[string]any{"stop_reason": stop, "stop_sequence": seq},
		"usage": map[string]int{"output_tokens": o.genTokens}}); err != nil {
		return err
	}
	return e.send("message_stop", map[string]any{"type": "message_stop"})
}
