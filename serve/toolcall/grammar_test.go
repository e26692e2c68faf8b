package toolcall

import (
	"encoding/json"
	"math"
	"testing"

	"github.com/pipe-engine/pipe/sample/grammar"
)

// byteVocab has one token per byte (ids 1..255) and an end-of-generation
// token 256.
func byteVocab() *grammar.Vocab {
	pieces := make([][]byte, 257)
	for i := 1; i < 256; i++ {
		pieces[i] = []byte{byte(i)}
	}
	return grammar.NewVocab(pieces, []int32{256})
}

// accepts reports whether g takes text whole and may end after it.
func accepts(t *testing.T, g *grammar.Grammar, v *grammar.Vocab, text string) bool {
	t.Helper()
	m := grammar.NewMatcher(g, v)
	for i := 0; i < len(text); i++ {
		if m.Accept(int32(text[i])) != nil {
			return false
		}
	}
	logits := make([]float32, 257)
	if err := m.Apply(logits); err != nil {
		t.Fatal(err)
	}
	return !math.IsInf(float64(logits[256]), -1)
}

var withOpt = Tool{Name: "special_function_with_opt", Parameters: json.RawMessage(`{"type":"object","properties":{"arg1":{"type":"integer"},"arg2":{"type":"integer"}},"required":["arg1"]}`)}

