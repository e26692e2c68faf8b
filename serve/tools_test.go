package serve

import (
	"encoding/json"
	"fmt"
	"os"
	"strings"
	"testing"

	"github.com/pipe-engine/pipe/decode"
	"github.com/pipe-engine/pipe/serve/toolcall"
)

// startTools serves the tiny model (path; "" for tinyQ8) rendering chats with
// llama.cpp's template file, in a context big enough for a tools prompt.
func startTools(t *testing.T, path, template string) *harness {
	t.Helper()
	src, err := os.ReadFile("../testdata/chat-templates/llamacpp/" + template)
	if err != nil {
		t.Fatal(err)
	}
	return startModel(t, func(o *decode.Options) {
		if path != "" {
			o.Engine.Path = path
		}
		o.Ctx = 2048
	}, func(o *Options) {
		o.Ctx = 2048
		if err := o.Model.Tokenizer().UseJinja(string(src), template); err != nil {
			t.Fatal(err)
		}
	})
}

// Tools whose arguments a random model cannot make endless: an integer
// (at most 16 digits), an enum, a boolean.
const boundedTools = `[
 {"type":"function","function":{"name":"special_function","description":"I'm special","parameters":{"type":"object","properties":{"arg1":{"type":"integer","description":"The arg."}},"required":["arg1"]}}},
 {"type":"function","function":{"name":"set_unit","parameters":{"type":"object","properties":{"unit":{"type":"string","enum":["celsius","fahrenheit"]},"loud":{"type":"boolean"}},"required":["unit","loud"]}}}]`

// checkCall checks one message's tool call against boundedTools.
func checkCall(t *testing.T, what string, msg map[string]any) {
	t.Helper()
	calls, _ := msg["tool_calls"].([]any)
	if len(calls) != 1 {
		t.Fatalf("%s: tool_calls %v, want one call (message %v)", what, msg["tool_calls"], msg)
	}
	c := calls[0].(map[string]any)
	fn := c["function"].(map[string]any)
	if id, _ := c["id"].(string); len(id) != 32 || c["type"] != "function" {
		t.Errorf("%s: id %q type %v, want 32 characters and function", what, c["id"], c["type"])
	}
	var args map[string]any
	if err := json.Unmarshal([]byte(fn["arguments"].(string)), &args); err != nil {
		t.Fatalf("%s: arguments %q: %v", what, fn["arguments"], err)
	}
	switch fn["name"] {
	case "special_function":
		if n, ok := args["arg1"].(float64); !ok || n != float64(int64(n)) || len(args) != 1 {
			t.Errorf("%s: special_function arguments %v", what, args)
		}
	case "set_unit":
		if u := args["unit"]; (u != "celsius" && u != "fahrenheit") || len(args) != 2 {
			t.Errorf("%s: set_unit arguments %v", what, args)
		}
		if _, ok := args["loud"].(bool); !ok {
			t.Errorf("%s: set_unit loud %v", what, args["loud"])
		}
	default:
		t.Errorf("%s: call of %v, not a tool", what, fn["name"])
	}
}

// TestToolChoiceRequired100: 100 requests with tool_choice "required",
// sampled at temperature 1 with 100 seeds on the tiny random model, all
// return finish_reason tool_calls and one valid call of a given tool.
func TestToolChoiceRequired100(t *testing.T) {
	h := startTools(t, "", "Qwen-Qwen3-0.6B.jinja")
	for i := range 100 {
		body := fmt.Sprintf(`{"messages":[{"role":"user","content":"Call a tool"}],"tools":%s,"tool_choice":"required","temperature":1,"seed":%d,"max_tokens":200}`, boundedTools, i)
		r := h.do("/v1/chat/completions", body, 200)
		ch := r["choices"].([]any)[0].(map[string]any)
		if ch["finish_reason"] != "tool_calls" {
			t.Fatalf("seed %d: finish_reason %v, want tool_calls: %v", i, ch["finish_reason"], ch)
		}
		msg := ch["message"].(map[string]any)
		if msg["content"] != "" {
			t.Errorf("seed %d: content %v, want \"\" beside the call (llama-server's)", i, msg["content"])
		}
		checkCall(t, fmt.Sprintf("seed %d", i), msg)
	}
}

