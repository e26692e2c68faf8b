package toolcall

import (
	"encoding/json"
	"fmt"
	"strings"
)

// parseHermes: <tool_call>{json}</tool_call>, as many as the model wrote.
func parseHermes(text string) (string, []Call, error) {
	content, inner, err := between(text, "<tool_call>", "</tool_call>")
	if err != nil {
		return "", nil, err
	}
	calls := make([]Call, 0, len(inner))
	for _, s := range inner {
		c, err := decodeCall(s)
		if err != nil {
			return "", nil, err
		}
		calls = append(calls, c)
	}
	return content, calls, nil
}

// parseQwenXML: <tool_call><function=NAME><parameter=P>value</parameter>…</function></tool_call>.
func parseQwenXML(text string, tools []Tool) (string, []Call, error) {
	if i := strings.Index(text, "<function="); i >= 0 && !strings.Contains(text[:i], "<tool_call>") {
		// some models skip the opening <tool_call>
		text = text[:i] + "<tool_call>" + text[i:]
	}
	content, inner, err := between(text, "<tool_call>", "</tool_call>")
	if err != nil {
		return "", nil, err
	}
	var calls []Call
	for _, s := range inner {
		s = strings.TrimSpace(s)
		rest, ok := strings.CutPrefix(s, "<function=")
		if !ok {
			return "", nil, fmt.Errorf("%w: %q: want <function=NAME>", ErrCall, clip(s))
		}
		name, body, ok := strings.Cut(rest, ">")
		if !ok {
			return "", nil, fmt.Errorf("%w: <function= without >", ErrCall)
		}
		body, _, ok = strings.Cut(body, "</function>")
		if !ok {
			return "", nil, fmt.Errorf("%w: <function=%s> without </function>", ErrCall, name)
		}
		args, err := xmlParams(body, "<parameter=", ">", "</parameter>", propTypes(tools, name))
		if err != nil {
			return "", nil, err
		}
		calls = append(calls, Call{Name: strings.TrimSpace(name), Arguments: args})
	}
	return content, calls, nil
}

// xmlParams reads key/value pairs: open KEY sep VALUE close, repeated, into a
// JSON object (a value is a string where types says so, else JSON when it
// parses, else a string). Values lose one newline on each side, as the
// templates write them.
func xmlParams(body, open, sep, close string, types map[string]string) (string, error) {
	var keys []string
	vals := map[string]json.RawMessage{}
	for {
		i := strings.Index(body, open)
		if i < 0 {
			break
		}
		rest := body[i+len(open):]
		key, rest, ok := strings.Cut(rest, sep)
		if !ok {
			return "", fmt.Errorf("%w: %s without %s", ErrCall, open, sep)
		}
		val, after, ok := strings.Cut(rest, close)
		if !ok {
			return "", fmt.Errorf("%w: %s%s without %s", ErrCall, open, key, close)
		}
		key = strings.TrimSpace(key)
		if _, dup := vals[key]; !dup {
			keys = append(keys, key)
		}
		vals[key] = xmlValue(trimNewline(val), types[key])
		body = after
	}
	return objectJSON(keys, vals), nil
}

func trimNewline(s string) string {
	s = strings.TrimPrefix(s, "\n")
	return strings.TrimSuffix(s, "\n")
}

// xmlValue is a parameter's value as JSON: typ "string" keeps the text.
func xmlValue(v, typ string) json.RawMessage {
	if typ != "string" {
		t := strings.TrimSpace(v)
		if json.Valid([]byte(t)) {
			return json.RawMessage(t)
		}
	}
	b, _ := json.Marshal(v)
	return b
}

// objectJSON writes keys in order, compactly.
func objectJSON(keys []string, vals map[string]json.RawMessage) string {
	var b strings.Builder
	b.WriteByte('{')
	for i, k := range keys {
		if i > 0 {
			b.WriteByte(',')
		}
		kb, _ := json.Marshal(k)
		b.Write(kb)
		b.WriteByte(':')
		c, err := compact(`{"v":` + string(vals[k]) + `}`)
		if err == nil {
			c = strings.TrimSuffix(strings.TrimPrefix(c, `{"v":`), "}")
		} else {
			c = string(vals[k])
		}
		b.WriteString(c)
	}
	b.WriteByte('}')
	return b.String()
}

