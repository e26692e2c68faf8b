package minimaxm2

import (
	"testing"

	"github.com/pipe-engine/pipe/serve/chattest"
	"github.com/pipe-engine/pipe/serve/toolcall"
)

// TestChatTemplateTools: minimax-m2 writes MiniMax-M2's template, and pipe's
// Jinja renders a conversation with a tool call and its result with it
// byte for byte as llama.cpp's llama-server does (testdata, recorded by
// serve/chattest/testdata/record-llama.sh).
func TestChatTemplateTools(t *testing.T) {
	chattest.CheckToolRender(t, "minimax-m2", chatTemplate, "testdata/chat-tools.llama.txt")
}

// TestToolCallFormat: pipe serve recognises the template's tool-call
// format and reads back a call written as the template writes one.
func TestToolCallFormat(t *testing.T) {
	chattest.CheckToolCall(t, chatTemplate, toolcall.MiniMaxM2,
		"<minimax:tool_call>\n<invoke name=\"get_weather\">\n<parameter name=\"city\">Paris</parameter>\n<parameter name=\"days\">2</parameter>\n</invoke>\n</minimax:tool_call>",
		"testdata/chat-tools.llama.txt")
}
