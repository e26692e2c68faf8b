package tokenizer

import (
	"encoding/json"
	"errors"
	"os"
	"strings"
	"testing"
)

// TestLlamaTemplatesMatchLlamaCpp: every case of llama.cpp's
// test-chat-template.cpp renders, through DetectLlamaTemplate and
// RenderLlamaTemplate, the expected_output llama.cpp asserts for
// llama_chat_apply_template (its conversation plus the case's extra turns,
// with the generation prompt).
func TestLlamaTemplatesMatchLlamaCpp(t *testing.T) {
	b, err := os.ReadFile(templates + "test-chat-template-cases.json")
	if err != nil {
		t.Fatal(err)
	}
	var cases []llamaCase
	if err := json.Unmarshal(b, &cases); err != nil {
		t.Fatal(err)
	}
	seen := map[string]bool{}
	for _, c := range cases {
		name := DetectLlamaTemplate(c.Template)
		if name == "" {
			t.Errorf("%s: not detected", c.Name)
			continue
		}
		seen[name] = true
		msgs := append(append([]Message{}, conversation...), c.Extra...)
		got, err := RenderLlamaTemplate(name, msgs, true)
		if err != nil || got != c.Expected {
			t.Errorf("%s (%s): %v\n got %q\nwant %q", c.Name, name, err, got, c.Expected)
		}
	}
	if len(seen) < 30 {
		t.Errorf("the cases reach %d built-in templates, want at least 30", len(seen))
	}
	t.Logf("%d cases, %d built-in templates", len(cases), len(seen))
}

// TestLlamaTemplateNames: the names are llama.cpp's
// (llama_chat_builtin_templates), each detected as itself; an unknown name
// is ErrUnsupportedTemplate.
func TestLlamaTemplateNames(t *testing.T) {
	names := LlamaTemplateNames()
	if len(names) != 54 {
		t.Errorf("%d names, llama.cpp has 54", len(names))
	}
	for _, n := range names {
		if DetectLlamaTemplate(n) != n {
			t.Errorf("%s detected as %q", n, DetectLlamaTemplate(n))
		}
	}
	if _, err := RenderLlamaTemplate("llama5", conversation, true); !errors.Is(err, ErrUnsupportedTemplate) {
		t.Errorf("llama5: %v", err)
	}
}

// TestUseBuiltinLlamaName: UseBuiltin with a llama.cpp name makes Chat
// render that template, and a later built-in or Jinja choice replaces it.
func TestUseBuiltinLlamaName(t *testing.T) {
	tok := tinyWithTemplate(t, "<|im_start|>")
	msgs := []Message{{Role: "system", Content: "Be brief."}, {Role: "user", Content: " Hi "}}
	if err := tok.UseBuiltin("llama3"); err != nil {
		t.Fatal(err)
	}
	got, err := tok.Chat(msgs, true, false)
	want := "<|start_header_id|>system<|end_header_id|>\n\nBe brief.<|eot_id|><|start_header_id|>user<|end_header_id|>\n\nHi<|eot_id|><|start_header_id|>assistant<|end_header_id|>\n\n"
	if err != nil || got != want || tok.ChatFormat() != "llama3" {
		t.Fatalf("llama3: %q, %v, format %q", got, err, tok.ChatFormat())
	}
	if err := tok.UseBuiltin("chatml"); err != nil {
		t.Fatal(err)
	}
	if got, _ := tok.Chat(msgs, true, false); got != "<|im_start|>system\nBe brief.<|im_end|>\n<|im_start|>user\n Hi <|im_end|>\n<|im_start|>assistant\n" {
		t.Errorf("chatml after llama3: %q", got)
	}
	if err := tok.UseBuiltin("llama5"); !errors.Is(err, ErrUnsupportedTemplate) || !strings.Contains(err.Error(), "mistral-v7") {
		t.Errorf("llama5: %v", err)
	}
}
