package qwen3next

import (
	_ "embed" // the chat template

	"github.com/pipe-engine/pipe/model/gen"
)

// chatTemplate is Qwen3-Next-80B-A3B-Instruct's chat template, as
// Qwen/Qwen3-Next-80B-A3B-Instruct ships it: copied from the chat_template
// that xorbitsai/inference's xinference/model/llm/llm_family.json (commit
// 7ecec16) records for Qwen3-Next-Instruct. It writes calls as Hermes-style
// <tool_call>{"name": …, "arguments": …}</tool_call> (pipe serve's
// toolcall.Hermes).
//
//go:embed chat_template.jinja
var chatTemplate string

// instructTokenizer is the ChatML tokenizer with the official chat
// template.
func instructTokenizer() *gen.VocabSpec {
	v := gen.ChatMLVocab()
	v.ChatTemplate = chatTemplate
	return &v
}
