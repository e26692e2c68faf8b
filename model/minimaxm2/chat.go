package minimaxm2

import (
	_ "embed" // the chat template

	"github.com/pipe-engine/pipe/model/gen"
)

// chatTemplate is MiniMax-M2's chat template (MiniMaxAI/MiniMax-M2's
// chat_template.jinja) as llama.cpp 3f545becc ships it in
// models/templates/MiniMax-M2.jinja (added by llama.cpp #16932). The copy
// xorbitsai/inference records (llm_family.json, commit 7ecec16) differs in
// one expression, message.tool_calls[-1].name where llama.cpp's reads
// .function.name; llama.cpp's is the one that renders OpenAI tool calls.
// It writes calls as <minimax:tool_call><invoke name=…><parameter name=…>
// (pipe serve's toolcall.MiniMaxM2).
//
//go:embed chat_template.jinja
var chatTemplate string

// m2Tokenizer is what minimax-m2 writes of MiniMax-M2's tokenizer: the
// ]~!b[ bos, the ]~b] role marker and the [e~[ end of turn (eos, padding;
// llama.cpp's end-of-generation list names it), and the official chat
// template. The byte-level BPE stays the built-in one: the weights are
// random, only the chat format is MiniMax's.
func m2Tokenizer() *gen.VocabSpec {
	return &gen.VocabSpec{
		Specials: []string{"]~!b[", "]~b]", "[e~["},
		BOS:      0, EOS: 2, Pad: 2, Pre: "qwen2", ChatTemplate: chatTemplate,
	}
}
