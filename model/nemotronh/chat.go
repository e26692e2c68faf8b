package nemotronh

import (
	_ "embed" // the chat template

	"github.com/pipe-engine/pipe/model/gen"
)

// chatTemplate is Nemotron 3 Nano's chat template
// (nvidia/NVIDIA-Nemotron-3-Nano-30B-A3B-BF16's), as llama.cpp 3f545becc
// ships it in models/templates/NVIDIA-Nemotron-3-Nano-30B-A3B-BF16.jinja.
// It writes calls as <tool_call><function=NAME><parameter=P>…
// (pipe serve's toolcall.QwenXML, llama.cpp's Qwen3-Coder parser).
//
//go:embed chat_template.jinja
var chatTemplate string

// nanoTokenizer is what nemotron-3-nano-30b-a3b writes of Nemotron's
// tokenizer: <unk> (padding), <s> (bos), </s>, <|im_start|> and
// <|im_end|> (eos), in their order, and the official chat template. The
// byte-level BPE stays the built-in one: the weights are random, only the
// chat format is Nemotron's.
func nanoTokenizer() *gen.VocabSpec {
	return &gen.VocabSpec{
		Specials: []string{"<unk>", "<s>", "</s>", "<|im_start|>", "<|im_end|>"},
		BOS:      1, EOS: 4, Pad: 0, Pre: "qwen2", ChatTemplate: chatTemplate,
	}
}
