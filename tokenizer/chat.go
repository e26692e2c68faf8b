package tokenizer

import (
	"context"
	"fmt"
	"strings"
)

// Message is one chat turn.
type Message struct {
	Role    string // "system", "user", "assistant", "tool", ...
	Content string
	// ToolCalls are an assistant turn's calls and ToolCallID the call a
	// "tool" turn answers (rendered by Jinja templates only, see ChatTools).
	ToolCalls  []ToolCall
	ToolCallID string
}

type chatFormat int

const (
	chatNone chatFormat = iota
	chatML
	chatHarmony
	chatGemma4
)

// detectChatFormat follows llama.cpp's llm_chat_detect_template for the
// formats implemented here.
func detectChatFormat(tmpl string) chatFormat {
	switch {
	case strings.Contains(tmpl, "<|im_start|>") && !strings.Contains(tmpl, "<|im_sep|>") && !strings.Contains(tmpl, "<end_of_utterance>"):
		return chatML
	case strings.Contains(tmpl, "<|start|>") && strings.Contains(tmpl, "<|channel|>"):
		return chatHarmony
	case strings.Contains(tmpl, "<|turn>") && strings.Contains(tmpl, "<turn|>"):
		// Gemma 4: llama.cpp has no built-in renderer for it (its
		// llm_chat_detect_template knows Gemma 2/3's <start_of_turn> only)
		// and runs the model's Jinja template; Chat renders what that
		// template (models/templates/google-gemma-4-31B-it.jinja) gives for
		// plain text turns.
		return chatGemma4
	}
	return chatNone
}

// ChatFormat names the chat format Chat renders: the detected (or chosen)
// built-in one, "chatml", "harmony" or "gemma4", the llama.cpp template
// name UseBuiltin chose, "jinja" for a Jinja
// template (UseJinja), or "" when the template is not a known one.
func (t *Tokenizer) ChatFormat() string {
	if t.jinja != nil {
		return "jinja"
	}
	if t.llamaName != "" {
		return t.llamaName
	}
	return formatName(t.chatFormat)
}

func formatName(f chatFormat) string {
	switch f {
	case chatML:
		return "chatml"
	case chatHarmony:
		return "harmony"
	case chatGemma4:
		return "gemma4"
	}
	return ""
}

// EndOfTurn is the token that closes an assistant turn in the rendered
// history of the model's chat format (ChatML <|im_end|>, harmony <|return|>),
// when the vocabulary has it: a conversation whose reply stopped without
// sampling it feeds it before the next turn's delta.
func (t *Tokenizer) EndOfTurn() (int32, bool) {
	switch t.chatFormat {
	case chatML:
		return t.ID("<|im_end|>")
	case chatHarmony:
		return t.ID("<|return|>")
	case chatGemma4:
		return t.ID("<turn|>")
	}
	return 0, false
}

// ThinkOff is what Qwen3's template appends after the assistant header when
// enable_thinking is false (pipe's --no-think).
const ThinkOff = "<think>\n\n</think>\n\n"

// Chat renders messages with the built-in format detected from the model's
// tokenizer.chat_template, as llama_chat_apply_template does; tokenize the
// result with parseSpecial=true. With addGenerationPrompt the assistant header
// is appended; noThink then also appends the empty think block (ChatML only).
//
// ChatML:  <|im_start|>{role}\n{content}<|im_end|>\n ... <|im_start|>assistant\n
// Harmony: <|start|>{role}<|message|>{content}<|end|> (<|return|> after
// assistant turns) ... <|start|>assistant
func (t *Tokenizer) Chat(messages []Message, addGenerationPrompt, noThink bool) (string, error) {
	return t.ChatContext(context.Background(), messages, addGenerationPrompt, noThink)
}