// propTypes maps the named tool's parameters to their schema "type" (a
// string; "" when it is absent or a list).
func propTypes(tools []Tool, name string) map[string]string {
	for _, t := range tools {
		if t.Name != name {
			continue
		}
		var s struct {
			Properties map[string]struct {
				Type any `json:"type"`
			} `json:"properties"`
		}
		if json.Unmarshal(t.Parameters, &s) != nil {
			return nil
		}
		m := map[string]string{}
		for k, p := range s.Properties {
			if ty, ok := p.Type.(string); ok {
				m[k] = ty
			}
		}
		return m
	}
	return nil
}

// parseGLM: <tool_call>NAME<arg_key>k</arg_key><arg_value>v</arg_value>…</tool_call>.
func parseGLM(text string, tools []Tool) (string, []Call, error) {
	content, inner, err := between(text, "<tool_call>", "</tool_call>")
	if err != nil {
		return "", nil, err
	}
	var calls []Call
	for _, s := range inner {
		name, body, _ := strings.Cut(s, "<arg_key>")
		name = strings.TrimSpace(name)
		if name == "" {
			return "", nil, fmt.Errorf("%w: <tool_call> without a function name", ErrCall)
		}
		args, err := glmArgs("<arg_key>"+body, propTypes(tools, name))
		if err != nil {
			return "", nil, err
		}
		calls = append(calls, Call{Name: name, Arguments: args})
	}
	return content, calls, nil
}

// glmArgs reads <arg_key>k</arg_key><arg_value>v</arg_value> pairs.
func glmArgs(body string, types map[string]string) (string, error) {
	var keys []string
	vals := map[string]json.RawMessage{}
	for {
		i := strings.Index(body, "<arg_key>")
		if i < 0 {
			return objectJSON(keys, vals), nil
		}
		k, rest, ok := strings.Cut(body[i+len("<arg_key>"):], "</arg_key>")
		j := strings.Index(rest, "<arg_value>")
		if !ok || j < 0 {
			return "", fmt.Errorf("%w: <arg_key>%s without its <arg_value>", ErrCall, k)
		}
		v, after, ok := strings.Cut(rest[j+len("<arg_value>"):], "</arg_value>")
		if !ok {
			return "", fmt.Errorf("%w: <arg_value> without </arg_value>", ErrCall)
		}
		k = strings.TrimSpace(k)
		if _, dup := vals[k]; !dup {
			keys = append(keys, k)
		}
		vals[k] = xmlValue(v, types[k])
		body = after
	}
}

const (
	dsCallsBegin = "<｜tool▁calls▁begin｜>"
	dsCallsEnd   = "<｜tool▁calls▁end｜>"
	dsCallBegin  = "<｜tool▁call▁begin｜>"
	dsCallEnd    = "<｜tool▁call▁end｜>"
	dsSep        = "<｜tool▁sep｜>"
)

// parseDeepSeek: V3.1's <｜tool▁call▁begin｜>NAME<｜tool▁sep｜>{args}<｜tool▁call▁end｜>
// and R1's <｜tool▁call▁begin｜>function<｜tool▁sep｜>NAME\n```json\n{args}\n```<｜tool▁call▁end｜>,
// inside <｜tool▁calls▁begin｜>…<｜tool▁calls▁end｜>.
func parseDeepSeek(text string) (string, []Call, error) {
	i := strings.Index(text, dsCallsBegin)
	if i < 0 {
		return text, nil, nil
	}
	content := strings.TrimSpace(text[:i])
	block, _, _ := strings.Cut(text[i+len(dsCallsBegin):], dsCallsEnd)
	_, inner, err := between(block, dsCallBegin, dsCallEnd)
	if err != nil {
		return "", nil, err
	}
	var calls []Call
	for _, s := range inner {
		name, args, ok := strings.Cut(s, dsSep)
		if !ok {
			return "", nil, fmt.Errorf("%w: %q: no %s", ErrCall, clip(s), dsSep)
		}
		if strings.TrimSpace(name) == "function" {
			// R1: the name, then the arguments in a ```json fence
			n, fenced, _ := strings.Cut(args, "\n")
			name = n
			fenced = strings.TrimSpace(fenced)
			fenced = strings.TrimPrefix(fenced, "```json")
			args = strings.TrimSuffix(strings.TrimSpace(fenced), "```")
		}
		a, err := compact(args)
		if err != nil {
			return "", nil, err
		}
		calls = append(calls, Call{Name: strings.TrimSpace(name), Arguments: a})
	}
	return content, calls, nil
}

