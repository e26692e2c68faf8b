package tokenizer

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"strings"

	"github.com/pipe-engine/pipe/internal/jinja"
)

// Chat templates run as Jinja (llama.cpp's --jinja): the GGUF's own
// tokenizer.chat_template, or another template, rendered by internal/jinja,
// pipe's bounded fork of github.com/ardanlabs/jinja. A template is code from
// the model file: every render runs under the limits SetTemplateLimits set
// (by default jinja.DefaultLimits) and the
// caller's context, and its errors name the template's origin. The built-in
// renderers (ChatML, harmony, Gemma 4) stay the default.

// ErrTemplateLimit: a Jinja chat template hit one of its limits (output,
// allocation, steps, call depth, time, value size, nesting).
var ErrTemplateLimit = jinja.ErrLimit

// ErrTemplate is every error of a Jinja chat template: compiling it, or
// rendering it (a limit, raise_exception, a stopped context).
var ErrTemplate = errors.New("chat template")

// SetTemplateLimits sets the limits of the Jinja templates UseJinja sets
// afterwards (zero fields: jinja.DefaultLimits); lim must be valid
// (jinja.Limits.Validate).
func (t *Tokenizer) SetTemplateLimits(lim jinja.Limits) error {
	if err := lim.Validate(); err != nil {
		return fmt.Errorf("%w: %w", ErrTemplate, err)
	}
	t.jinjaLimits = lim
	return nil
}

// UseJinja makes Chat render src as a Jinja chat template; origin names it
// in errors (a file path, or the GGUF key tokenizer.chat_template). The
// turn-closing token (EndOfTurn) is still the one of the built-in format src
// resembles.
func (t *Tokenizer) UseJinja(src, origin string) error {
	tmpl, err := compileJinja(src, origin, t.jinjaLimits)
	if err != nil {
		return err
	}
	t.jinja, t.llamaName, t.chatFormat = tmpl, "", detectChatFormat(src)
	return nil
}

// jinjaTemplate is a compiled chat template and what it can render.
type jinjaTemplate struct {
	tmpl   *jinja.Template
	origin string
	lim    jinja.Limits
	src    string
	// systemRole: the template renders a system message's content (else
	// the system message is merged into the next one, as llama.cpp's
	// system_message_not_supported workaround does).
	systemRole bool
}

// compileJinja compiles src and probes it as llama.cpp's caps check does:
// a system and a user message, and whether the system text comes out. A
// probe that hits a limit (or crashes the engine) refuses the template; a
// probe the template itself rejects (raise_exception) only means no
// system role.
func compileJinja(src, origin string, lim jinja.Limits) (*jinjaTemplate, error) {
	tmpl, err := jinja.Compile(src)
	if err != nil {
		return nil, fmt.Errorf("%w (%s): %w", ErrTemplate, origin, err)
	}
	const probe = "System message"
	out, err := tmpl.RenderContext(context.Background(), map[string]any{"messages": []any{
		map[string]any{"role": "system", "content": probe}, map[string]any{"role": "user", "content": "User message"}},
		"add_generation_prompt": false, "bos_token": "", "eos_token": ""}, lim)
	if errors.Is(err, jinja.ErrLimit) || errors.Is(err, jinja.ErrEngine) {
		return nil, fmt.Errorf("%w (%s): test render: %w", ErrTemplate, origin, err)
	}
	return &jinjaTemplate{tmpl: tmpl, origin: origin, lim: lim, src: src, systemRole: err == nil && strings.Contains(out, probe)}, nil
}

