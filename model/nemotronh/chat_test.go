package nemotronh

import (
	"testing"

	"github.com/pipe-engine/pipe/serve/chattest"
	"github.com/pipe-engine/pipe/serve/toolcall"
)

// TestChatTemplateTools: nemotron-3-nano-30b-a3b writes Nemotron 3 Nano's template, and pipe's
// Jinja renders a conversation with a tool call and its result with it
// byte for byte as llama.cpp's llama-server does (testdata, recorded by
// serve/chattest/testdata/record-llama.sh).
func TestChatTemplateTools(t *testing.T) {
	chattest.CheckToolRender(t, "nemotron-3-nano-30b-a3b", chatTemplate, "testdata/chat-tools.llama.txt")
}

// TestToolCallFormat: pipe serve recognises the template's tool-call
// format and reads back a call written as the template writes one.
func TestToolCallFormat(t *testing.T) {
	chattest.CheckToolCall(t, chatTemplate, toolcall.QwenXML,
		"<tool_call>\n<function=get_weather>\n<parameter=city>\nParis\n</parameter>\n<parameter=days>\n2\n</parameter>\n</function>\n</tool_call>",
		"testdata/chat-tools.llama.txt")
}