// TestGrammar: each format's grammar takes a call as the family writes it
// (llama.cpp's test outputs where they match the grammar's layout), which
// Parse reads back, and refuses a call of an unknown tool, a wrong argument
// type and a missing required argument.
func TestGrammar(t *testing.T) {
	v := byteVocab()
	setUnit := Tool{Name: "set_unit", Parameters: json.RawMessage(`{"type":"object","properties":{"unit":{"type":"string","enum":["celsius","fahrenheit"]}},"required":["unit"]}`)}
	tools := []Tool{specialFunction, getTime, withOpt, setUnit}
	for _, c := range []struct {
		f                 Format
		parallel          bool
		good              string
		bad               []string
		name, args        string
		secondName, args2 string
	}{
		{f: Hermes, good: "<tool_call>\n{\"name\": \"special_function\", \"arguments\": {\"arg1\": 1}}\n</tool_call>",
			bad:  []string{"<tool_call>\n{\"name\": \"other\", \"arguments\": {\"arg1\": 1}}\n</tool_call>", "<tool_call>\n{\"name\": \"special_function\", \"arguments\": {\"arg1\": \"x\"}}\n</tool_call>", "<tool_call>\n{\"name\": \"special_function\", \"arguments\": {}}\n</tool_call>", "Hello"},
			name: "special_function", args: `{"arg1":1}`},
		{f: Hermes, parallel: true, good: "<tool_call>\n{\"name\": \"special_function\", \"arguments\": {\"arg1\": 1}}\n</tool_call>\n<tool_call>\n{\"name\": \"get_time\", \"arguments\": {\"city\": \"Paris\"}}\n</tool_call>",
			name: "special_function", args: `{"arg1":1}`, secondName: "get_time", args2: `{"city":"Paris"}`},
		{f: QwenXML, good: "<tool_call>\n<function=special_function>\n<parameter=arg1>\n1\n</parameter>\n</function>\n</tool_call>",
			bad:  []string{"<tool_call>\n<function=special_function>\n<parameter=arg1>\nx\n</parameter>\n</function>\n</tool_call>", "<tool_call>\n<function=special_function>\n</function>\n</tool_call>"},
			name: "special_function", args: `{"arg1":1}`},
		{f: QwenXML, good: "<tool_call>\n<function=special_function_with_opt>\n<parameter=arg1>\n1\n</parameter>\n<parameter=arg2>\n2\n</parameter>\n</function>\n</tool_call>",
			name: "special_function_with_opt", args: `{"arg1":1,"arg2":2}`},
		{f: QwenXML, good: "<tool_call>\n<function=get_time>\n<parameter=city>\nNew York\n</parameter>\n</function>\n</tool_call>",
			name: "get_time", args: `{"city":"New York"}`},
		{f: QwenXML, good: "<tool_call>\n<function=set_unit>\n<parameter=unit>\ncelsius\n</parameter>\n</function>\n</tool_call>",
			bad:  []string{"<tool_call>\n<function=set_unit>\n<parameter=unit>\nkelvin\n</parameter>\n</function>\n</tool_call>"},
			name: "set_unit", args: `{"unit":"celsius"}`},
		{f: Gemma4, good: "<|tool_call>call:set_unit{unit:<|\"|>fahrenheit<|\"|>}<tool_call|>",
			bad:  []string{"<|tool_call>call:set_unit{unit:<|\"|>kelvin<|\"|>}<tool_call|>"},
			name: "set_unit", args: `{"unit":"fahrenheit"}`},
		{f: GLM, good: "<tool_call>special_function\n<arg_key>arg1</arg_key>\n<arg_value>1</arg_value>\n</tool_call>",
			bad:  []string{"<tool_call>special_function\n</tool_call>"},
			name: "special_function", args: `{"arg1":1}`},
		{f: MiniMaxM2, good: "<minimax:tool_call>\n<invoke name=\"special_function\">\n<parameter name=\"arg1\">1</parameter>\n</invoke>\n</minimax:tool_call>",
			bad:  []string{"<minimax:tool_call>\n<invoke name=\"special_function\">\n</invoke>\n</minimax:tool_call>", "<minimax:tool_call>\n<invoke name=\"other\">\n</invoke>\n</minimax:tool_call>"},
			name: "special_function", args: `{"arg1":1}`},
		{f: MiniMaxM2, parallel: true, good: "<minimax:tool_call>\n<invoke name=\"special_function\">\n<parameter name=\"arg1\">1</parameter>\n</invoke>\n<invoke name=\"get_time\">\n<parameter name=\"city\">Paris</parameter>\n</invoke>\n</minimax:tool_call>",
			name: "special_function", args: `{"arg1":1}`, secondName: "get_time", args2: `{"city":"Paris"}`},
		{f: DeepSeek, good: "<｜tool▁calls▁begin｜><｜tool▁call▁begin｜>get_time<｜tool▁sep｜>{\"city\": \"XYZCITY\"}<｜tool▁call▁end｜><｜tool▁calls▁end｜>",
			bad:  []string{"<｜tool▁calls▁begin｜><｜tool▁call▁begin｜>get_time<｜tool▁sep｜>{\"town\": \"XYZCITY\"}<｜tool▁call▁end｜><｜tool▁calls▁end｜>"},
			name: "get_time", args: `{"city":"XYZCITY"}`},
		{f: Mistral, good: "[TOOL_CALLS][{\"name\": \"special_function\", \"arguments\": {\"arg1\": 1}}]",
			name: "special_function", args: `{"arg1":1}`},
		{f: MistralArgs, good: `[TOOL_CALLS]special_function[ARGS]{"arg1":1}`,
			bad:  []string{`[TOOL_CALLS]special_function[ARGS]{"arg1":true}`},
			name: "special_function", args: `{"arg1":1}`},
		{f: MistralArgs, parallel: true, good: `[TOOL_CALLS]special_function[ARGS]{"arg1": 1}[TOOL_CALLS]special_function_with_opt[ARGS]{"arg1": 1, "arg2": 2}`,
			name: "special_function", args: `{"arg1":1}`, secondName: "special_function_with_opt", args2: `{"arg1":1,"arg2":2}`},
		{f: Llama3, good: `{"name": "special_function", "parameters": {"arg1": 1}}`,
			name: "special_function", args: `{"arg1":1}`},
		{f: Harmony, good: "<|channel|>commentary to=functions.special_function <|constrain|>json<|message|>{\"arg1\": 1}",
			name: "special_function", args: `{"arg1":1}`},
		{f: Gemma4, good: "<|tool_call>call:get_time{city:<|\"|>London<|\"|>}<tool_call|>",
			bad:  []string{"<|tool_call>call:get_time{}<tool_call|>"},
			name: "get_time", args: `{"city":"London"}`},
		{f: Gemma4, good: "<|tool_call>call:special_function{arg1:42}<tool_call|>",
			name: "special_function", args: `{"arg1":42}`},
		{f: Generic, good: `{"tool_call": {"name": "special_function", "arguments": {"arg1": 1}}}`,
			name: "special_function", args: `{"arg1":1}`},
		{f: Generic, parallel: true, good: `{"tool_calls": [{"name": "special_function", "arguments": {"arg1": 1}}, {"name": "get_time", "arguments": {"city": "Rome"}}]}`,
			name: "special_function", args: `{"arg1":1}`, secondName: "get_time", args2: `{"city":"Rome"}`},
	} {
		src, err := c.f.Grammar(tools, c.parallel)
		if err != nil {
			t.Fatalf("%v: %v", c.f, err)
		}
		g, err := grammar.Parse(src)
		if err != nil {
			t.Fatalf("%v: %v\n%s", c.f, err, src)
		}
		if !accepts(t, g, v, c.good) {
			t.Errorf("%v: grammar refuses %q\n%s", c.f, c.good, src)
		}
		for _, b := range c.bad {
			if accepts(t, g, v, b) {
				t.Errorf("%v: grammar takes %q", c.f, b)
			}
		}
		_, calls, err := c.f.Parse(c.good, tools)
		want := 1
		if c.secondName != "" {
			want = 2
		}
		if err != nil || len(calls) != want {
			t.Fatalf("%v: Parse: %+v, %v", c.f, calls, err)
		}
		if calls[0].Name != c.name || calls[0].Arguments != c.args {
			t.Errorf("%v: call %+v, want %s %s", c.f, calls[0], c.name, c.args)
		}
		if want == 2 && (calls[1].Name != c.secondName || calls[1].Arguments != c.args2) {
			t.Errorf("%v: second call %+v, want %s %s", c.f, calls[1], c.secondName, c.args2)
		}
	}
}

func TestGrammarSingleRefusesTwo(t *testing.T) {
	src, err := Hermes.Grammar([]Tool{specialFunction}, false)
	if err != nil {
		t.Fatal(err)
	}
	g, err := grammar.Parse(src)
	if err != nil {
		t.Fatal(err)
	}
	two := "<tool_call>\n{\"name\": \"special_function\", \"arguments\": {\"arg1\": 1}}\n</tool_call>\n<tool_call>\n{\"name\": \"special_function\", \"arguments\": {\"arg1\": 2}}\n</tool_call>"
	if accepts(t, g, byteVocab(), two) {
		t.Error("parallel_tool_calls false: the grammar takes two calls")
	}
}
