package toolcall

import (
	"encoding/json"
	"errors"
	"os"
	"reflect"
	"testing"
)

var (
	specialFunction = Tool{Name: "special_function", Parameters: json.RawMessage(`{"type":"object","properties":{"arg1":{"type":"integer"}},"required":["arg1"]}`)}
	getTime         = Tool{Name: "get_time", Parameters: json.RawMessage(`{"type":"object","properties":{"city":{"type":"string"}},"required":["city"]}`)}
	python          = Tool{Name: "python", Parameters: json.RawMessage(`{"type":"object","properties":{"code":{"type":"string"}},"required":["code"]}`)}
)

// sameJSON reports whether two JSON texts hold the same value.
func sameJSON(t *testing.T, a, b string) bool {
	t.Helper()
	var x, y any
	if err := json.Unmarshal([]byte(a), &x); err != nil {
		t.Fatalf("%q: %v", a, err)
	}
	if err := json.Unmarshal([]byte(b), &y); err != nil {
		t.Fatalf("%q: %v", b, err)
	}
	return reflect.DeepEqual(x, y)
}

type want struct{ name, args, id string }

// The model outputs are copied from llama.cpp's tests/test-chat.cpp
// (3f545becc), with the calls and content it expects.
var parseCases = []struct {
	what    string
	f       Format
	text    string
	content string
	calls   []want
}{
	{"Hermes 2 Pro", Hermes, "<tool_call>\n{\"name\": \"special_function\", \"arguments\": {\"arg1\": 1}}</tool_call>", "",
		[]want{{"special_function", `{"arg1": 1}`, ""}}},
	{"Hermes 2 Pro with content", Hermes, "Hello, world!\nWhat's up?<tool_call>\n{\"name\": \"special_function\", \"arguments\": {\"arg1\": 1}}</tool_call>",
		"Hello, world!\nWhat's up?", []want{{"special_function", `{"arg1": 1}`, ""}}},
	{"Qwen2.5 / Hermes 3", Hermes, "<tool_call>\n{\"name\": \"special_function\", \"arguments\": {\"arg1\": 1}}\n</tool_call>", "",
		[]want{{"special_function", `{"arg1": 1}`, ""}}},
	{"Hermes content only", Hermes, "Hello, world!\nWhat's up?", "Hello, world!\nWhat's up?", nil},
	{"Qwen3.5", QwenXML, "<tool_call>\n<function=special_function>\n<parameter=arg1>\n1\n</parameter>\n</function>\n</tool_call>", "",
		[]want{{"special_function", `{"arg1": 1}`, ""}}},
	{"Qwen3.5 parallel", QwenXML, "<tool_call>\n<function=special_function>\n<parameter=arg1>\n1\n</parameter>\n</function>\n</tool_call>\n" +
		"<tool_call>\n<function=special_function_with_opt>\n<parameter=arg1>\n1\n</parameter>\n<parameter=arg2>\n2\n</parameter>\n</function>\n</tool_call>", "",
		[]want{{"special_function", `{"arg1": 1}`, ""}, {"special_function_with_opt", `{"arg1": 1, "arg2": 2}`, ""}}},
	{"Qwen3-Coder without <tool_call>", QwenXML, "<function=special_function>\n<parameter=arg1>\n1\n</parameter>\n</function>\n</tool_call>", "",
		[]want{{"special_function", `{"arg1": 1}`, ""}}},
	{"Qwen3-Coder string parameter", QwenXML, "<tool_call>\n<function=python>\n<parameter=code>\n42\n</parameter>\n</function>\n</tool_call>", "",
		[]want{{"python", `{"code": "42"}`, ""}}},
	{"GLM-4.6", GLM, "<tool_call>special_function\n<arg_key>arg1</arg_key>\n<arg_value>1</arg_value>\n</tool_call>", "",
		[]want{{"special_function", `{"arg1": 1}`, ""}}},
	{"MiniMax-M2", MiniMaxM2, "<minimax:tool_call>\n<invoke name=\"special_function\">\n<parameter name=\"arg1\">1</parameter>\n</invoke>\n</minimax:tool_call>", "",
		[]want{{"special_function", `{"arg1": 1}`, ""}}},
	{"MiniMax-M2 empty arguments with content", MiniMaxM2, "Let's call a tool:\n\n<minimax:tool_call>\n<invoke name=\"empty_args\">\n</invoke>\n</minimax:tool_call>", "Let's call a tool:",
		[]want{{"empty_args", `{}`, ""}}},
	{"MiniMax-M2 two invokes, string parameter", MiniMaxM2, "<minimax:tool_call>\n<invoke name=\"python\">\n<parameter name=\"code\">42</parameter>\n</invoke>\n<invoke name=\"get_time\">\n<parameter name=\"city\">Paris</parameter>\n</invoke>\n</minimax:tool_call>", "",
		[]want{{"python", `{"code": "42"}`, ""}, {"get_time", `{"city": "Paris"}`, ""}}},
	{"GLM-4.7-Flash", GLM, "<tool_call>special_function<arg_key>arg1</arg_key><arg_value>1</arg_value></tool_call>", "",
		[]want{{"special_function", `{"arg1": 1}`, ""}}},
	{"DeepSeek V3.1", DeepSeek, "<｜tool▁calls▁begin｜><｜tool▁call▁begin｜>get_time<｜tool▁sep｜>{\"city\": \"XYZCITY\"}<｜tool▁call▁end｜><｜tool▁calls▁end｜>", "",
		[]want{{"get_time", `{"city":"XYZCITY"}`, ""}}},
	{"DeepSeek V3.1 after reasoning", DeepSeek, "REASONING</think><｜tool▁calls▁begin｜><｜tool▁call▁begin｜>get_time<｜tool▁sep｜>{\"city\": \"Tokyo\"}<｜tool▁call▁end｜><｜tool▁calls▁end｜>",
		"REASONING</think>", []want{{"get_time", `{"city":"Tokyo"}`, ""}}},
	{"DeepSeek R1", DeepSeek, "<｜tool▁calls▁begin｜><｜tool▁call▁begin｜>function<｜tool▁sep｜>special_function\n```json\n{\"arg1\": 1}\n```<｜tool▁call▁end｜><｜tool▁calls▁end｜>", "",
		[]want{{"special_function", `{"arg1": 1}`, ""}}},
	{"Ministral 3", Mistral, `[TOOL_CALLS]special_function[ARGS]{"arg1":1}`, "", []want{{"special_function", `{"arg1": 1}`, ""}}},
	{"Ministral 3 parallel", Mistral, `[TOOL_CALLS]special_function[ARGS]{"arg1": 1}[TOOL_CALLS]special_function_with_opt[ARGS]{"arg1": 1, "arg2": 2}`, "",
		[]want{{"special_function", `{"arg1": 1}`, ""}, {"special_function_with_opt", `{"arg1": 1, "arg2": 2}`, ""}}},
	{"Ministral 3 call inside reasoning", Mistral, "[THINK]Let me think about [TOOL_CALLS]special_function[ARGS]{\"arg1\":1} and more[/THINK]" + `[TOOL_CALLS]special_function[ARGS]{"arg1": 1}`,
		"[THINK]Let me think about [TOOL_CALLS]special_function[ARGS]{\"arg1\":1} and more[/THINK]", []want{{"special_function", `{"arg1": 1}`, ""}}},
	{"Mistral Nemo", Mistral, "[TOOL_CALLS][{\"name\": \"special_function\", \"arguments\": {\"arg1\": 1}, \"id\": \"123456789\"}]", "",
		[]want{{"special_function", `{"arg1": 1}`, "123456789"}}},
	{"Llama 3.1 content", Llama3, "Hello, world!\nWhat's up?", "Hello, world!\nWhat's up?", nil},
	{"Llama 3.1 call", Llama3, `{"type": "function", "name": "special_function", "parameters": {"arg1": 1}}`, "",
		[]want{{"special_function", `{"arg1": 1}`, ""}}},
	{"gpt-oss final", Harmony, "<|channel|>final<|message|>Hello, world!\nWhat's up?", "Hello, world!\nWhat's up?", nil},
	{"gpt-oss commentary", Harmony, "<|channel|>commentary<|message|>Hello, world!\nWhat's up?", "Hello, world!\nWhat's up?", nil},
	{"gpt-oss analysis then final", Harmony, "<|channel|>analysis<|message|>I'm\nthinking<|end|><|start|>assistant<|channel|>final<|message|>Hello, world!\nWhat's up?",
		"Hello, world!\nWhat's up?", nil},
	{"gpt-oss recipient in role", Harmony, " to=functions.special_function<|channel|>analysis<|message|>{\"arg1\": 1}", "",
		[]want{{"special_function", `{"arg1": 1}`, ""}}},
	{"gpt-oss recipient in channel", Harmony, "<|channel|>analysis to=functions.special_function<|message|>{\"arg1\": 1}", "",
		[]want{{"special_function", `{"arg1": 1}`, ""}}},
	{"Gemma 4 string", Gemma4, "<|tool_call>call:get_time{city:<|\"|>San Francisco<|\"|>}<tool_call|>", "",
		[]want{{"get_time", `{"city": "San Francisco"}`, ""}}},
	{"Gemma 4 empty", Gemma4, "<|tool_call>call:empty_args{}<tool_call|>", "", []want{{"empty_args", `{}`, ""}}},
	{"Gemma 4 content", Gemma4, "Hello, world!\nWhat's up?<|tool_call>call:get_time{city:<|\"|>Paris<|\"|>}<tool_call|>",
		"Hello, world!\nWhat's up?", []want{{"get_time", `{"city": "Paris"}`, ""}}},
	{"Gemma 4 parallel", Gemma4, "<|tool_call>call:get_time{city:<|\"|>London<|\"|>}<tool_call|><|tool_call>call:get_weather{city:<|\"|>Paris<|\"|>}<tool_call|>", "",
		[]want{{"get_time", `{"city": "London"}`, ""}, {"get_weather", `{"city": "Paris"}`, ""}}},
	{"Gemma 4 negative", Gemma4, "<|tool_call>call:special_function{arg1:-7}<tool_call|>", "", []want{{"special_function", `{"arg1": -7}`, ""}}},
	{"Gemma 4 decimal", Gemma4, "<|tool_call>call:amount{orig:3.14}<tool_call|>", "", []want{{"amount", `{"orig": 3.14}`, ""}}},
	{"Gemma 4 bool", Gemma4, "<|tool_call>call:toggle{enabled:false}<tool_call|>", "", []want{{"toggle", `{"enabled": false}`, ""}}},
	{"Gemma 4 null", Gemma4, "<|tool_call>call:set_nullable{value:null}<tool_call|>", "", []want{{"set_nullable", `{"value": null}`, ""}}},
	{"Gemma 4 thought", Gemma4, "<|channel>thought\nI'm\nthinking<channel|>Hello, world!\nWhat's up?", "<|channel>thought\nI'm\nthinking<channel|>Hello, world!\nWhat's up?", nil},
	{"generic call", Generic, `{"tool_call": {"name": "special_function", "arguments": {"arg1": 1}}}`, "", []want{{"special_function", `{"arg1": 1}`, ""}}},
	{"generic calls", Generic, `{"tool_calls": [{"name": "special_function", "arguments": {"arg1": 1}}, {"name": "python", "arguments": {"code": "1"}}]}`, "",
		[]want{{"special_function", `{"arg1": 1}`, ""}, {"python", `{"code": "1"}`, ""}}},
	{"generic response", Generic, `{"response": "Hello, world!\nWhat's up?"}`, "Hello, world!\nWhat's up?", nil},
	{"generic text", Generic, "Hello, world!", "Hello, world!", nil},
}

