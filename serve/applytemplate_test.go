package serve

import (
	"strings"
	"testing"

	"github.com/pipe-engine/pipe/tokenizer"
)

// TestApplyTemplate: POST /apply-template answers {"prompt"} with what the
// model's chat template renders for the messages (the generation prompt
// unless add_generation_prompt is false), as llama-server's; with a
// llama.cpp built-in chosen, its text (test_chat_completion.py's
// test_apply_chat_template, command-r); bad messages are a 400.
func TestApplyTemplate(t *testing.T) {
	h := start(t, nil)
	tok := h.m.Tokenizer()
	msgs := []tokenizer.Message{{Role: "system", Content: "You are a test."}, {Role: "user", Content: "Hi there"}}
	const body = `{"messages":[{"role":"system","content":"You are a test."},{"role":"user","content":"Hi there"}]`
	for _, add := range []bool{true, false} {
		want, err := tok.Chat(msgs, add, false)
		if err != nil {
			t.Fatal(err)
		}
		b := body + `}`
		if !add {
			b = body + `,"add_generation_prompt":false}`
		}
		if r := h.do("/apply-template", b, 200); r["prompt"] != want {
			t.Errorf("add_generation_prompt %v: %v, want %q", add, r, want)
		}
	}
	if err := tok.UseBuiltin("command-r"); err != nil {
		t.Fatal(err)
	}
	want := "<|START_OF_TURN_TOKEN|><|SYSTEM_TOKEN|>You are a test.<|END_OF_TURN_TOKEN|><|START_OF_TURN_TOKEN|><|USER_TOKEN|>Hi there<|END_OF_TURN_TOKEN|><|START_OF_TURN_TOKEN|><|CHATBOT_TOKEN|>"
	if r := h.do("/apply-template", body+`}`, 200); r["prompt"] != want {
		t.Errorf("command-r: %v", r)
	}
	for _, bad := range []string{`{"messages":[]}`, `{"messages":[{"role":"wizard","content":"x"}]}`, `{"messages":3}`} {
		r := h.do("/apply-template", bad, 400)
		if e, _ := r["error"].(map[string]any); e == nil || !strings.Contains(e["message"].(string), "messages") {
			t.Errorf("%s: %v", bad, r)
		}
	}
}

// TestChatTemplateKwargs: chat_template_kwargs.enable_thinking false
// renders Qwen3's empty think block (as --no-think does) in /apply-template
// and in a chat's prompt (more prompt tokens); true renders none even on a
// --no-think server; a non-bool is a 400 naming the field (other keys are
// a Jinja template's variables: TestChatTemplateVars).
func TestChatTemplateKwargs(t *testing.T) {
	h := start(t, nil)
	const msgs = `"messages":[{"role":"user","content":"Hi"}]`
	on := h.do("/apply-template", `{`+msgs+`}`, 200)["prompt"].(string)
	off := h.do("/apply-template", `{`+msgs+`,"chat_template_kwargs":{"enable_thinking":false}}`, 200)["prompt"].(string)
	if off != on+tokenizer.ThinkOff {
		t.Errorf("enable_thinking false: %q, want %q", off, on+tokenizer.ThinkOff)
	}
	usage := func(h *harness, kw string) float64 {
		r := h.do("/v1/chat/completions", `{`+msgs+`,"max_tokens":1`+kw+`}`, 200)
		return r["usage"].(map[string]any)["prompt_tokens"].(float64)
	}
	if a, b := usage(h, ""), usage(h, `,"chat_template_kwargs":{"enable_thinking":false}`); b <= a {
		t.Errorf("chat prompt tokens: %v with thinking, %v without", a, b)
	}
	nt := start(t, func(o *Options) { o.NoThink = true })
	if p := nt.do("/apply-template", `{`+msgs+`,"chat_template_kwargs":{"enable_thinking":true}}`, 200)["prompt"]; p != on {
		t.Errorf("--no-think server, enable_thinking true: %q", p)
	}
	for _, bad := range []string{`{"enable_thinking":"no"}`} {
		for _, path := range []string{"/apply-template", "/v1/chat/completions"} {
			r := h.do(path, `{`+msgs+`,"chat_template_kwargs":`+bad+`}`, 400)
			if e, _ := r["error"].(map[string]any); e == nil || !strings.Contains(e["message"].(string), "chat_template_kwargs") {
				t.Errorf("%s %s: %v", path, bad, r)
			}
		}
	}
}
