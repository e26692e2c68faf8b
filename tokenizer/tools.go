package tokenizer

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"

	"github.com/pipe-engine/pipe/internal/jinja"
)

// Tool calls in chat templates, as llama.cpp's common_chat_templates_apply
// passes them to a Jinja template: the request's tools as "tools", an
// assistant turn's calls as its "tool_calls" ({id, type: "function",
// function: {name, arguments}}, the arguments as an object where they are
// JSON, which is what templates index and pipe through tojson), a tool
// turn's "tool_call_id". JSON objects keep their key order (llama.cpp's
// ordered_json), so a template's tojson writes them as the client sent
// them. The built-in renderers have no tool syntax.

// ToolCall is one call of an assistant turn; Arguments is JSON text.
type ToolCall struct {
	ID, Name, Arguments string
}

// ChatTools is ChatContext with the request's tools (a JSON array of OpenAI
// tool objects) as the template's "tools". Tools, tool calls and tool turns
// need a Jinja template (ErrUnsupportedTemplate otherwise, as llama-server
// refuses them without --jinja).
func (t *Tokenizer) ChatTools(ctx context.Context, messages []Message, tools json.RawMessage, addGenerationPrompt, noThink bool) (string, error) {
	if t.jinja == nil {
		return "", fmt.Errorf("tools and tool turns need a Jinja chat template (--jinja, --chat-template-file): %w", ErrUnsupportedTemplate)
	}
	var extra []jinja.Value
	if len(bytes.TrimSpace(tools)) > 0 {
		v, err := jsonValue(tools)
		if err != nil {
			return "", fmt.Errorf("tools: %w", err)
		}
		if !v.IsList() {
			return "", errors.New("tools: want an array")
		}
		extra = v.AsList().Items
	}
	return t.renderJinja(ctx, messages, addGenerationPrompt, noThink, extra...)
}

// ToolTemplate is the chat template in use: a Jinja template's source, or
// the built-in renderer's name (chatml, harmony, gemma4).
func (t *Tokenizer) ToolTemplate() string {
	if t.jinja != nil {
		return t.jinja.src
	}
	return formatName(t.chatFormat)
}

// messageVar is one message as a template sees it.
func messageVar(m Message) jinja.Value {
	v := jinja.NewDict()
	d := v.AsDict()
	d.Set("role", jinja.NewString(m.Role))
	d.Set("content", jinja.NewString(m.Content))
	if len(m.ToolCalls) > 0 {
		calls := make([]jinja.Value, len(m.ToolCalls))
		for i, c := range m.ToolCalls {
			args, err := jsonValue([]byte(c.Arguments))
			if err != nil || !args.IsDict() {
				args = jinja.NewString(c.Arguments)
			}
			fn := jinja.NewDict()
			fn.AsDict().Set("name", jinja.NewString(c.Name))
			fn.AsDict().Set("arguments", args)
			call := jinja.NewDict()
			call.AsDict().Set("id", jinja.NewString(c.ID))
			call.AsDict().Set("type", jinja.NewString("function"))
			call.AsDict().Set("function", fn)
			calls[i] = call
		}
		d.Set("tool_calls", jinja.NewList(calls))
	}
	if m.ToolCallID != "" {
		d.Set("tool_call_id", jinja.NewString(m.ToolCallID))
	}
	return v
}

// jsonValue decodes JSON into a template value, objects in key order.
func jsonValue(b []byte) (jinja.Value, error) {
	dec := json.NewDecoder(bytes.NewReader(b))
	dec.UseNumber()
	v, err := decodeValue(dec)
	if err != nil {
		return jinja.Value{}, err
	}
	if _, err := dec.Token(); err == nil {
		return jinja.Value{}, errors.New("JSON: data after the value")
	}
	return v, nil
}

func decodeValue(dec *json.Decoder) (jinja.Value, error) {
	tok, err := dec.Token()
	if err != nil {
		return jinja.Value{}, err
	}
	switch x := tok.(type) {
	case json.Delim:
		if x == '[' {
			var items []jinja.Value
			for dec.More() {
				it, err := decodeValue(dec)
				if err != nil {
					return jinja.Value{}, err
				}
				items = append(items, it)
			}
			_, err := dec.Token()
			return jinja.NewList(items), err
		}
		v := jinja.NewDict()
		for dec.More() {
			k, err := dec.Token()
			if err != nil {
				return jinja.Value{}, err
			}
			val, err := decodeValue(dec)
			if err != nil {
				return jinja.Value{}, err
			}
			v.AsDict().Set(k.(string), val)
		}
		_, err := dec.Token()
		return v, err
	}
	return jinja.FromGoValue(tok), nil
}