// ChatContext is Chat with a Jinja template's render stopped by ctx (a
// cancelled request, SIGTERM, Ctrl-C).
func (t *Tokenizer) ChatContext(ctx context.Context, messages []Message, addGenerationPrompt, noThink bool) (string, error) {
	if t.jinja != nil {
		return t.renderJinja(ctx, messages, addGenerationPrompt, noThink)
	}
	if t.llamaName != "" {
		return RenderLlamaTemplate(t.llamaName, messages, addGenerationPrompt)
	}
	var b strings.Builder
	switch t.chatFormat {
	case chatML:
		for _, m := range messages {
			b.WriteString("<|im_start|>")
			b.WriteString(m.Role)
			b.WriteByte('\n')
			b.WriteString(m.Content)
			b.WriteString("<|im_end|>\n")
		}
		if addGenerationPrompt {
			b.WriteString("<|im_start|>assistant\n")
			if noThink {
				b.WriteString(ThinkOff)
			}
		}
	case chatHarmony:
		if noThink {
			return "", fmt.Errorf("--no-think with the harmony chat format: %w (gpt-oss has no empty-think form)", ErrUnsupportedTemplate)
		}
		for _, m := range messages {
			b.WriteString("<|start|>")
			b.WriteString(m.Role)
			b.WriteString("<|message|>")
			b.WriteString(m.Content)
			if m.Role == "assistant" {
				b.WriteString("<|return|>")
			} else {
				b.WriteString("<|end|>")
			}
		}
		if addGenerationPrompt {
			b.WriteString("<|start|>assistant")
		}
	case chatGemma4:
		renderGemma4(&b, messages, addGenerationPrompt)
	default:
		if t.chatTemplate == "" {
			return "", fmt.Errorf("tokenizer.chat_template is missing: %w", ErrUnsupportedTemplate)
		}
		head := t.chatTemplate
		if len(head) > 60 {
			head = head[:60] + "..."
		}
		return "", fmt.Errorf("tokenizer.chat_template %q is not a built-in format (ChatML, harmony, Gemma 4; run it as Jinja with --jinja): %w", head, ErrUnsupportedTemplate)
	}
	return b.String(), nil
}

// renderGemma4 writes what Gemma 4's Jinja template renders for text turns
// without tools or thinking, minus its leading bos_token (llama.cpp strips
// it when the vocabulary adds BOS, which Gemma 4's always does): a first
// system (or developer) message as <|turn>system\n{trimmed}<turn|>\n; every
// other turn as <|turn>{role}\n{content}<turn|>\n, with role "model" for the
// assistant, user content trimmed, model content trimmed with its
// <|channel>…<channel|> thinking removed, and no new header for an assistant
// turn right after another; the generation prompt is <|turn>model\n plus the
// empty thought channel <|channel>thought\n<channel|> (enable_thinking off,
// the template's default).
func renderGemma4(b *strings.Builder, messages []Message, addGenerationPrompt bool) {
	if len(messages) > 0 && (messages[0].Role == "system" || messages[0].Role == "developer") {
		b.WriteString("<|turn>system\n" + strings.TrimSpace(messages[0].Content) + "<turn|>\n")
		messages = messages[1:]
	}
	for i, m := range messages {
		role, content := m.Role, strings.TrimSpace(m.Content)
		if role == "assistant" {
			role, content = "model", stripThinking(m.Content)
		}
		if !(role == "model" && i > 0 && messages[i-1].Role == "assistant") {
			b.WriteString("<|turn>" + role + "\n")
		}
		b.WriteString(content + "<turn|>\n")
	}
	if addGenerationPrompt {
		b.WriteString("<|turn>model\n<|channel>thought\n<channel|>")
	}
}

// stripThinking is the template's strip_thinking macro: of every part
// between <channel|> markers, the text before a <|channel> is kept; the
// result is trimmed.
func stripThinking(s string) string {
	var out strings.Builder
	for _, part := range strings.Split(s, "<channel|>") {
		if before, _, found := strings.Cut(part, "<|channel>"); found {
			part = before
		}
		out.WriteString(part)
	}
	return strings.TrimSpace(out.String())
}

// ChatDelta renders only what a new message adds to a conversation whose
// earlier turns are already in the model's KV cache, like llama.cpp's
// common_chat_format_single (used by llama-cli's interactive mode): the text
// of Chat(append(past, next)) after the text of Chat(past) without a
// generation prompt. When addGenerationPrompt is set and the rendered past
// ends with '\n', a '\n' is prepended, because the cache holds the assistant's
// reply up to its end-of-turn token but not the newline the template puts
// after it.
func (t *Tokenizer) ChatDelta(ctx context.Context, past []Message, next Message, addGenerationPrompt, noThink bool) (string, error) {
	prev := ""
	if len(past) > 0 {
		var err error
		if prev, err = t.ChatContext(ctx, past, false, false); err != nil {
			return "", err
		}
	}
	all := append(append(make([]Message, 0, len(past)+1), past...), next)
	full, err := t.ChatContext(ctx, all, addGenerationPrompt, noThink)
	if err != nil {
		return "", err
	}
	if !strings.HasPrefix(full, prev) {
		return "", fmt.Errorf("chat format %q: rendered history is not a prefix of the next rendering: %w", t.ChatFormat(), ErrUnsupportedTemplate)
	}
	delta := full[len(prev):]
	if addGenerationPrompt && strings.HasSuffix(prev, "\n") {
		delta = "\n" + delta
	}
	return delta, nil
}

// ChatTemplate is the model's tokenizer.chat_template ("" without one).
func (t *Tokenizer) ChatTemplate() string { return t.chatTemplate }
