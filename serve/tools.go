package serve

import (
	"encoding/json"
	"math/rand/v2"
	"strings"

	"github.com/pipe-engine/pipe/sample"
	"github.com/pipe-engine/pipe/sample/grammar"
	"github.com/pipe-engine/pipe/serve/toolcall"
	"github.com/pipe-engine/pipe/tokenizer"
)

// Tool calls, as llama-server (tools/server and common/chat at 3f545becc)
// takes them on /v1/chat/completions: OpenAI's "tools", "tool_choice"
// ("auto", "none", "required" or {"type": "function", "function": {"name"}})
// and "parallel_tool_calls" (default false). The tools go to the Jinja
// chat template (tokenizer.ChatTools) with the history's assistant
// tool_calls and "tool" turns; the template names the family whose call
// syntax the answer is parsed with (serve/toolcall). "required" and a named
// function are enforced by the family's tool-call grammar from the first
// token; "auto" by the same grammar made lazy, from the family's trigger
// word on (families without one, such as Llama 3, gpt-oss and the generic
// JSON, are parsed but not constrained). "none" renders the tools and
// parses nothing. The answer's calls become message.tool_calls (ids as
// llama-server makes them: 32 random letters and digits, or the model's own)
// with finish_reason "tool_calls"; streamed, content goes out as it comes
// until a trigger word could start, and each call is one tool_calls delta
// at the end.

// toolFields are a chat request's tool fields.
type toolFields struct {
	Tools             json.RawMessage `json:"tools"`
	ToolChoice        json.RawMessage `json:"tool_choice"`
	ParallelToolCalls *bool           `json:"parallel_tool_calls"`
}

// toolJob is a chat job's tools, parsed.
type toolJob struct {
	raw      json.RawMessage // the tools as given, for the template
	tools    []toolcall.Tool
	choice   string // auto, none, required, or function (named)
	parallel bool
	format   toolcall.Format // the template's, set by intake
}

// toolIn is one of "tools".
type toolIn struct {
	Type     string `json:"type"`
	Function *struct {
		Name       string          `json:"name"`
		Parameters json.RawMessage `json:"parameters"`
	} `json:"function"`
}

// toolCallIn is one of an assistant message's "tool_calls".
type toolCallIn struct {
	ID       string `json:"id"`
	Type     string `json:"type"`
	Function struct {
		Name      string          `json:"name"`
		Arguments json.RawMessage `json:"arguments"` // a JSON string (OpenAI) or an object
	} `json:"function"`
}

// parse reads the fields into j.tools (nil: no tools).
func (f *toolFields) parse(j *job) error {
	if isNull(f.Tools) || empty(f.Tools) {
		if c, _ := f.choice(); c == "required" || c == "function" {
			return fieldErr("tool_choice", "tool_choice: %s needs tools", c)
		}
		return nil
	}
	var ts []toolIn
	if err := json.Unmarshal(f.Tools, &ts); err != nil {
		return fieldErr("tools", "tools: want an array of {type: function, function: {name, parameters}}: %v", err)
	}
	tj := &toolJob{raw: f.Tools, parallel: f.ParallelToolCalls != nil && *f.ParallelToolCalls}
	for i, t := range ts {
		if t.Type != "function" || t.Function == nil || t.Function.Name == "" {
			return fieldErr("tools", "tools[%d]: want {type: \"function\", function: {name, parameters}}", i)
		}
		tj.tools = append(tj.tools, toolcall.Tool{Name: t.Function.Name, Parameters: t.Function.Parameters})
	}
	choice, name := f.choice()
	switch choice {
	case "auto", "none", "required":
	case "function":
		var keep []toolcall.Tool
		for _, t := range tj.tools {
			if t.Name == name {
				keep = append(keep, t)
			}
		}
		if len(keep) == 0 {
			return fieldErr("tool_choice", "tool_choice: no tool named %q", name)
		}
		tj.tools = keep
	default:
		return fieldErr("tool_choice", `tool_choice: want "auto", "none", "required" or {"type": "function", "function": {"name": …}}, got %s`, f.ToolChoice)
	}
	tj.choice = choice
	j.tools = tj
	return nil
}

