package bailingmoe2

import (
	"testing"

	"github.com/pipe-engine/pipe/serve/chattest"
	"github.com/pipe-engine/pipe/serve/toolcall"
)

// TestChatTemplateTools: ling-flash-2.0 writes Ling 2.0's template, and pipe's
// Jinja renders a conversation with a tool call and its result with it
// byte for byte as llama.cpp's llama-server does (testdata, recorded by
// serve/chattest/testdata/record-llama.sh).
func TestChatTemplateTools(t *testing.T) {
	chattest.CheckToolRender(t, "ling-flash-2.0", chatTemplate, "testdata/chat-tools.llama.txt")
}

// TestToolCallFormat: pipe serve recognises the template's tool-call
// format and reads back a call written as the template writes one.
func TestToolCallFormat(t *testing.T) {
	chattest.CheckToolCall(t, chatTemplate, toolcall.Hermes,
		"<tool_call>\n{\"name\": \"get_weather\", \"arguments\": {\"city\": \"Paris\", \"days\": 2}}\n</tool_call>",
		"testdata/chat-tools.llama.txt")
}
