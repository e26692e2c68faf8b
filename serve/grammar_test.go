package serve

import (
	"context"
	"encoding/json"
	"fmt"
	"regexp"
	"strings"
	"testing"

	"github.com/pipe-engine/pipe/decode"
	"github.com/pipe-engine/pipe/sample/grammar"
)

// boundedSchema has a longest valid answer, so a grammar-constrained
// generation must end with the end-of-generation token well inside the
// context.
const boundedSchema = `{"type": "object", "properties": {
	"name": {"type": "string", "minLength": 1, "maxLength": 8},
	"age": {"type": "integer", "minimum": 0, "maximum": 120},
	"ok": {"type": "boolean"},
	"tags": {"type": "array", "items": {"enum": ["red", "green", "blue"]}, "minItems": 1, "maxItems": 3},
	"score": {"anyOf": [{"type": "null"}, {"type": "integer", "minimum": -5, "maximum": 5}]},
	"pet": {"$ref": "#/$defs/pet"},
	"code": {"type": "string", "pattern": "^[A-Z]{2}-(0|[1-9][0-9]{1,2})$"}},
	"required": ["name", "age", "ok", "tags", "pet", "code"], "additionalProperties": false,
	"$defs": {"pet": {"type": "object", "properties": {"kind": {"const": "cat"}}, "required": ["kind"], "additionalProperties": false}}}`

// answer is boundedSchema's shape; checkAnswer checks what encoding/json
// cannot.
type answer struct {
	Name  *string  `json:"name"`
	Age   *float64 `json:"age"`
	OK    *bool    `json:"ok"`
	Tags  []string `json:"tags"`
	Score *float64 `json:"score"`
	Pet   *struct {
		Kind string `json:"kind"`
	} `json:"pet"`
	Code string `json:"code"`
}

var codeRE = regexp.MustCompile(`^[A-Z]{2}-(0|[1-9][0-9]{1,2})$`)

func checkAnswer(t *testing.T, what, text string) {
	t.Helper()
	var keys map[string]json.RawMessage
	if err := json.Unmarshal([]byte(text), &keys); err != nil {
		t.Fatalf("%s: %q is not a JSON object: %v", what, text, err)
	}
	for k := range keys {
		if !strings.Contains("name age ok tags score pet code", k) {
			t.Errorf("%s: unexpected property %q in %s", what, k, text)
		}
	}
	var a answer
	dec := json.NewDecoder(strings.NewReader(text))
	dec.DisallowUnknownFields()
	if err := dec.Decode(&a); err != nil {
		t.Fatalf("%s: %q: %v", what, text, err)
	}
	bad := a.Name == nil || len([]rune(*a.Name)) < 1 || len([]rune(*a.Name)) > 8 ||
		a.Age == nil || *a.Age != float64(int(*a.Age)) || *a.Age < 0 || *a.Age > 120 ||
		a.OK == nil || len(a.Tags) < 1 || len(a.Tags) > 3 || a.Pet == nil || a.Pet.Kind != "cat" ||
		a.Score != nil && (*a.Score != float64(int(*a.Score)) || *a.Score < -5 || *a.Score > 5) ||
		!codeRE.MatchString(a.Code)
	for _, tag := range a.Tags {
		bad = bad || tag != "red" && tag != "green" && tag != "blue"
	}
	if bad {
		t.Errorf("%s: %s breaks the schema", what, text)
	}
}

func startBig(t *testing.T) *harness {
	return startModel(t, func(o *decode.Options) { o.Ctx = 1024 }, func(o *Options) { o.Ctx = 1024 })
}

// TestJSONSchemaManySeeds: the tiny model's text is random, so only the
// grammar can make it valid: for many seeds at temperature 1, the answer
// to a chat with response_format json_schema, a /completion with
// json_schema and a /v1/completions with response_format json_object
// parses and satisfies the schema, and ends with end-of-generation.
func TestJSONSchemaManySeeds(t *testing.T) {
	h := startBig(t)
	rf := `{"type": "json_schema", "json_schema": {"name": "a", "strict": true, "schema": ` + boundedSchema + `}}`
	for seed := range 30 {
		r := h.do("/v1/chat/completions", fmt.Sprintf(`{"messages":[{"role":"user","content":"Describe someone."}],"temperature":1,"seed":%d,"response_format":%s}`, seed, rf), 200)
		ch := r["choices"].([]any)[0].(map[string]any)
		if ch["finish_reason"] != "stop" {
			t.Fatalf("seed %d: finish %v: %v", seed, ch["finish_reason"], ch)
		}
		checkAnswer(t, fmt.Sprintf("chat seed %d", seed), ch["message"].(map[string]any)["content"].(string))
	}
	for seed := range 10 {
		r := h.do("/completion", fmt.Sprintf(`{"prompt":"Person:","temperature":1.5,"seed":%d,"json_schema":%s}`, seed, boundedSchema), 200)
		if r["stop_type"] != "eos" {
			t.Fatalf("seed %d: stop_type %v", seed, r["stop_type"])
		}
		checkAnswer(t, fmt.Sprintf("/completion seed %d", seed), r["content"].(string))
		if r["generation_settings"].(map[string]any)["grammar"] == "" {
			t.Errorf("generation_settings.grammar is empty")
		}
	}
}