// choice is tool_choice's kind ("" when it is none of OpenAI's forms) and
// the named function's name.
func (f *toolFields) choice() (string, string) {
	if isNull(f.ToolChoice) {
		return "auto", ""
	}
	var s string
	if json.Unmarshal(f.ToolChoice, &s) == nil {
		return s, ""
	}
	var named struct {
		Type     string `json:"type"`
		Function struct {
			Name string `json:"name"`
		} `json:"function"`
	}
	if json.Unmarshal(f.ToolChoice, &named) != nil || named.Type != "function" || named.Function.Name == "" {
		return "", ""
	}
	return "function", named.Function.Name
}

// historyMessage is a chat message with its tool calls and tool_call_id.
func historyMessage(i int, m chatMessage) (tokenizer.Message, error) {
	tm := tokenizer.Message{Role: m.Role, Content: m.Content.String(), ToolCallID: m.ToolCallID}
	for k, c := range m.ToolCalls {
		if c.Function.Name == "" {
			return tm, fieldErr("messages", "messages[%d].tool_calls[%d]: function.name is required", i, k)
		}
		args := strings.TrimSpace(string(c.Function.Arguments))
		var s string
		if json.Unmarshal(c.Function.Arguments, &s) == nil {
			args = s
		}
		tm.ToolCalls = append(tm.ToolCalls, tokenizer.ToolCall{ID: c.ID, Name: c.Function.Name, Arguments: args})
	}
	return tm, nil
}

// hasToolTurns reports a history with tool calls or tool turns.
func hasToolTurns(ms []tokenizer.Message) bool {
	for _, m := range ms {
		if len(m.ToolCalls) > 0 || m.Role == "tool" {
			return true
		}
	}
	return false
}

// toolsBesideGrammar refuses tools that would call beside a request's own
// grammar, json_schema or response_format.
func toolsBesideGrammar(j *job) error {
	if j.tools != nil && j.tools.choice != "none" && j.gram != nil {
		return fieldErr("tools", "tools: cannot be used with grammar, json_schema or response_format")
	}
	return nil
}

// resolveTools names the template's tool-call family and, unless
// tool_choice is "none", sets the job's grammar: enforced for "required"
// and a named function, lazy from the family's trigger words for "auto".
func resolveTools(tok *tokenizer.Tokenizer, j *job) error {
	tj := j.tools
	if tj == nil {
		return nil
	}
	if tok.ChatFormat() != "jinja" {
		return fieldErr("tools", "tools: need a Jinja chat template (--jinja, --chat-template-file), as llama-server's need --jinja")
	}
	tj.format = toolcall.Detect(tok.ToolTemplate())
	if tj.choice == "none" {
		return nil
	}
	triggers := tj.format.Triggers()
	if tj.choice == "auto" && len(triggers) == 0 {
		return nil
	}
	src, err := tj.format.Grammar(tj.tools, tj.parallel)
	if err != nil {
		return fieldErr("tools", "tools: %v", err)
	}
	g, err := grammar.Parse(src)
	if err != nil {
		return fieldErr("tools", "tools: the tool-call grammar: %v", err)
	}
	j.gram, j.grammarSrc = g, src
	if tj.choice == "auto" {
		j.lazy = true
		for _, w := range triggers {
			j.triggers = append(j.triggers, grammar.Trigger{Kind: grammar.TriggerWord, Value: w, Token: -1})
		}
	}
	return nil
}

// toolCallOut is one of a message's (or a delta's) tool_calls.
type toolCallOut struct {
	Index    *int   `json:"index,omitempty"` // in a stream's delta
	ID       string `json:"id"`
	Type     string `json:"type"`
	Function struct {
		Name      string `json:"name"`
		Arguments string `json:"arguments"`
	} `json:"function"`
}

// toolMsgOut is an answer's message when the request had tools.
type toolMsgOut struct {
	Role             string        `json:"role"`
	Content          string        `json:"content"`
	ReasoningContent string        `json:"reasoning_content,omitempty"`
	ToolCalls        []toolCallOut `json:"tool_calls,omitempty"`
}

