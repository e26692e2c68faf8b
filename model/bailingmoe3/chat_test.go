package bailingmoe3

import (
	"testing"

	"github.com/pipe-engine/pipe/serve/chattest"
	"github.com/pipe-engine/pipe/serve/toolcall"
)

// TestChatTemplateTools: ling-3.0-flash writes Ling 3.0's template, and pipe's
// Jinja renders a conversation with a tool call and its result with it
// byte for byte as llama.cpp's llama-server does (testdata, recorded by
// serve/chattest/testdata/record-llama.sh).
func TestChatTemplateTools(t *testing.T) {
	chattest.CheckToolRender(t, "ling-3.0-flash", chatTemplate, "testdata/chat-tools.llama.txt")
}

// TestToolCallFormat: pipe serve recognises the template's tool-call
// format and reads back a call written as the template writes one.
func TestToolCallFormat(t *testing.T) {
	chattest.CheckToolCall(t, chatTemplate, toolcall.GLM,
		"<tool_call>get_weather\n<arg_key>city</arg_key>\n<arg_value>Paris</arg_value><arg_key>days</arg_key>\n<arg_value>2</arg_value>\n</tool_call>",
		"testdata/chat-tools.llama.txt")
}