// parseMistral: [TOOL_CALLS][{"name", "arguments", "id"}, …] or
// [TOOL_CALLS]NAME[ARGS]{args} repeated, after any [THINK]…[/THINK].
func parseMistral(text string) (string, []Call, error) {
	const tag = "[TOOL_CALLS]"
	from := 0
	if j := strings.Index(text, "[/THINK]"); j >= 0 && strings.HasPrefix(strings.TrimSpace(text), "[THINK]") {
		from = j + len("[/THINK]") // a call inside the reasoning is not one
	}
	i := strings.Index(text[from:], tag)
	if i < 0 {
		return text, nil, nil
	}
	i += from
	content := strings.TrimSpace(text[:i])
	parts := strings.Split(text[i:], tag)[1:]
	var calls []Call
	for _, p := range parts {
		if t := strings.TrimSpace(p); strings.HasPrefix(t, "[") {
			var cs []jsonCall
			if err := json.Unmarshal([]byte(t), &cs); err != nil {
				return "", nil, fmt.Errorf("%w: %q: %v", ErrCall, clip(t), err)
			}
			for _, c := range cs {
				cl, err := c.call()
				if err != nil {
					return "", nil, err
				}
				calls = append(calls, cl)
			}
			continue
		}
		name, args, ok := strings.Cut(p, "[ARGS]")
		if !ok {
			return "", nil, fmt.Errorf("%w: %q: want NAME[ARGS]{…}", ErrCall, clip(p))
		}
		a, err := compact(args)
		if err != nil {
			return "", nil, err
		}
		calls = append(calls, Call{Name: strings.TrimSpace(name), Arguments: a})
	}
	return content, calls, nil
}

// parseLlama3: an answer that is one JSON object {"name", "parameters"}
// (with "type": "function" or not), after an optional <|python_tag|>.
func parseLlama3(text string) (string, []Call, error) {
	t := strings.TrimSpace(strings.TrimPrefix(strings.TrimSpace(text), "<|python_tag|>"))
	if !strings.HasPrefix(t, "{") || !json.Valid([]byte(t)) {
		return text, nil, nil
	}
	var c jsonCall
	if json.Unmarshal([]byte(t), &c) != nil || c.Name == "" || (c.Parameters == nil && c.Arguments == nil) {
		return text, nil, nil
	}
	call, err := c.call()
	if err != nil {
		return "", nil, err
	}
	return "", []Call{call}, nil
}

// parseGeneric: llama.cpp's generic JSON answer: {"tool_call": {…}},
// {"tool_calls": […]} or {"response": "…"}; any other text is content.
func parseGeneric(text string) (string, []Call, error) {
	var g struct {
		ToolCall  *jsonCall       `json:"tool_call"`
		ToolCalls []jsonCall      `json:"tool_calls"`
		Response  json.RawMessage `json:"response"`
	}
	t := strings.TrimSpace(text)
	if !strings.HasPrefix(t, "{") || json.Unmarshal([]byte(t), &g) != nil {
		return text, nil, nil
	}
	cs := g.ToolCalls
	if g.ToolCall != nil {
		cs = append([]jsonCall{*g.ToolCall}, cs...)
	}
	if len(cs) == 0 {
		var s string
		if json.Unmarshal(g.Response, &s) == nil {
			return s, nil, nil
		}
		if len(g.Response) > 0 {
			return string(g.Response), nil, nil
		}
		return text, nil, nil
	}
	var calls []Call
	for _, c := range cs {
		cl, err := c.call()
		if err != nil {
			return "", nil, err
		}
		calls = append(calls, cl)
	}
	return "", calls, nil
}

// parseHarmony: gpt-oss's channels. A message on the commentary channel
// addressed "to=functions.NAME" is a call (its text the arguments, ended by
// <|call|>); the final channel's message is the content; analysis
// (reasoning) is dropped. Text without channels is content.
func parseHarmony(text string) (string, []Call, error) {
	if !strings.Contains(text, "<|channel|>") && !strings.Contains(text, "<|message|>") {
		return text, nil, nil
	}
	var content string
	var calls []Call
	for _, m := range strings.Split(text, "<|start|>") {
		header, body, ok := strings.Cut(m, "<|message|>")
		if !ok {
			continue
		}
		for _, end := range []string{"<|call|>", "<|end|>", "<|return|>"} {
			body, _, _ = strings.Cut(body, end)
		}
		switch {
		case strings.Contains(header, "to=functions."):
			_, name, _ := strings.Cut(header, "to=functions.")
			name = strings.Fields(strings.ReplaceAll(name, "<|", " <|"))[0]
			a, err := compact(body)
			if err != nil {
				return "", nil, err
			}
			calls = append(calls, Call{Name: name, Arguments: a})
		case strings.Contains(header, "<|channel|>final"), strings.Contains(header, "<|channel|>commentary"):
			content += body
		}
	}
	return content, calls, nil
}
