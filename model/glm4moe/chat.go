package glm4moe

import (
	_ "embed" // the chat template

	"github.com/pipe-engine/pipe/model/gen"
)

// chatTemplate is GLM-4.5's chat template (chat_template.jinja), as
// zai-org/GLM-4.5-Air ships it: copied from the tokenizer.chat_template a
// GGUF converted from zai-org/GLM-4.5-Air carries, which llama-server
// printed at start-up in a GitHub report on ik_llama.cpp (Aug 2025). It
// writes calls as <tool_call>NAME<arg_key>k</arg_key><arg_value>v</arg_value>…
// (pipe serve's toolcall.GLM, llama.cpp's template-derived parser).
//
//go:embed chat_template.jinja
var chatTemplate string

// airTokenizer is what glm-4.5-air writes of GLM-4.5-Air's tokenizer:
// its first ten added tokens as control tokens, in its order
// (<|endoftext|> 151329 … <|observation|> 151338), [gMASK] bos,
// <|endoftext|> eos and padding, and the official chat template. The
// byte-level BPE stays the built-in one (qwen2 pre-tokenizer): the
// weights are random, only the chat format is GLM's.
func airTokenizer() *gen.VocabSpec {
	return &gen.VocabSpec{
		Specials: []string{"<|endoftext|>", "[MASK]", "[gMASK]", "[sMASK]", "<sop>", "<eop>",
			"<|system|>", "<|user|>", "<|assistant|>", "<|observation|>"},
		BOS: 2, EOS: 0, Pad: 0, Pre: "qwen2", ChatTemplate: chatTemplate,
	}
}