// TestJSONObject: response_format json_object on /v1/completions gives a
// JSON object, or (cut by max_tokens) a prefix of one that the JSON grammar
// accepts; greedy, the same as llama.cpp's json.gbnf-like object rule.
func TestJSONObject(t *testing.T) {
	h := startBig(t)
	src, err := grammar.FromJSONSchema([]byte(`{}`))
	if err != nil {
		t.Fatal(err)
	}
	g, err := grammar.Parse(src)
	if err != nil {
		t.Fatal(err)
	}
	for seed := range 8 {
		r := h.do("/v1/completions", fmt.Sprintf(`{"prompt":"JSON:","temperature":1,"seed":%d,"max_tokens":400,"response_format":{"type":"json_object"}}`, seed), 200)
		ch := r["choices"].([]any)[0].(map[string]any)
		text := ch["text"].(string)
		m := grammar.NewMatcher(g, grammar.NewVocab(nil, nil))
		if err := m.AcceptString(text); err != nil {
			t.Fatalf("seed %d: %q is not a prefix of a JSON object: %v", seed, text, err)
		}
		if ch["finish_reason"] == "stop" {
			if !json.Valid([]byte(text)) || !strings.HasPrefix(text, "{") || !m.Done() {
				t.Fatalf("seed %d: finished %q is not a JSON object", seed, text)
			}
		}
	}
}

// TestGrammarGBNF: a GBNF grammar on /completion and the chat route forces
// the answer's form for every seed.
func TestGrammarGBNF(t *testing.T) {
	h := start(t, nil)
	gram := `root ::= answer "!" # yes or no
answer ::= ("yes" | "no") ([ ] [0-9]{1,2})?`
	for seed := range 12 {
		r := h.do("/completion", fmt.Sprintf(`{"prompt":"Is it?","temperature":1,"seed":%d,"grammar":%q}`, seed, gram), 200)
		c := r["content"].(string)
		ok := strings.HasSuffix(c, "!") && (strings.HasPrefix(c, "yes") || strings.HasPrefix(c, "no"))
		if !ok || r["stop_type"] != "eos" {
			t.Fatalf("seed %d: %q (stop_type %v) breaks the grammar", seed, c, r["stop_type"])
		}
		r = h.do("/v1/chat/completions", fmt.Sprintf(`{"messages":[{"role":"user","content":"Is it?"}],"temperature":1,"seed":%d,"grammar":%q}`, seed, gram), 200)
		c = r["choices"].([]any)[0].(map[string]any)["message"].(map[string]any)["content"].(string)
		if !strings.HasSuffix(c, "!") || !strings.HasPrefix(c, "yes") && !strings.HasPrefix(c, "no") {
			t.Fatalf("chat seed %d: %q breaks the grammar", seed, c)
		}
	}
}

