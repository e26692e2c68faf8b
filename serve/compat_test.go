package serve

import (
	"encoding/json"
	"fmt"
	"strings"
	"testing"
)

// idsPrompt is a /completion prompt of n token ids.
func idsPrompt(n int) string {
	ids := make([]string, n)
	for i := range ids {
		ids[i] = fmt.Sprint(100 + i%50)
	}
	return "[" + strings.Join(ids, ",") + "]"
}

// TestContextOverflow: a prompt that leaves no room to generate (n_tokens >=
// n_ctx, as llama-server checks it) is a 400 exceed_context_size_error in
// llama-server's words, with n_prompt_tokens and n_ctx; one token fewer is
// answered.
func TestContextOverflow(t *testing.T) {
	h := start(t, nil)
	check := func(path, body string, wantPrompt int) {
		t.Helper()
		r := h.do(path, body, 400)
		e, _ := r["error"].(map[string]any)
		want := fmt.Sprintf("request (%d tokens) exceeds the available context size (256 tokens), try increasing it", wantPrompt)
		if e["type"] != "exceed_context_size_error" || e["message"] != want || e["code"] != 400.0 ||
			e["n_prompt_tokens"] != float64(wantPrompt) || e["n_ctx"] != 256.0 {
			t.Errorf("%s %.40s: error %v, want type exceed_context_size_error, message %q, n_prompt_tokens %d, n_ctx 256",
				path, body, e, want, wantPrompt)
		}
	}
	check("/completion", `{"prompt":`+idsPrompt(256)+`,"n_predict":4}`, 256)
	check("/completion", `{"prompt":`+idsPrompt(300)+`,"n_predict":4,"stream":true}`, 300)
	h.do("/completion", `{"prompt":`+idsPrompt(255)+`,"n_predict":4}`, 200)

	text := strings.Repeat("word ", 300)
	tok := h.do("/tokenize", `{"content":`+js(text)+`}`, 200)
	n := len(tok["tokens"].([]any))
	if n < 256 {
		t.Fatalf("the text is %d tokens, the test needs more than the context", n)
	}
	check("/v1/completions", `{"prompt":`+js(text)+`}`, n)
	var msgs []map[string]string
	msgs = append(msgs, map[string]string{"role": "user", "content": text})
	b, _ := json.Marshal(map[string]any{"messages": msgs, "stream": true})
	r := h.do("/v1/chat/completions", string(b), 400)
	if e, _ := r["error"].(map[string]any); e["type"] != "exceed_context_size_error" || e["n_ctx"] != 256.0 || e["n_prompt_tokens"].(float64) < float64(n) {
		t.Errorf("chat: error %v, want exceed_context_size_error with n_prompt_tokens >= %d", e, n)
	}
}