// requiredRuns is how many seeds a family's required run takes: 100 in the
// plain pass (issue 33: 100 of 100 on every family's tiny model); with
// -short (the race pass, the only one that runs this package short) 2.
// Sampling is seeded and the engine bit-reproducible, so seeds 0 and 1
// replay the plain pass's first two answers bit for bit; what -race adds,
// the server's goroutines and the engine's under a grammar-constrained
// request, is the same code for every seed. Under -race one family's and
// one template's runs took 9.9 s of CPU with ten seeds, 3.2 s with two
// (TestEveryFamilyJSONSchemaAndRequiredTool and
// TestToolChoiceRequiredFamilies run 26 models and templates).
//
// A race-detector build without -short runs 2 as well (raceEnabled): at
// the figures above per seed, 100 seeds of 26 models made
// `go test -count=3 -race ./serve/` (issue 36's check on a loaded machine)
// run for hours, all of it on what the first two seeds already exercised
// for the detector; the plain pass keeps the 100.
func requiredRuns() int {
	if testing.Short() || raceEnabled {
		return 2
	}
	return 100
}

// TestToolChoiceRequiredFamilies: each tool-call family's template on a
// tiny model (its own family's where pipe has one), tool_choice "required"
// at temperature 1: every answer is one valid call parsed from that
// family's syntax.
func TestToolChoiceRequiredFamilies(t *testing.T) {
	const models = "../testdata/golden/models/"
	for _, c := range []struct {
		model, template string
		f               toolcall.Format
	}{
		{models + "tiny-qwen35moe-Q8_0.gguf", "Qwen3.5-4B.jinja", toolcall.QwenXML},
		{"", "Qwen3-Coder.jinja", toolcall.QwenXML},
		{models + "tiny-glm4moe-Q4_K_M.gguf", "GLM-4.6.jinja", toolcall.GLM},
		{models + "tiny-minimax-m2-Q4_K_M.gguf", "MiniMax-M2.jinja", toolcall.MiniMaxM2},
		{models + "tiny-deepseek2-Q4_K_M.gguf", "deepseek-ai-DeepSeek-V3.1.jinja", toolcall.DeepSeek},
		{models + "tiny-gemma4-Q8_0.gguf", "google-gemma-4-31B-it.jinja", toolcall.Gemma4},
		{models + "tiny-gptoss-Q8_0.gguf", "openai-gpt-oss-120b.jinja", toolcall.Harmony},
		{"", "mistralai-Mistral-Nemo-Instruct-2407.jinja", toolcall.Mistral},
		{"", "mistralai-Ministral-3-14B-Reasoning-2512.jinja", toolcall.MistralArgs},
		{"", "meta-llama-Llama-3.1-8B-Instruct.jinja", toolcall.Llama3},
		{"", "google-gemma-2-2b-it.jinja", toolcall.Generic}, // the generic JSON
	} {
		t.Run(c.template, func(t *testing.T) {
			h := startTools(t, c.model, c.template)
			if f := toolcall.Detect(h.m.Tokenizer().ToolTemplate()); f != c.f {
				t.Fatalf("detected %v, want %v", f, c.f)
			}
			for i := range requiredRuns() {
				body := fmt.Sprintf(`{"messages":[{"role":"user","content":"Call a tool"}],"tools":%s,"tool_choice":"required","temperature":1,"seed":%d,"max_tokens":200}`, boundedTools, i)
				r := h.do("/v1/chat/completions", body, 200)
				ch := r["choices"].([]any)[0].(map[string]any)
				if ch["finish_reason"] != "tool_calls" {
					t.Fatalf("seed %d: finish_reason %v, want tool_calls: %v", i, ch["finish_reason"], ch)
				}
				checkCall(t, fmt.Sprintf("seed %d", i), ch["message"].(map[string]any))
			}
		})
	}
}

