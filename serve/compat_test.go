package serve

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
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

// sseData posts body to path with "stream": true and returns each data
// event but [DONE], decoded.
func (h *harness) sseData(path, body string) []map[string]any {
	h.t.Helper()
	resp, err := h.post(context.Background(), path, body)
	if err != nil {
		h.t.Fatal(err)
	}
	defer resp.Body.Close()
	b, err := io.ReadAll(resp.Body)
	if err != nil || resp.StatusCode != 200 {
		h.t.Fatalf("POST %s: %d %v %q", path, resp.StatusCode, err, b)
	}
	var out []map[string]any
	for _, line := range strings.Split(string(b), "\n") {
		data, ok := strings.CutPrefix(strings.TrimSpace(line), "data: ")
		if !ok || data == "[DONE]" {
			continue
		}
		var m map[string]any
		if err := json.Unmarshal([]byte(data), &m); err != nil {
			h.t.Fatalf("event %q: %v", data, err)
		}
		out = append(out, m)
	}
	return out
}

// TestSystemFingerprint: OpenAI chat and text completions, and every
// streamed chunk of either, name the build in system_fingerprint, as
// llama-server's do.
func TestSystemFingerprint(t *testing.T) {
	const fp = "v1.2.3-0123456789ab"
	h := start(t, func(o *Options) { o.Fingerprint = fp })
	chat := `{"messages":[{"role":"user","content":"hi"}],"max_tokens":3`
	comp := `{"prompt":"Paris is","max_tokens":3`
	for _, c := range []struct{ path, body string }{{"/v1/chat/completions", chat}, {"/v1/completions", comp}} {
		if r := h.do(c.path, c.body+"}", 200); r["system_fingerprint"] != fp {
			t.Errorf("%s: system_fingerprint %v, want %q", c.path, r["system_fingerprint"], fp)
		}
		evs := h.sseData(c.path, c.body+`,"stream":true}`)
		if len(evs) < 3 {
			t.Fatalf("%s: %d chunks", c.path, len(evs))
		}
		for i, ev := range evs {
			if ev["system_fingerprint"] != fp {
				t.Errorf("%s chunk %d: system_fingerprint %v, want %q", c.path, i, ev["system_fingerprint"], fp)
			}
		}
	}
}

// TestResponseFields: /completion's response_fields keeps only the fields
// named, a "/" path's value at the top under the path, a path that names
// nothing left out, as llama-server's; the stream's last event too; without
// it the answer is whole.
func TestResponseFields(t *testing.T) {
	h := start(t, nil)
	body := `{"prompt":"Paris is","n_predict":4,"response_fields":["content","generation_settings/n_predict","prompt","timings/nope","nope"]`
	r := h.do("/completion", body+"}", 200)
	if len(r) != 3 || r["generation_settings/n_predict"] != 4.0 || r["prompt"] != "Paris is" {
		t.Fatalf("response_fields: %v", r)
	}
	if s, ok := r["content"].(string); !ok || s == "" {
		t.Fatalf("response_fields: content %v", r["content"])
	}
	evs := h.sseData("/completion", body+`,"stream":true}`)
	last := evs[len(evs)-1]
	if len(last) != 3 || last["generation_settings/n_predict"] != 4.0 || last["content"] != "" {
		t.Fatalf("streamed, the last event: %v", last)
	}
	if len(evs) < 2 || evs[0]["stop"] != false {
		t.Fatalf("streamed, the pieces are kept whole: %v", evs)
	}
	whole := h.do("/completion", `{"prompt":"Paris is","n_predict":4,"response_fields":[]}`, 200)
	if _, ok := whole["generation_settings"].(map[string]any); !ok || whole["timings"] == nil {
		t.Fatalf("no response_fields: %v", whole)
	}
	h.do("/completion", `{"prompt":"Paris is","response_fields":"content"}`, 400)
}

// TestVerbose: an OpenAI request with verbose: true gets llama-server's
// __verbose, the answer in /completion's shape with the rendered prompt;
// without it none; streamed it is a 400 naming verbose.
func TestVerbose(t *testing.T) {
	h := start(t, nil)
	chat := `{"max_tokens":2,"messages":[{"role":"system","content":"Book"},{"role":"user","content":"What is the best book"}]`
	r := h.do("/v1/chat/completions", chat+`,"verbose":true}`, 200)
	v, ok := r["__verbose"].(map[string]any)
	msg := r["choices"].([]any)[0].(map[string]any)["message"].(map[string]any)
	if !ok || !strings.Contains(v["prompt"].(string), "Book") || !strings.Contains(v["prompt"].(string), "<|im_start|>") ||
		v["content"] != msg["content"] || v["tokens_predicted"] != 2.0 || v["stop_type"] != "limit" {
		t.Fatalf("chat __verbose %v (message %v)", r["__verbose"], msg)
	}
	r = h.do("/v1/completions", `{"prompt":"Paris is","max_tokens":2,"verbose":true}`, 200)
	if v, ok := r["__verbose"].(map[string]any); !ok || v["prompt"] != "Paris is" || v["tokens_predicted"] != 2.0 {
		t.Fatalf("completion __verbose %v", r["__verbose"])
	}
	if r := h.do("/v1/chat/completions", chat+`,"verbose":false}`, 200); r["__verbose"] != nil {
		t.Fatalf("verbose false: __verbose %v", r["__verbose"])
	}
	e := h.do("/v1/chat/completions", chat+`,"verbose":true,"stream":true}`, 400)["error"].(map[string]any)
	if e["param"] != "verbose" {
		t.Fatalf("streamed verbose: %v", e)
	}
	h.sseData("/completion", `{"prompt":"Paris is","n_predict":2,"verbose":true,"stream":true}`)
}
