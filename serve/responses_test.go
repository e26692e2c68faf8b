package serve

import (
	"fmt"
	"strings"
	"testing"
)

// TestResponses: POST /v1/responses (404 before) answers a text input with
// instructions as the chat completion of the same turns does — the same
// text and token counts — in a "response" object with one message item;
// its reasoning (a grammar-shaped <think> reply) comes as a reasoning item;
// input_tokens counts the prompt as the chat's usage does, and so does
// /v1/chat/completions/input_tokens; no input, previous_response_id and a
// non-function tool are 400s naming the field.
func TestResponses(t *testing.T) {
	h := start(t, func(o *Options) { o.ReasoningFormat = ReasoningAuto })
	chat := h.do("/v1/chat/completions", `{"messages":[{"role":"system","content":"Be brief"},{"role":"user","content":"Hi"}],"max_tokens":6}`, 200)
	want := chat["choices"].([]any)[0].(map[string]any)["message"].(map[string]any)["content"].(string)
	cu := chat["usage"].(map[string]any)
	r := h.do("/v1/responses", `{"instructions":"Be brief","input":"Hi","max_output_tokens":6}`, 200)
	if r["object"] != "response" || r["status"] != "completed" || !strings.HasPrefix(r["id"].(string), "resp_") {
		t.Errorf("response: %v", r)
	}
	out := r["output"].([]any)
	if len(out) != 1 {
		t.Fatalf("output %v, want one message", out)
	}
	msg := out[0].(map[string]any)
	text := msg["content"].([]any)[0].(map[string]any)
	if msg["type"] != "message" || msg["role"] != "assistant" || text["type"] != "output_text" || text["text"] != want {
		t.Errorf("message %v, want the chat's text %q", msg, want)
	}
	u := r["usage"].(map[string]any)
	if u["input_tokens"] != cu["prompt_tokens"] || u["output_tokens"] != cu["completion_tokens"] {
		t.Errorf("usage %v, chat's %v", u, cu)
	}
	// the same turns as an item list, in /responses without /v1
	items := `[{"role":"system","content":"Be brief"},{"type":"message","role":"user","content":[{"type":"input_text","text":"Hi"}]}]`
	r2 := h.do("/responses", `{"input":`+items+`,"max_output_tokens":6}`, 200)
	if o2 := r2["output"].([]any); len(o2) != 1 || fmt.Sprint(o2[0].(map[string]any)["content"]) != fmt.Sprint(msg["content"]) {
		t.Errorf("item list: %v, want %v", r2["output"], r["output"])
	}
	for _, path := range []string{"/v1/responses/input_tokens", "/v1/chat/completions/input_tokens"} {
		body := `{"instructions":"Be brief","input":"Hi"}`
		if strings.Contains(path, "chat") {
			body = `{"messages":[{"role":"system","content":"Be brief"},{"role":"user","content":"Hi"}]}`
		}
		if c := h.do(path, body, 200); c["input_tokens"] != cu["prompt_tokens"] || c["object"] != "response.input_tokens" {
			t.Errorf("%s: %v, want %v tokens", path, c, cu["prompt_tokens"])
		}
	}
	rs := h.do("/v1/responses", `{"input":"ok?","max_output_tokens":40,"grammar":"root ::= \"<think>\\nwhy not</think>\\n\\nyes\""}`, 200)["output"].([]any)
	if len(rs) != 2 || rs[0].(map[string]any)["type"] != "reasoning" ||
		rs[0].(map[string]any)["content"].([]any)[0].(map[string]any)["text"] != "why not" ||
		rs[1].(map[string]any)["content"].([]any)[0].(map[string]any)["text"] != "yes" {
		t.Errorf("reasoning: output %v", rs)
	}
	for _, c := range []struct{ body, field string }{
		{`{"instructions":"x"}`, "input"},
		{`{"input":"x","previous_response_id":"resp_1"}`, "previous_response_id"},
		{`{"input":"x","tools":[{"type":"web_search"}]}`, "tools"},
		{`{"input":[{"type":"mystery"}]}`, "input"},
	} {
		e := h.do("/v1/responses", c.body, 400)
		if m, _ := e["error"].(map[string]any); m == nil || !strings.Contains(m["message"].(string), c.field) {
			t.Errorf("%s: %v, want an error naming %s", c.body, e, c.field)
		}
	}
}