// TestToolCallStream: a streamed required call is the role delta, one
// tool_calls delta (index 0, id, type, name, the whole arguments) and a
// last chunk with finish_reason tool_calls, as llama-server streams one.
func TestToolCallStream(t *testing.T) {
	h := startTools(t, "", "Qwen-Qwen3-0.6B.jinja")
	body := fmt.Sprintf(`{"messages":[{"role":"user","content":"Call a tool"}],"tools":%s,"tool_choice":"required","temperature":1,"seed":3,"max_tokens":200,"stream":true}`, boundedTools)
	evs := h.sseData("/v1/chat/completions", body)
	var calls []any
	var finish any
	for i, ev := range evs {
		ch := ev["choices"].([]any)[0].(map[string]any)
		d, _ := ch["delta"].(map[string]any)
		if i == 0 && (d["role"] != "assistant" || d["content"] != nil) {
			t.Errorf("first delta %v, want role assistant, content null", d)
		}
		if c, ok := d["content"].(string); ok && c != "" {
			t.Errorf("content delta %q beside a required call", c)
		}
		if tc, ok := d["tool_calls"].([]any); ok {
			calls = append(calls, tc...)
		}
		if f := ch["finish_reason"]; f != nil {
			finish = f
		}
	}
	if finish != "tool_calls" || len(calls) != 1 {
		t.Fatalf("finish %v, %d tool_calls deltas: %v", finish, len(calls), evs)
	}
	if idx := calls[0].(map[string]any)["index"]; idx != float64(0) {
		t.Errorf("index %v, want 0", idx)
	}
	checkCall(t, "stream", map[string]any{"tool_calls": calls})

	// the same seed unstreamed gives the same call
	body = strings.Replace(body, `"stream":true`, `"stream":false`, 1)
	msg := h.do("/v1/chat/completions", body, 200)["choices"].([]any)[0].(map[string]any)["message"].(map[string]any)
	got := msg["tool_calls"].([]any)[0].(map[string]any)["function"]
	if want := calls[0].(map[string]any)["function"]; fmt.Sprint(got) != fmt.Sprint(want) {
		t.Errorf("unstreamed call %v, streamed %v", got, want)
	}
}

// TestToolChoiceNamedAndParallel: a named function is the only one called;
// parallel_tool_calls lets the answer hold several valid calls.
func TestToolChoiceNamedAndParallel(t *testing.T) {
	h := startTools(t, "", "Qwen-Qwen3-0.6B.jinja")
	for i := range 10 {
		body := fmt.Sprintf(`{"messages":[{"role":"user","content":"Call"}],"tools":%s,"tool_choice":{"type":"function","function":{"name":"set_unit"}},"temperature":1,"seed":%d,"max_tokens":200}`, boundedTools, i)
		msg := h.do("/v1/chat/completions", body, 200)["choices"].([]any)[0].(map[string]any)["message"].(map[string]any)
		checkCall(t, fmt.Sprintf("named, seed %d", i), msg)
		if n := msg["tool_calls"].([]any)[0].(map[string]any)["function"].(map[string]any)["name"]; n != "set_unit" {
			t.Errorf("seed %d: called %v, want set_unit", i, n)
		}
	}
	many := 0
	for i := range 10 {
		body := fmt.Sprintf(`{"messages":[{"role":"user","content":"Call"}],"tools":%s,"tool_choice":"required","parallel_tool_calls":true,"temperature":1,"seed":%d,"max_tokens":400}`, boundedTools, i)
		ch := h.do("/v1/chat/completions", body, 200)["choices"].([]any)[0].(map[string]any)
		if ch["finish_reason"] != "tool_calls" {
			continue // a random model may run out of tokens between calls
		}
		calls := ch["message"].(map[string]any)["tool_calls"].([]any)
		for k, c := range calls {
			checkCall(t, fmt.Sprintf("parallel seed %d call %d", i, k), map[string]any{"tool_calls": []any{c}})
		}
		if len(calls) > 1 {
			many++
		}
	}
	if many == 0 {
		t.Error("parallel_tool_calls: no answer of 10 held more than one call")
	}
}

