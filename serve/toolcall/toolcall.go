package toolcall

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"strings"
)

// ErrCall marks a tool call the text started but did not finish or spell
// right.
var ErrCall = errors.New("malformed tool call")

// Call is one parsed tool call; Arguments is compact JSON (an object).
type Call struct {
	Name      string
	Arguments string
	ID        string // as the model gave it (Mistral Nemo), else ""
}

// Tool is one function a request offers.
type Tool struct {
	Name       string
	Parameters json.RawMessage // a JSON schema (null: any object)
}

// Format is a chat-template family's way of writing tool calls.
type Format int

const (
	Generic Format = iota
	Hermes
	QwenXML
	GLM
	DeepSeek
	Mistral
	MistralArgs
	Llama3
	Harmony
	Gemma4
	MiniMaxM2
)

var names = [...]string{"generic", "hermes", "qwen-xml", "glm", "deepseek", "mistral", "mistral-args", "llama3", "harmony", "gemma4", "minimax-m2"}

func (f Format) String() string { return names[f] }

// Detect is the format of a chat template's source (a Jinja template, or
// the built-in renderer's name: chatml, harmony).
func Detect(tmpl string) Format {
	has := func(s ...string) bool {
		for _, x := range s {
			if !strings.Contains(tmpl, x) {
				return false
			}
		}
		return true
	}
	switch {
	case tmpl == "harmony", has("<|channel|>", "<|start|>"):
		return Harmony
	case tmpl == "gemma4", has("<|tool_call>"):
		return Gemma4
	case has(mmCallsBegin, "<invoke name="):
		return MiniMaxM2
	case has("<｜tool▁calls▁begin｜>") || has("<｜tool▁call▁begin｜>"):
		return DeepSeek
	case has("[TOOL_CALLS]", "[ARGS]"):
		return MistralArgs
	case has("[TOOL_CALLS]"):
		return Mistral
	case has("<arg_key>"):
		return GLM
	case has("<function=", "<parameter="):
		return QwenXML
	case tmpl == "chatml", has("<tool_call>"):
		return Hermes
	case has("<|start_header_id|>") && (has("ipython") || has("<|python_tag|>")):
		return Llama3
	}
	return Generic
}

// Parse splits text into its content and its tool calls. Text with no call
// is all content; a call begun but malformed is an error wrapping ErrCall.
func (f Format) Parse(text string, tools []Tool) (string, []Call, error) {
	switch f {
	case Hermes:
		return parseHermes(text)
	case QwenXML:
		return parseQwenXML(text, tools)
	case GLM:
		return parseGLM(text, tools)
	case DeepSeek:
		return parseDeepSeek(text)
	case Mistral, MistralArgs:
		return parseMistral(text)
	case Llama3:
		return parseLlama3(text)
	case Harmony:
		return parseHarmony(text)
	case Gemma4:
		return parseGemma4(text)
	case MiniMaxM2:
		return parseMiniMaxM2(text, tools)
	}
	return parseGeneric(text)
}

// compact is v as compact JSON text, or an error when v is not a JSON object.
func compact(v string) (string, error) {
	var b bytes.Buffer
	v = strings.TrimSpace(v)
	if err := json.Compact(&b, []byte(v)); err != nil {
		return "", fmt.Errorf("%w: arguments %q: %v", ErrCall, clip(v), err)
	}
	if !strings.HasPrefix(b.String(), "{") {
		return "", fmt.Errorf("%w: arguments %q: not an object", ErrCall, clip(v))
	}
	return b.String(), nil
}

func clip(s string) string {
	if len(s) > 80 {
		return s[:80] + "…"
	}
	return s
}

// jsonCall is the {"name", "arguments"} object most formats write;
// Parameters is Llama 3's name for the arguments.
type jsonCall struct {
	Name       string          `json:"name"`
	Arguments  json.RawMessage `json:"arguments"`
	Parameters json.RawMessage `json:"parameters"`
	ID         string          `json:"id"`
}

func (c jsonCall) call() (Call, error) {
	args := c.Arguments
	if len(args) == 0 {
		args = c.Parameters
	}
	if c.Name == "" {
		return Call{}, fmt.Errorf("%w: no function name", ErrCall)
	}
	if len(args) == 0 {
		args = json.RawMessage("{}")
	}
	if s := strings.TrimSpace(string(args)); strings.HasPrefix(s, `"`) {
		// arguments given as a JSON string of JSON (OpenAI's wire form)
		var inner string
		if json.Unmarshal(args, &inner) == nil {
			args = json.RawMessage(inner)
		}
	}
	a, err := compact(string(args))
	if err != nil {
		return Call{}, err
	}
	return Call{Name: c.Name, Arguments: a, ID: c.ID}, nil
}

// decodeCall reads one {"name", "arguments"} object.
func decodeCall(s string) (Call, error) {
	var c jsonCall
	if err := json.Unmarshal([]byte(strings.TrimSpace(s)), &c); err != nil {
		return Call{}, fmt.Errorf("%w: %q: %v", ErrCall, clip(s), err)
	}
	return c.call()
}

// between cuts text at every open…close pair: the text outside the pairs
// (trimmed at the seams) and the inside of each.
func between(text, open, close string) (string, []string, error) {
	var out strings.Builder
	var inner []string
	for {
		i := strings.Index(text, open)
		if i < 0 {
			out.WriteString(text)
			break
		}
		out.WriteString(text[:i])
		rest := text[i+len(open):]
		j := strings.Index(rest, close)
		if j < 0 {
			return "", nil, fmt.Errorf("%w: %s without %s", ErrCall, open, close)
		}
		inner = append(inner, rest[:j])
		text = rest[j+len(close):]
	}
	content := out.String()
	if len(inner) > 0 {
		content = strings.TrimSpace(content)
	}
	return content, inner, nil
}
