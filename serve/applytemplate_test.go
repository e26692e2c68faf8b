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