// TestToolChoiceNoneAndHistory: tool_choice none answers content only; a
// history with an assistant call and the tool's answer renders and runs.
func TestToolChoiceNoneAndHistory(t *testing.T) {
	h := startTools(t, "", "Qwen-Qwen3-0.6B.jinja")
	body := fmt.Sprintf(`{"messages":[{"role":"user","content":"Hi"}],"tools":%s,"tool_choice":"none","max_tokens":8}`, boundedTools)
	ch := h.do("/v1/chat/completions", body, 200)["choices"].([]any)[0].(map[string]any)
	msg := ch["message"].(map[string]any)
	if _, ok := msg["content"].(string); !ok || msg["tool_calls"] != nil || ch["finish_reason"] == "tool_calls" {
		t.Errorf("tool_choice none: %v", ch)
	}
	hist := `[{"role":"user","content":"Unit?"},
	 {"role":"assistant","content":null,"tool_calls":[{"id":"abc","type":"function","function":{"name":"set_unit","arguments":"{\"unit\":\"celsius\",\"loud\":true}"}}]},
	 {"role":"tool","tool_call_id":"abc","content":"done"}]`
	body = fmt.Sprintf(`{"messages":%s,"tools":%s,"max_tokens":4}`, hist, boundedTools)
	h.do("/v1/chat/completions", body, 200)
	body = fmt.Sprintf(`{"messages":%s,"max_tokens":4}`, hist) // tool turns without tools
	h.do("/v1/chat/completions", body, 200)
}

// TestToolErrors: malformed tool fields are a 400 naming the field; tools
// under the built-in renderer are refused as llama-server refuses them
// without --jinja.
func TestToolErrors(t *testing.T) {
	h := start(t, nil)
	for _, c := range []struct{ body, param string }{
		{`{"messages":[{"role":"user","content":"x"}],"tools":` + boundedTools + `,"tool_choice":"sometimes"}`, "tool_choice"},
		{`{"messages":[{"role":"user","content":"x"}],"tool_choice":"required"}`, "tool_choice"},
		{`{"messages":[{"role":"user","content":"x"}],"tools":` + boundedTools + `,"tool_choice":{"type":"function","function":{"name":"nope"}}}`, "tool_choice"},
		{`{"messages":[{"role":"user","content":"x"}],"tools":[{"type":"retrieval"}]}`, "tools"},
		{`{"messages":[{"role":"user","content":"x"}],"tools":"all"}`, "tools"},
		{`{"messages":[{"role":"user","content":"x"}],"functions":[{"name":"f"}]}`, "functions"},
		{`{"messages":[{"role":"user","content":"x"}],"tools":` + boundedTools + `,"grammar":"root ::= \"a\""}`, "tools"},
	} {
		r := h.do("/v1/chat/completions", c.body, 400)
		if p := r["error"].(map[string]any)["param"]; p != c.param {
			t.Errorf("%s: param %v, want %s (%v)", c.body, p, c.param, r)
		}
	}
	r := h.do("/v1/chat/completions", `{"messages":[{"role":"user","content":"x"}],"tools":`+boundedTools+`}`, 400)
	if msg := r["error"].(map[string]any)["message"].(string); !strings.Contains(msg, "--jinja") {
		t.Errorf("tools with the built-in ChatML: %q, want it to name --jinja", msg)
	}
}

