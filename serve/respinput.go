package serve

import "encoding/json"

// respItem is one item of a Responses request's input list.
type respItem struct {
	Type      string          `json:"type"`
	Role      string          `json:"role"`
	Content   json.RawMessage `json:"content"`
	CallID    *string         `json:"call_id"`
	Name      *string         `json:"name"`
	Arguments *string         `json:"arguments"`
	Output    json.RawMessage `json:"output"`
	Summary   json.RawMessage `json:"summary"`
}

// respPart is one content part of an input item.
type respPart struct {
	Type    string  `json:"type"`
	Text    *string `json:"text"`
	Refusal *string `json:"refusal"`
}

// respMessages are the chat messages of a Responses input (a string: one
// user turn; or a list of items) after the instructions' system turn, as
// llama-server converts them: input messages (user, system, developer),
// output messages and function calls (merged into the assistant turn
// before them), function call outputs (tool turns) and reasoning items
// (the assistant turn's reasoning_content).
func respMessages(input json.RawMessage, instructions *string) ([]map[string]any, error) {
	var msgs []map[string]any
	if instructions != nil {
		msgs = append(msgs, map[string]any{"role": "system", "content": *instructions})
	}
	var s string
	if json.Unmarshal(input, &s) == nil {
		return append(msgs, map[string]any{"role": "user", "content": s}), nil
	}
	var items []respItem
	if err := json.Unmarshal(input, &items); err != nil {
		return nil, fieldErr("input", "input: 'input' must be a string or array of objects")
	}
	for i, it := range items {
		var err error
		if msgs, err = respItemMessage(msgs, it); err != nil {
			return nil, fieldErr("input", "input[%d]: %v", i, err)
		}
	}
	return msgs, nil
}

// respItemMessage adds one input item to the chat messages.
func respItemMessage(msgs []map[string]any, it respItem) ([]map[string]any, error) {
	var prev map[string]any
	if n := len(msgs); n > 0 && msgs[n-1]["role"] == "assistant" {
		prev = msgs[n-1]
	}
	switch {
	case it.Role == "user" || it.Role == "system" || it.Role == "developer":
		text, err := respText(it.Content, "input_text")
		if err != nil {
			return nil, err
		}
		return append(msgs, map[string]any{"role": it.Role, "content": text}), nil
	case it.Role == "assistant" && it.Type == "message":
		text, err := respText(it.Content, "output_text")
		if err != nil {
			return nil, err
		}
		if prev != nil {
			prev["content"] = prev["content"].(string) + text
			return msgs, nil
		}
		return append(msgs, map[string]any{"role": "assistant", "content": text}), nil
	case it.Type == "function_call" && it.CallID != nil && it.Name != nil && it.Arguments != nil:
		call := map[string]any{"id": *it.CallID, "type": "function", "function": map[string]string{"name": *it.Name, "arguments": *it.Arguments}}
		if prev == nil {
			prev = map[string]any{"role": "assistant", "content": ""}
			msgs = append(msgs, prev)
		}
		calls, _ := prev["tool_calls"].([]any)
		prev["tool_calls"] = append(calls, call)
		return msgs, nil
	case it.Type == "function_call_output" && it.CallID != nil && !isNull(it.Output):
		text, err := respText(it.Output, "input_text")
		if err != nil {
			return nil, err
		}
		return append(msgs, map[string]any{"role": "tool", "tool_call_id": *it.CallID, "content": text}), nil
	case it.Type == "reasoning" && !isNull(it.Summary):
		// pipe's templates are given no reasoning of earlier turns (as a
		// chat's reasoning_content in messages is not)
		if prev == nil {
			msgs = append(msgs, map[string]any{"role": "assistant", "content": ""})
		}
		return msgs, nil
	}
	return nil, errString("Cannot determine type of 'item'")
}

// respText is a content (a string, or parts of type want or refusals) as text.
func respText(c json.RawMessage, want string) (string, error) {
	var s string
	if json.Unmarshal(c, &s) == nil {
		return s, nil
	}
	var parts []respPart
	if err := json.Unmarshal(c, &parts); err != nil {
		return "", errString("content: want a string or an array of content parts")
	}
	out := ""
	for _, p := range parts {
		switch {
		case (p.Type == want || p.Type == "input_text" || p.Type == "output_text") && p.Text != nil:
			out += *p.Text
		case p.Type == "refusal" && p.Refusal != nil:
			out += *p.Refusal
		case p.Type == "input_image" || p.Type == "input_file":
			return "", errString("'" + p.Type + "' is not supported: pipe serve runs text models only")
		default:
			return "", errString("content part type '" + p.Type + "': want " + want)
		}
	}
	return out, nil
}

// errString is an error with a fixed text.
type errString string

func (e errString) Error() string { return string(e) }