func TestParse(t *testing.T) {
	tools := []Tool{specialFunction, getTime, python}
	for _, c := range parseCases {
		content, calls, err := c.f.Parse(c.text, tools)
		if err != nil {
			t.Errorf("%s: %v", c.what, err)
			continue
		}
		if content != c.content {
			t.Errorf("%s: content %q, want %q", c.what, content, c.content)
		}
		if len(calls) != len(c.calls) {
			t.Errorf("%s: %d calls %+v, want %d", c.what, len(calls), calls, len(c.calls))
			continue
		}
		for i, w := range c.calls {
			g := calls[i]
			if g.Name != w.name || g.ID != w.id || !sameJSON(t, g.Arguments, w.args) {
				t.Errorf("%s: call %d = %+v, want %+v", c.what, i, g, w)
			}
		}
	}
}

func TestParseMalformed(t *testing.T) {
	for _, c := range []struct {
		f    Format
		text string
	}{
		{Hermes, "<tool_call>\n{\"name\": \"special_function\", \"arguments\": {\"arg1\": 1}"},
		{Hermes, "<tool_call>{\"arguments\": {}}</tool_call>"},
		{QwenXML, "<tool_call>\n<function=special_function>\n<parameter=arg1>\n1\n</tool_call>"},
		{GLM, "<tool_call>special_function<arg_key>arg1</arg_key></tool_call>"},
		{DeepSeek, "<｜tool▁calls▁begin｜><｜tool▁call▁begin｜>get_time<｜tool▁sep｜>{\"city\"<｜tool▁call▁end｜>"},
		{Mistral, "[TOOL_CALLS]special_function{\"arg1\":1}"},
		{Gemma4, "<|tool_call>call:get_time<tool_call|>"},
		{MiniMaxM2, "<minimax:tool_call>\n<invoke name=\"special_function\">\n<parameter name=\"arg1\">1</invoke>\n</minimax:tool_call>"},
		{MiniMaxM2, "<minimax:tool_call>\n<invoke name=\"special_function\">\n</invoke>\n"},
		{MiniMaxM2, "<minimax:tool_call>\nspecial_function\n</minimax:tool_call>"},
	} {
		if _, _, err := c.f.Parse(c.text, nil); !errors.Is(err, ErrCall) {
			t.Errorf("%v %q: err %v, want ErrCall", c.f, c.text, err)
		}
	}
}

