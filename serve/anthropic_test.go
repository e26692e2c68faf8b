package serve

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"strings"
	"testing"
)

const anthTools = `[
 {"name":"special_function","description":"I'm special","input_schema":{"type":"object","properties":{"arg1":{"type":"integer"}},"required":["arg1"]}},
 {"name":"set_unit","input_schema":{"type":"object","properties":{"unit":{"type":"string","enum":["celsius","fahrenheit"]},"loud":{"type":"boolean"}},"required":["unit","loud"]}}]`

// TestMessagesText: a Messages request answers a message whose text block
// is what the same chat completion answers, with Anthropic's usage and
// stop_reason (max_tokens at the limit).
func TestMessagesText(t *testing.T) {
	h := start(t, nil)
	r := h.do("/v1/messages", `{"model":"x","max_tokens":6,"system":"Be brief.","messages":[{"role":"user","content":[{"type":"text","text":"Hello"}]}]}`, 200)
	c := h.do("/v1/chat/completions", `{"max_tokens":6,"messages":[{"role":"system","content":"Be brief."},{"role":"user","content":"Hello"}]}`, 200)
	want := c["choices"].([]any)[0].(map[string]any)["message"].(map[string]any)["content"]
	content := r["content"].([]any)
	if r["type"] != "message" || r["role"] != "assistant" || len(content) != 1 || content[0].(map[string]any)["text"] != want {
		t.Fatalf("message %v, want one text block %q", r, want)
	}
	u := r["usage"].(map[string]any)
	cu := c["usage"].(map[string]any)
	if u["input_tokens"] != cu["prompt_tokens"] || u["output_tokens"] != float64(6) || r["stop_reason"] != "max_tokens" {
		t.Errorf("usage %v stop_reason %v, want %v prompt tokens, 6 out, max_tokens", u, r["stop_reason"], cu["prompt_tokens"])
	}
	n := h.do("/v1/messages/count_tokens", `{"model":"x","system":"Be brief.","messages":[{"role":"user","content":"Hello"}]}`, 200)
	if n["input_tokens"] != cu["prompt_tokens"] {
		t.Errorf("count_tokens %v, want %v", n, cu["prompt_tokens"])
	}
}

// TestMessagesToolUse: tool_choice any returns a tool_use block with the
// parsed input and stop_reason tool_use; a history with tool_use and
// tool_result blocks renders; streamed, the events are Anthropic's.
func TestMessagesToolUse(t *testing.T) {
	h := startTools(t, "", "Qwen-Qwen3-0.6B.jinja")
	for i := range 5 {
		body := fmt.Sprintf(`{"model":"x","max_tokens":200,"temperature":1,"seed":%d,"tools":%s,"tool_choice":{"type":"any","disable_parallel_tool_use":true},"messages":[{"role":"user","content":"Call"}]}`, i, anthTools)
		r := h.do("/v1/messages", body, 200)
		if r["stop_reason"] != "tool_use" {
			t.Fatalf("seed %d: stop_reason %v: %v", i, r["stop_reason"], r)
		}
		var uses []any
		for _, b := range r["content"].([]any) {
			if bm := b.(map[string]any); bm["type"] == "tool_use" {
				args, _ := json.Marshal(bm["input"])
				uses = append(uses, map[string]any{"id": strings.TrimPrefix(bm["id"].(string), "toolu_"), "type": "function",
					"function": map[string]any{"name": bm["name"], "arguments": string(args)}})
			}
		}
		checkCall(t, fmt.Sprintf("seed %d", i), map[string]any{"tool_calls": uses})
	}
	hist := `[{"role":"user","content":"Unit?"},
	 {"role":"assistant","content":[{"type":"text","text":"Let me set it."},{"type":"tool_use","id":"toolu_1","name":"set_unit","input":{"unit":"celsius","loud":true}}]},
	 {"role":"user","content":[{"type":"tool_result","tool_use_id":"toolu_1","content":"done"},{"type":"text","text":"Thanks"}]}]`
	h.do("/v1/messages", `{"model":"x","max_tokens":4,"tools":`+anthTools+`,"messages":`+hist+`}`, 200)

	body := `{"model":"x","max_tokens":200,"temperature":1,"seed":1,"stream":true,"tools":` + anthTools + `,"tool_choice":{"type":"tool","name":"set_unit","disable_parallel_tool_use":true},"messages":[{"role":"user","content":"Call"}]}`
	var names []string
	var partial string
	for _, ev := range h.anthEvents(body) {
		names = append(names, ev["type"].(string))
		if d, ok := ev["delta"].(map[string]any); ok && d["type"] == "input_json_delta" {
			partial += d["partial_json"].(string)
		}
		if ev["type"] == "message_delta" && ev["delta"].(map[string]any)["stop_reason"] != "tool_use" {
			t.Errorf("message_delta %v, want stop_reason tool_use", ev)
		}
	}
	want := "message_start content_block_start content_block_delta content_block_stop message_delta message_stop"
	if strings.Join(names, " ") != want {
		t.Errorf("events %v, want %s", names, want)
	}
	var in map[string]any
	if err := json.Unmarshal([]byte(partial), &in); err != nil || (in["unit"] != "celsius" && in["unit"] != "fahrenheit") {
		t.Errorf("input_json_delta %q: %v", partial, err)
	}
}

// anthEvents posts a streamed Messages body and returns its events' data,
// checking each event line names its data's type.
func (h *harness) anthEvents(body string) []map[string]any {
	h.t.Helper()
	resp, err := h.post(context.Background(), "/v1/messages", body)
	if err != nil {
		h.t.Fatal(err)
	}
	defer resp.Body.Close()
	b, _ := io.ReadAll(resp.Body)
	if resp.StatusCode != 200 {
		h.t.Fatalf("%d %q", resp.StatusCode, b)
	}
	var out []map[string]any
	for _, ev := range strings.Split(strings.TrimSpace(string(b)), "\n\n") {
		name, data, ok := strings.Cut(ev, "\ndata: ")
		var m map[string]any
		if !ok || json.Unmarshal([]byte(data), &m) != nil || strings.TrimPrefix(name, "event: ") != m["type"] {
			h.t.Fatalf("event %q", ev)
		}
		out = append(out, m)
	}
	return out
}

// TestMessagesAPIKey: with --api-key the Messages routes take the key as
// x-api-key (Anthropic's SDKs send it so) as well as a bearer token.
func TestMessagesAPIKey(t *testing.T) {
	h := start(t, func(o *Options) { o.APIKey = "sekret" })
	body := `{"model":"x","max_tokens":1,"messages":[{"role":"user","content":"Hi"}]}`
	for _, c := range []struct {
		hdr  []string
		code int
	}{
		{nil, http.StatusUnauthorized},
		{[]string{"X-Api-Key", "wrong"}, http.StatusUnauthorized},
		{[]string{"X-Api-Key", "sekret"}, http.StatusOK},
		{[]string{"Authorization", "Bearer sekret"}, http.StatusOK},
	} {
		resp, err := h.post(context.Background(), "/v1/messages", body, c.hdr...)
		if err != nil {
			t.Fatal(err)
		}
		io.Copy(io.Discard, resp.Body)
		resp.Body.Close()
		if resp.StatusCode != c.code {
			t.Errorf("%v: %d, want %d", c.hdr, resp.StatusCode, c.code)
		}
	}
}