// UseBuiltin makes Chat use the built-in format name, whatever the GGUF's
// template is: pipe's chatml, harmony (llama.cpp's gpt-oss) or gemma4, or
// one of llama.cpp's built-in templates (LlamaTemplateNames: llama3,
// mistral-v7, command-r, deepseek3, …), rendered as llama.cpp does.
func (t *Tokenizer) UseBuiltin(name string) error {
	if name == "gpt-oss" {
		name = "harmony"
	}
	for _, f := range []chatFormat{chatML, chatHarmony, chatGemma4} {
		if formatName(f) == name {
			t.jinja, t.llamaName, t.chatFormat = nil, "", f
			return nil
		}
	}
	if _, ok := llamaTemplates[name]; ok && name != "dots1" {
		t.jinja, t.llamaName = nil, name
		return nil
	}
	return fmt.Errorf("chat template %q: not chatml, harmony, gemma4 or one of llama.cpp's built-in names (%s): %w",
		name, strings.Join(LlamaTemplateNames(), ", "), ErrUnsupportedTemplate)
}

// renderJinja renders messages with the Jinja template as llama.cpp's
// common_chat_templates_apply does for plain text turns: bos_token and
// eos_token are the vocabulary's, enable_thinking is !noThink (llama.cpp's
// default is on), a system message goes into the next one when the template
// has no system role, and a BOS (EOS) the template writes at the start
// (end) is dropped when the tokenizer adds one itself.
func (t *Tokenizer) renderJinja(ctx context.Context, messages []Message, addGenerationPrompt, noThink bool, tools ...jinja.Value) (string, error) {
	bos, eos := t.specialText(t.bos), t.specialText(t.eos)
	out, err := renderJinja(ctx, t.jinja, messages, addGenerationPrompt, noThink, bos, eos, tools...)
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
// llama.cpp sets; tools, when given, are the template's "tools".
func renderJinja(ctx context.Context, tmpl *jinjaTemplate, messages []Message, addGenerationPrompt, noThink bool, bos, eos string, tools ...jinja.Value) (string, error) {
	if !tmpl.systemRole && len(messages) > 0 && messages[0].Role == "system" {
		merged := messages[1:]
		if len(merged) > 0 {
			merged = append([]Message{{Role: merged[0].Role, Content: messages[0].Content + "\n" + merged[0].Content}}, merged[1:]...)
		}
		messages = merged
	}
	msgs := make([]jinja.Value, len(messages))
	for i, m := range messages {
		msgs[i] = messageVar(m)
	}
	vars := map[string]any{
		"messages": msgs, "add_generation_prompt": addGenerationPrompt,
		"bos_token": bos, "eos_token": eos, "enable_thinking": !noThink,
	}
	if len(tools) > 0 {
		vars["tools"] = tools
	}
	for k, raw := range templateVarsOf(ctx) {
		dec := json.NewDecoder(bytes.NewReader(raw))
		dec.UseNumber() // integers stay integers (jinja.FromGoValue)
		var v any
		if err := dec.Decode(&v); err != nil {
			return "", fmt.Errorf("template variable %s: %w", k, err)
		}
		vars[k] = v
	}
	out, err := tmpl.tmpl.RenderContext(ctx, vars, tmpl.lim)
	if err != nil {
		return "", fmt.Errorf("%w (%s): %w", ErrTemplate, tmpl.origin, err)
	}
	return out, nil
}

// templateVarsKey is the context key of WithTemplateVars.
type templateVarsKey struct{}

// WithTemplateVars returns ctx carrying Jinja template variables, as JSON
// values by name, that the renders of a Jinja template under it add to (or
// set over) the ones pipe sets — llama.cpp's extra context: the date a
// server adds (date_string, datetime) and a request's
// chat_template_kwargs. The built-in renderers take none of them. A value
// that is not JSON is an error of the render that names it.
func WithTemplateVars(ctx context.Context, vars map[string]json.RawMessage) context.Context {
	return context.WithValue(ctx, templateVarsKey{}, vars)
}

func templateVarsOf(ctx context.Context) map[string]json.RawMessage {
	v, _ := ctx.Value(templateVarsKey{}).(map[string]json.RawMessage)
	return v
}

// specialText is a special token's text ("" for None).
func (t *Tokenizer) specialText(id int32) string {
	if id == None {
		return ""
	}
	return t.TokenText(id)
}