// answer parses a finished generation: its content and its calls (none
// when the text holds no well-formed call: then it is all content).
func (tj *toolJob) answer(text string) (string, []toolCallOut) {
	if tj.choice == "none" {
		return text, nil
	}
	content, calls, err := tj.format.Parse(text, tj.tools)
	if err != nil || len(calls) == 0 {
		return text, nil
	}
	out := make([]toolCallOut, len(calls))
	for i, c := range calls {
		id := c.ID
		if id == "" {
			id = toolCallID()
		}
		out[i] = toolCallOut{ID: id, Type: "function"}
		out[i].Function.Name, out[i].Function.Arguments = c.Name, c.Arguments
	}
	return content, out
}

// message is the non-streamed answer's message and finish reason.
func (tj *toolJob) message(text, finish string) (*toolMsgOut, string) {
	content, calls := tj.answer(text)
	// content "" beside calls, as llama-server's (OpenAI's is null)
	m := &toolMsgOut{Role: "assistant", Content: content, ToolCalls: calls}
	if len(calls) > 0 && finish == "stop" {
		finish = "tool_calls"
	}
	return m, finish
}

const idChars = "abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ0123456789"

// toolCallID is llama-server's gen_tool_call_id: 32 random letters and digits.
func toolCallID() string {
	b := make([]byte, 32)
	for i := range b {
		b[i] = idChars[rand.IntN(len(idChars))]
	}
	return string(b)
}

// safePrefix is how much of text a stream may send as content: up to the
// first trigger word, less a tail that could begin one; nothing for a
// family without trigger words.
func (tj *toolJob) safePrefix(text string) int {
	if tj.choice == "none" {
		return len(text)
	}
	ts := tj.format.Triggers()
	if len(ts) == 0 {
		return 0
	}
	n := len(text)
	for _, t := range ts {
		if i := strings.Index(text, t); i >= 0 {
			n = min(n, i)
			continue
		}
		for k := min(len(t)-1, len(text)); k > 0; k-- {
			if strings.HasSuffix(text, t[:k]) {
				n = min(n, len(text)-k)
				break
			}
		}
	}
	return n
}

// heldText is a stream's generated text and how much of it was sent: with
// tools, text that could begin a call is held back (safePrefix) until the
// end shows whether it does.
type heldText struct {
	buf  strings.Builder
	sent int
}

// add appends s and returns what may now be sent ("" for nothing); tj nil:
// no tools, everything.
func (h *heldText) add(s string, tj *toolJob) string {
	h.buf.WriteString(s)
	txt := h.buf.String()
	n := len(txt)
	if tj != nil {
		n = tj.safePrefix(txt)
	}
	if n <= h.sent {
		return ""
	}
	out := txt[h.sent:n]
	h.sent = n
	return out
}

// all is the whole text; sentText the part already sent.
func (h *heldText) all() string      { return h.buf.String() }
func (h *heldText) sentText() string { return h.buf.String()[:h.sent] }

// toolStream is the stream of a request with tools: content deltas while
// no call can have started (safePrefix), then at the end the rest of the
// content and one tool_calls delta per call.
type toolStream struct {
	*sse
	tj      *toolJob
	buf     strings.Builder
	sent    int
	pending []sample.TokenProbs // of text not sent yet
}

func (e *toolStream) text(p piece) error {
	e.buf.WriteString(p.text)
	e.pending = append(e.pending, p.probs...)
	txt := e.buf.String()
	n := e.tj.safePrefix(txt)
	if n <= e.sent {
		if p.reasoning == "" {
			return nil
		}
		return e.sse.text(piece{reasoning: p.reasoning, tel: p.tel}) // reasoning holds no calls
	}
	q := piece{text: txt[e.sent:n], reasoning: p.reasoning, probs: e.pending, tel: p.tel}
	e.sent, e.pending = n, nil
	return e.sse.text(q)
}

func (e *toolStream) end(o *outcome) error {
	txt := e.buf.String()
	content, calls := e.tj.answer(txt)
	if rest, ok := strings.CutPrefix(content, txt[:e.sent]); ok && rest != "" {
		if err := e.sse.text(piece{text: rest, probs: e.pending}); err != nil {
			return err
		}
	}
	for i, c := range calls {
		c.Index = &i
		d := &chatDelta{ToolCalls: []toolCallOut{c}}
		if err := e.event(e.sh.response(true, choice{Delta: d})); err != nil {
			return err
		}
	}
	if len(calls) > 0 && o.finish == "stop" {
		o.finish = "tool_calls"
	}
	return e.sse.end(o)
}