// TestGrammarErrors: a bad grammar is a 400 naming the field and the
// position; a bad schema or response_format a 400 naming its field.
func TestGrammarErrors(t *testing.T) {
	h := start(t, nil)
	chat := func(extra string) string {
		return `{"messages":[{"role":"user","content":"x"}],"max_tokens":1,` + extra + `}`
	}
	for _, c := range []struct{ path, body, field, want string }{
		{"/completion", `{"prompt":"x","grammar":"root ::= \"a\"\nb ::= [a-"}`, "grammar", "line 2, column 10: unexpected end of input"},
		{"/completion", `{"prompt":"x","grammar":"root ::= (\"a\""}`, "grammar", "line 1, column 14: expecting ')'"},
		{"/v1/chat/completions", chat(`"grammar":"root ::= undefined-rule"`), "grammar", "undefined rule identifier 'undefined-rule'"},
		{"/v1/chat/completions", chat(`"grammar":"root ::= \"a\"","json_schema":{}`), "grammar", "cannot use both"},
		{"/v1/chat/completions", chat(`"json_schema":{"type":"string","pattern":"^\\d$"}`), "json_schema", "unsupported escape"},
		{"/v1/completions", `{"prompt":"x","response_format":{"type":"json_schema","json_schema":{"schema":{"type":"nope"}}}}`, "response_format", "unrecognized schema"},
		{"/v1/chat/completions", chat(`"response_format":{"type":"xml"}`), "response_format", "but got: xml"},
		{"/completion", `{"prompt":"x","grammar":"root ::= \"a\"","grammar_lazy":true}`, "grammar_triggers", "no triggers set for lazy grammar"},
		{"/completion", `{"prompt":"x","grammar":"root ::= \"a\"","grammar_lazy":true,"grammar_triggers":[{"type":2,"value":"(?=a)"}]}`, "grammar_triggers", "invalid grammar trigger"},
		{"/completion", `{"prompt":"x","grammar":"root ::= \"a\"","grammar_lazy":true,"grammar_triggers":[{"value":"a"}]}`, "grammar_triggers", "type is required"},
		{"/completion", `{"prompt":"x","grammar":"root ::= \"a\"*","ignore_eos":true}`, "ignore_eos", "cannot be used with a grammar"},
	} {
		r := h.do(c.path, c.body, 400)
		e := r["error"].(map[string]any)
		if msg := e["message"].(string); !strings.Contains(msg, c.want) || e["param"] != c.field {
			t.Errorf("%s: error %v, want param %q and a message containing %q", c.body, e, c.field, c.want)
		}
	}
	// text is no constraint; grammar wins over json_schema on /completion
	h.do("/v1/chat/completions", chat(`"response_format":{"type":"text"}`), 200)
	r := h.do("/completion", `{"prompt":"x","grammar":"root ::= \"z\"","json_schema":{"type":"integer"}}`, 200)
	if r["content"] != "z" {
		t.Errorf("/completion with grammar and json_schema: %q, want the grammar's z", r["content"])
	}
}

// TestJSONSchemaStream: streamed, the deltas of a schema-constrained chat
// add up to the same valid answer as the non-streamed request's.
func TestJSONSchemaStream(t *testing.T) {
	h := startBig(t)
	for seed := range 4 {
		body := fmt.Sprintf(`{"messages":[{"role":"user","content":"Who?"}],"temperature":1,"seed":%d,"json_schema":%s`, seed, boundedSchema)
		whole := h.do("/v1/chat/completions", body+"}", 200)
		want := whole["choices"].([]any)[0].(map[string]any)["message"].(map[string]any)["content"].(string)
		resp, err := h.post(context.Background(), "/v1/chat/completions", body+`,"stream":true}`)
		if err != nil {
			t.Fatal(err)
		}
		chunks, done := readSSE(t, resp.Body)
		resp.Body.Close()
		got, finish, _ := streamText(chunks)
		if !done || finish != "stop" || got != want {
			t.Fatalf("seed %d: stream %q (finish %q, done %v), want %q", seed, got, finish, done, want)
		}
		checkAnswer(t, fmt.Sprintf("stream seed %d", seed), got)
	}
}

// TestLazyGrammar: a lazy grammar allows everything until its trigger is
// generated (greedy output unchanged while it has not been), then forces
// the grammar's form from the trigger on.
func TestLazyGrammar(t *testing.T) {
	h := start(t, nil)
	plain := h.do("/completion", `{"prompt":"Once upon","n_predict":12}`, 200)["content"]
	lazy := h.do("/completion", `{"prompt":"Once upon","n_predict":12,"grammar":"root ::= \"§\" [0-9]","grammar_lazy":true,"grammar_triggers":[{"type":1,"value":"§never§"}]}`, 200)["content"]
	if lazy != plain {
		t.Fatalf("untriggered lazy grammar changed the output: %q, want %q", lazy, plain)
	}
	gram := `root ::= "{" [a-z]{1,5} "}"`
	for _, trig := range []string{`{"type":1,"value":"{"}`, `{"type":2,"value":"\\{"}`} {
		for seed := range 6 {
			body := fmt.Sprintf(`{"prompt":"Once upon","temperature":1,"seed":%d,"n_predict":40,"logit_bias":{"{":100},"grammar":%q,"grammar_lazy":true,"grammar_triggers":[%s]}`, seed, gram, trig)
			r := h.do("/completion", body, 200)
			c := r["content"].(string)
			i := strings.Index(c, "{")
			ok := i >= 0 && strings.HasSuffix(c, "}") && len(c)-i >= 3 && len(c)-i <= 7 && r["stop_type"] == "eos"
			if ok {
				for _, ch := range c[i+1 : len(c)-1] {
					ok = ok && 'a' <= ch && ch <= 'z'
				}
			}
			if !ok {
				t.Fatalf("trigger %s seed %d: %q (stop_type %v) does not end in the grammar's {letters}", trig, seed, c, r["stop_type"])
			}
		}
	}
}
