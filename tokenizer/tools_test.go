package tokenizer

import (
	"context"
	"encoding/json"
	"errors"
	"os"
	"strings"
	"testing"
)

// TestChatTools renders Qwen3's template (llama.cpp's models/templates)
// with a tool, an assistant call and the tool's answer: the tool goes into
// the system prompt's <tools>, the call into <tool_call> with its arguments
// as JSON, the answer into <tool_response>.
func TestChatTools(t *testing.T) {
	src, err := os.ReadFile(templates + "llamacpp/Qwen-Qwen3-0.6B.jinja")
	if err != nil {
		t.Fatal(err)
	}
	tk := &Tokenizer{}
	if err := tk.UseJinja(string(src), "Qwen3"); err != nil {
		t.Fatal(err)
	}
	const toolJSON = `{"type":"function","function":{"name":"get_time","description":"Time in a city","parameters":{"type":"object","properties":{"city":{"type":"string"}},"required":["city"]}}}`
	msgs := []Message{
		{Role: "user", Content: "Time in Paris?"},
		{Role: "assistant", ToolCalls: []ToolCall{{ID: "c1", Name: "get_time", Arguments: `{"city":"Paris"}`}}},
		{Role: "tool", Content: "12:00", ToolCallID: "c1"},
	}
	out, err := tk.ChatTools(context.Background(), msgs, json.RawMessage(`[`+toolJSON+`]`), true, false)
	if err != nil {
		t.Fatal(err)
	}
	for _, want := range []string{
		"<tools>\n{\"type\": \"function\", \"function\": {\"name\": \"get_time\", \"description\": \"Time in a city\", \"parameters\": {\"type\": \"object\", \"properties\": {\"city\": {\"type\": \"string\"}}, \"required\": [\"city\"]}}}\n</tools>",
		"<tool_call>\n{\"name\": \"get_time\", \"arguments\": {\"city\": \"Paris\"}}\n</tool_call>",
		"<tool_response>\n12:00\n</tool_response>",
		"<|im_start|>assistant\n",
	} {
		if !strings.Contains(out, want) {
			t.Errorf("render lacks %q:\n%s", want, out)
		}
	}
	if tk.ToolTemplate() != string(src) {
		t.Error("ToolTemplate is not the Jinja source in use")
	}
}

func TestChatToolsNeedsJinja(t *testing.T) {
	tk := &Tokenizer{chatFormat: chatML}
	_, err := tk.ChatTools(context.Background(), []Message{{Role: "user", Content: "x"}}, json.RawMessage(`[{}]`), true, false)
	if !errors.Is(err, ErrUnsupportedTemplate) {
		t.Fatalf("built-in ChatML with tools: %v, want ErrUnsupportedTemplate", err)
	}
	if tk.ToolTemplate() != "chatml" {
		t.Errorf("ToolTemplate %q, want chatml", tk.ToolTemplate())
	}
}
