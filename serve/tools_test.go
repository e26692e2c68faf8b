package serve

import (
	"encoding/json"
	"fmt"
	"os"
	"testing"

	"github.com/pipe-engine/pipe/decode"
)

// startTools serves the tiny model (path; "" for tinyQ8) rendering chats with
// llama.cpp's template file, in a context big enough for a tools prompt.
func startTools(t *testing.T, path, template string) *harness {
	t.Helper()
	src, err := os.ReadFile("../testdata/chat-templates/llamacpp/" + template)
	if err != nil {
		t.Fatal(err)
	}
	return startModel(t, func(o *decode.Options) {
		if path != "" {
			o.Engine.Path = path
		}
		o.Ctx = 2048
	}, func(o *Options) {
		o.Ctx = 2048
		if err := o.Model.Tokenizer().UseJinja(string(src), template); err != nil {
			t.Fatal(err)
		}
	})
}

// Tools whose arguments a random model cannot make endless: an integer
// (at most 16 digits), an enum, a boolean.
const boundedTools = `[
 {"type":"function","function":{"name":"special_function","description":"I'm special","parameters":{"type":"object","properties":{"arg1":{"type":"integer","description":"The arg."}},"required":["arg1"]}}},
 {"type":"function","function":{"name":"set_unit","parameters":{"type":"object","properties":{"unit":{"type":"string","enum":["celsius","fahrenheit"]},"loud":{"type":"boolean"}},"required":["unit","loud"]}}}]`

// checkCall checks one message's tool call against boundedTools.
func checkCall(t *testing.T, what string, msg map[string]any) {
	t.Helper()
	calls, _ := msg["tool_calls"].([]any)
	if len(calls) != 1 {
		t.Fatalf("%s: tool_calls %v, want one call (message %v)", what, msg["tool_calls"], msg)
	}
	c := calls[0].(map[string]any)
	fn := c["function"].(map[string]any)
	if id, _ := c["id"].(string); len(id) != 32 || c["type"] != "function" {
		t.Errorf("%s: id %q type %v, want 32 characters and function", what, c["id"], c["type"])
	}
	var args map[string]any
	if err := json.Unmarshal([]byte(fn["arguments"].(string)), &args); err != nil {
		t.Fatalf("%s: arguments %q: %v", what, fn["arguments"], err)
	}
	switch fn["name"] {
	case "special_function":
		if n, ok := args["arg1"].(float64); !ok || n != float64(int64(n)) || len(args) != 1 {
			t.Errorf("%s: special_function arguments %v", what, args)
		}
	case "set_unit":
		if u := args["unit"]; (u != "celsius" && u != "fahrenheit") || len(args) != 2 {
			t.Errorf("%s: set_unit arguments %v", what, args)
		}
		if _, ok := args["loud"].(bool); !ok {
			t.Errorf("%s: set_unit loud %v", what, args["loud"])
		}
	default:
		t.Errorf("%s: call of %v, not a tool", what, fn["name"])
	}
}

// TestToolChoiceRequired100: 100 requests with tool_choice "required",
// sampled at temperature 1 with 100 seeds on the tiny random model, all
// return finish_reason tool_calls and one valid call of a given tool.
func TestToolChoiceRequired100(t *testing.T) {
	h := startTools(t, "", "Qwen-Qwen3-0.6B.jinja")
	for i := range 100 {
		body := fmt.Sprintf(`{"messages":[{"role":"user","content":"Call a tool"}],"tools":%s,"tool_choice":"required","temperature":1,"seed":%d,"max_tokens":200}`, boundedTools, i)
		r := h.do("/v1/chat/completions", body, 200)
		ch := r["choices"].([]any)[0].(map[string]any)
		if ch["finish_reason"] != "tool_calls" {
			t.Fatalf("seed %d: finish_reason %v, want tool_calls: %v", i, ch["finish_reason"], ch)
		}
		msg := ch["message"].(map[string]any)
		if msg["content"] != nil {
			t.Errorf("seed %d: content %v, want null beside the call", i, msg["content"])
		}
		checkCall(t, fmt.Sprintf("seed %d", i), msg)
	}
}