// TestResponsesStream: a streamed response is Responses' event sequence —
// created, in_progress, the reasoning item and its deltas, the message
// item, its part and text deltas, the .done events, completed — whose
// deltas add up to the plain answer's output.
func TestResponsesStream(t *testing.T) {
	h := start(t, func(o *Options) { o.ReasoningFormat = ReasoningAuto })
	const body = `{"input":"ok?","max_output_tokens":40,"grammar":"root ::= \"<think>\\nwhy not</think>\\n\\nyes it is\""}`
	plain := h.do("/v1/responses", body, 200)
	evs := h.sseData("/v1/responses", strings.Replace(body, "{", `{"stream":true,`, 1))
	var types []string
	var reasoning, text strings.Builder
	for _, ev := range evs {
		typ := ev["type"].(string)
		if len(types) == 0 || types[len(types)-1] != typ {
			types = append(types, typ)
		}
		switch typ {
		case "response.reasoning_text.delta":
			reasoning.WriteString(ev["delta"].(string))
		case "response.output_text.delta":
			text.WriteString(ev["delta"].(string))
		}
	}
	want := []string{"response.created", "response.in_progress", "response.output_item.added", "response.reasoning_text.delta",
		"response.output_item.added", "response.content_part.added", "response.output_text.delta",
		"response.output_item.done", "response.output_text.done", "response.content_part.done", "response.output_item.done", "response.completed"}
	if strings.Join(types, " ") != strings.Join(want, " ") {
		t.Errorf("events\n %v\nwant\n %v", types, want)
	}
	if strings.TrimSpace(reasoning.String()) != "why not" || text.String() != "yes it is" {
		t.Errorf("deltas: reasoning %q text %q", reasoning.String(), text.String())
	}
	last := evs[len(evs)-1]["response"].(map[string]any)
	if fmt.Sprint(last["output"]) == "" || len(last["output"].([]any)) != len(plain["output"].([]any)) || last["status"] != "completed" {
		t.Errorf("completed: %v, plain %v", last, plain["output"])
	}
}

// TestResponsesTools: function tools and a required tool_choice come back
// as function_call items (call_id, name, JSON arguments), and a
// function_call and its function_call_output in the input render as the
// chat's tool call and tool turn.
func TestResponsesTools(t *testing.T) {
	h := startTools(t, "", "Qwen-Qwen3-0.6B.jinja")
	const tools = `[{"type":"function","name":"special_function","parameters":{"type":"object","properties":{"arg1":{"type":"integer"}},"required":["arg1"]}}]`
	const chatTools = `[{"type":"function","function":{"name":"special_function","parameters":{"type":"object","properties":{"arg1":{"type":"integer"}},"required":["arg1"]}}}]`
	r := h.do("/v1/responses", `{"input":"Call a tool","tools":`+tools+`,"tool_choice":"required","max_output_tokens":200}`, 200)
	var call map[string]any
	for _, it := range r["output"].([]any) {
		if m := it.(map[string]any); m["type"] == "function_call" {
			call = m
		}
	}
	if call == nil || call["name"] != "special_function" || !strings.HasPrefix(call["call_id"].(string), "call_") ||
		!strings.Contains(call["arguments"].(string), "arg1") {
		t.Fatalf("output %v, want a special_function call", r["output"])
	}
	named := h.do("/v1/responses", `{"input":"Call a tool","tools":`+tools+`,"tool_choice":{"type":"function","name":"special_function"},"max_output_tokens":200}`, 200)
	if !strings.Contains(fmt.Sprint(named["output"]), "special_function") {
		t.Errorf("named tool_choice: %v", named["output"])
	}
	history := `[{"role":"user","content":"Call a tool"},` +
		`{"type":"function_call","call_id":"c1","name":"special_function","arguments":"{\"arg1\":1}"},` +
		`{"type":"function_call_output","call_id":"c1","output":"42"}]`
	p := h.do("/v1/responses/input_tokens", `{"input":`+history+`,"tools":`+tools+`}`, 200)
	c := h.do("/v1/chat/completions/input_tokens", `{"messages":[{"role":"user","content":"Call a tool"},`+
		`{"role":"assistant","content":"","tool_calls":[{"id":"c1","type":"function","function":{"name":"special_function","arguments":"{\"arg1\":1}"}}]},`+
		`{"role":"tool","tool_call_id":"c1","content":"42"}],"tools":`+chatTools+`}`, 200)
	if p["input_tokens"] != c["input_tokens"] {
		t.Errorf("history: %v tokens, the chat's %v", p["input_tokens"], c["input_tokens"])
	}
}
