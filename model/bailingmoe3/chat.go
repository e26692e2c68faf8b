package bailingmoe3

import (
	_ "embed" // the chat template

	"github.com/pipe-engine/pipe/model/gen"
)

// chatTemplate is Ling 3.0's chat template ("Bailing V3": thinking
// option, preserved thinking, tool calls), as inclusionAI/Ling-3.0-flash
// ships it: copied from the chat_template that xorbitsai/inference's
// xinference/model/llm/llm_family.json (commit 7ecec16) records for
// Ling-3.0-flash. It writes calls as <tool_call>NAME<arg_key>k</arg_key>
// <arg_value>v</arg_value>…</tool_call> (pipe serve's toolcall.GLM).
//
//go:embed chat_template.jinja
var chatTemplate string

// lingTokenizer is what ling-3.0-flash writes of Ling's tokenizer: the
// <|endoftext|> bos and padding and the <|role_end|> that ends every turn
// of the template (eos; xinference's stop word), and the official chat
// template. The byte-level BPE stays the built-in one: the weights are
// random, only the chat format is Ling's.
func lingTokenizer() *gen.VocabSpec {
	return &gen.VocabSpec{
		Specials: []string{"<|endoftext|>", "<|role_end|>"},
		BOS:      0, EOS: 1, Pad: 0, Pre: "qwen2", ChatTemplate: chatTemplate,
	}
}
