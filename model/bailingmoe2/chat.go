package bailingmoe2

import (
	_ "embed" // the chat template

	"github.com/pipe-engine/pipe/model/gen"
)

// chatTemplate is Ling 2.0's chat template (tokenizer_config.json's
// chat_template of inclusionAI's Ling 2.0 models, "detailed thinking off"),
// copied from the tokenizer.chat_template of a Ling 2.0 GGUF that
// llama-server printed at start-up in ikawrakow/ik_llama.cpp issue #856
// (Oct 2025). It writes calls as Hermes-style <tool_call>{"name": …,
// "arguments": …}</tool_call> (pipe serve's toolcall.Hermes).
//
//go:embed chat_template.jinja
var chatTemplate string

// lingTokenizer is what ling-flash-2.0 writes of Ling's tokenizer: the
// <|endoftext|> bos and padding and the <|role_end|> that ends every turn
// of the template (eos), and the official chat template. The byte-level
// BPE stays the built-in one: the weights are random, only the chat
// format is Ling's.
func lingTokenizer() *gen.VocabSpec {
	return &gen.VocabSpec{
		Specials: []string{"<|endoftext|>", "<|role_end|>"},
		BOS:      0, EOS: 1, Pad: 0, Pre: "qwen2", ChatTemplate: chatTemplate,
	}
}