// TestDetect detects each family from its template as llama.cpp ships it
// (testdata/chat-templates/llamacpp).
func TestDetect(t *testing.T) {
	for file, want := range map[string]Format{
		"NousResearch-Hermes-2-Pro-Llama-3-8B-tool_use.jinja": Hermes,
		"Qwen-Qwen2.5-7B-Instruct.jinja":                      Hermes,
		"Qwen3-Coder.jinja":                                   QwenXML,
		"Qwen3.5-4B.jinja":                                    QwenXML,
		"GLM-4.6.jinja":                                       GLM,
		"MiniMax-M2.jinja":                                    MiniMaxM2,
		"NVIDIA-Nemotron-3-Nano-30B-A3B-BF16.jinja":           QwenXML,
		"deepseek-ai-DeepSeek-V3.1.jinja":                     DeepSeek,
		"mistralai-Mistral-Nemo-Instruct-2407.jinja":          Mistral,
		"meta-llama-Llama-3.1-8B-Instruct.jinja":              Llama3,
		"openai-gpt-oss-120b.jinja":                           Harmony,
		"google-gemma-4-31B-it.jinja":                         Gemma4,
		"google-gemma-2-2b-it.jinja":                          Generic,
	} {
		b, err := os.ReadFile("../../testdata/chat-templates/llamacpp/" + file)
		if err != nil {
			t.Error(err)
			continue
		}
		if got := Detect(string(b)); got != want {
			t.Errorf("%s: %v, want %v", file, got, want)
		}
	}
	for name, want := range map[string]Format{"chatml": Hermes, "harmony": Harmony, "gemma4": Gemma4} {
		if got := Detect(name); got != want {
			t.Errorf("built-in %s: %v, want %v", name, got, want)
		}
	}
}