// TestApplyTemplateTools: /apply-template renders tools and tool turns as
// a chat does.
func TestApplyTemplateTools(t *testing.T) {
	h := startTools(t, "", "Qwen-Qwen3-0.6B.jinja")
	body := fmt.Sprintf(`{"messages":[{"role":"user","content":"Unit?"},
	 {"role":"assistant","tool_calls":[{"id":"abc","type":"function","function":{"name":"set_unit","arguments":"{\"unit\":\"celsius\",\"loud\":true}"}}]},
	 {"role":"tool","tool_call_id":"abc","content":"done"}],"tools":%s}`, boundedTools)
	p := h.do("/apply-template", body, 200)["prompt"].(string)
	for _, want := range []string{
		`{"type": "function", "function": {"name": "set_unit", "parameters": {"type": "object", "properties": {"unit": {"type": "string", "enum": ["celsius", "fahrenheit"]}`,
		"<tool_call>\n{\"name\": \"set_unit\", \"arguments\": {\"unit\": \"celsius\", \"loud\": true}}\n</tool_call>",
		"<tool_response>\ndone\n</tool_response>",
	} {
		if !strings.Contains(p, want) {
			t.Errorf("prompt lacks %q:\n%s", want, p)
		}
	}
}

// TestToolChoiceAutoIsLazy: under "auto" the family's grammar waits for its
// trigger word (Hermes: <tool_call>); a family without one (Llama 3) is
// parsed but not constrained; "required" constrains from the first token.
func TestToolChoiceAutoIsLazy(t *testing.T) {
	for _, c := range []struct {
		template, choice string
		gram, lazy       bool
	}{
		{"Qwen-Qwen3-0.6B.jinja", `"auto"`, true, true},
		{"Qwen-Qwen3-0.6B.jinja", `"required"`, true, false},
		{"Qwen-Qwen3-0.6B.jinja", `"none"`, false, false},
		{"meta-llama-Llama-3.1-8B-Instruct.jinja", `"auto"`, false, false},
	} {
		h := startTools(t, "", c.template)
		j, err := parseChat([]byte(`{"messages":[{"role":"user","content":"x"}],"tools":`+boundedTools+`,"tool_choice":`+c.choice+`}`), greedy)
		if err != nil {
			t.Fatal(err)
		}
		if err := resolveTools(h.m.Tokenizer(), &j); err != nil {
			t.Fatal(err)
		}
		if (j.gram != nil) != c.gram || j.lazy != c.lazy {
			t.Errorf("%s %s: grammar %v lazy %v, want %v %v", c.template, c.choice, j.gram != nil, j.lazy, c.gram, c.lazy)
		}
		if c.lazy && (len(j.triggers) != 1 || j.triggers[0].Value != "<tool_call>") {
			t.Errorf("%s: triggers %+v, want <tool_call>", c.template, j.triggers)
		}
		// the answers run: content, or calls that parse
		for i := range 3 {
			body := fmt.Sprintf(`{"messages":[{"role":"user","content":"x"}],"tools":%s,"tool_choice":%s,"temperature":1,"seed":%d,"max_tokens":16}`, boundedTools, c.choice, i)
			h.do("/v1/chat/completions", body, 200)
		}
	}
}

// TestSafePrefix: a stream holds back text from a trigger word on, and a
// tail that could begin one.
func TestSafePrefix(t *testing.T) {
	tj := &toolJob{choice: "auto", format: toolcall.Hermes}
	for text, want := range map[string]int{
		"Hello":                  5,
		"Hello <tool":            6,
		"Hello <":                6,
		"Hello <tool_call>{":     6,
		"a<b":                    3,
		"x <tool_call> <tool_ca": 2,
	} {
		if got := tj.safePrefix(text); got != want {
			t.Errorf("safePrefix(%q) = %d, want %d", text, got, want)
		}
	}
	if n := (&toolJob{choice: "auto", format: toolcall.Llama3}).safePrefix("Hello"); n != 0 {
		t.Errorf("Llama 3 (no trigger word): %d sent, want all held", n)
	}
	if n := (&toolJob{choice: "none", format: toolcall.Hermes}).safePrefix("Hi <tool_call>"); n != 14 {
		t.Errorf("tool_choice none: %d sent, want all 14", n)
	}
}
