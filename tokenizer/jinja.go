package tokenizer

import (
	"fmt"
	"strings"

	"github.com/pipe-engine/pipe/internal/jinja"
)

// Chat templates run as Jinja (llama.cpp's --jinja): the GGUF's own
// tokenizer.chat_template, or another template, rendered by
// github.com/ardanlabs/jinja, a pure-Go Jinja engine written for the chat
// templates GGUF files carry (no cgo, no dependencies). The built-in
// renderers (ChatML, harmony, Gemma 4) stay the default.

// UseJinja makes Chat render src as a Jinja chat template. The turn-closing
// token (EndOfTurn) is still the one of the built-in format src resembles.
func (t *Tokenizer) UseJinja(src string) error {
	tmpl, err := compileJinja(src)
	if err != nil {
		return err
	}
	t.jinja, t.chatFormat = tmpl, detectChatFormat(src)
	return nil
}

// jinjaTemplate is a compiled chat template and what it can render.
type jinjaTemplate struct {
	tmpl *jinja.Template
	// systemRole: the template renders a system message's content (else
	// the system message is merged into the next one, as llama.cpp's
	// system_message_not_supported workaround does).
	systemRole bool
}

// compileJinja compiles src and probes it as llama.cpp's caps check does:
// a system and a user message, and whether the system text comes out.
func compileJinja(src string) (*jinjaTemplate, error) {
	tmpl, err := jinja.Compile(src)
	if err != nil {
		return nil, fmt.Errorf("chat template: %w", err)
	}
	const probe = "System message"
	out, err := tmpl.Render(map[string]any{"messages": []any{
		map[string]any{"role": "system", "content": probe}, map[string]any{"role": "user", "content": "User message"}},
		"add_generation_prompt": false, "bos_token": "", "eos_token": ""})
	return &jinjaTemplate{tmpl: tmpl, systemRole: err == nil && strings.Contains(out, probe)}, nil
}

// UseBuiltin makes Chat use the built-in format name (chatml, harmony or
// gemma4), whatever the GGUF's template is.
func (t *Tokenizer) UseBuiltin(name string) error {
	for _, f := range []chatFormat{chatML, chatHarmony, chatGemma4} {
		if formatName(f) == name {
			t.jinja, t.chatFormat = nil, f
			return nil
		}
	}
	return fmt.Errorf("chat template %q: the built-in ones are chatml, harmony and gemma4: %w", name, ErrUnsupportedTemplate)
}

// renderJinja renders messages with the Jinja template as llama.cpp's
// common_chat_templates_apply does for plain text turns: bos_token and
// eos_token are the vocabulary's, enable_thinking is !noThink (llama.cpp's
// default is on), a system message goes into the next one when the template
// has no system role, and a BOS (EOS) the template writes at the start
// (end) is dropped when the tokenizer adds one itself.
func (t *Tokenizer) renderJinja(messages []Message, addGenerationPrompt, noThink bool) (string, error) {
	bos, eos := t.specialText(t.bos), t.specialText(t.eos)
	out, err := renderJinja(t.jinja, messages, addGenerationPrompt, noThink, bos, eos)
	if err != nil {
		return "", err
	}
	if t.addBOS && bos != "" {
		out = strings.TrimPrefix(out, bos)
	}
	if t.addEOS && eos != "" {
		out = strings.TrimSuffix(out, eos)
	}
	return out, nil
}

// renderJinja renders messages with tmpl and the template variables
// llama.cpp sets.
func renderJinja(tmpl *jinjaTemplate, messages []Message, addGenerationPrompt, noThink bool, bos, eos string) (string, error) {
	if !tmpl.systemRole && len(messages) > 0 && messages[0].Role == "system" {
		merged := messages[1:]
		if len(merged) > 0 {
			merged = append([]Message{{Role: merged[0].Role, Content: messages[0].Content + "\n" + merged[0].Content}}, merged[1:]...)
		}
		messages = merged
	}
	msgs := make([]any, len(messages))
	for i, m := range messages {
		msgs[i] = map[string]any{"role": m.Role, "content": m.Content}
	}
	out, err := tmpl.tmpl.Render(map[string]any{
		"messages": msgs, "add_generation_prompt": addGenerationPrompt,
		"bos_token": bos, "eos_token": eos, "enable_thinking": !noThink,
	})
	if err != nil {
		return "", fmt.Errorf("chat template: %w", err)
	}
	return out, nil
}

// specialText is a special token's text ("" for None).
func (t *Tokenizer) specialText(id int32) string {
	if id == None {
		return ""
	}
	return t.TokenText(id)
}
