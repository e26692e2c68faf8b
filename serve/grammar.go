package serve

import (
	"bytes"
	"encoding/json"
	"sync"

	"github.com/pipe-engine/pipe/sample"
	"github.com/pipe-engine/pipe/sample/grammar"
)

// Constrained sampling, as llama-server (tools/server at 3f545becc) takes it:
// a GBNF "grammar", a "json_schema" (converted with llama.cpp's
// json-schema-to-grammar rules), or OpenAI's "response_format"
// ({"type": "json_object"} with an optional "schema", {"type":
// "json_schema", "json_schema": {"schema": …}}, {"type": "text"}). The
// grammar masks every sampled token (sample.Mask) from the first generated
// one, or with grammar_lazy from the first of grammar_triggers to appear in
// the output (sample/grammar.Lazy); a bad grammar or schema is a 400 naming the field (and, for a
// grammar, the line and column).

// grammarFields are the request fields that constrain sampling.
type grammarFields struct {
	Grammar        string          `json:"grammar"`
	JSONSchema     json.RawMessage `json:"json_schema"`
	ResponseFormat json.RawMessage `json:"response_format"`
	// GrammarLazy: the grammar applies from the first of GrammarTriggers
	// ([{"type": 0 token | 1 word | 2 pattern | 3 full pattern, "value",
	// "token"}], llama-server's shape) to appear in the output.
	GrammarLazy     bool            `json:"grammar_lazy"`
	GrammarTriggers json.RawMessage `json:"grammar_triggers"`
}

// triggerJSON is one of grammar_triggers.
type triggerJSON struct {
	Type  *int   `json:"type"`
	Value string `json:"value"`
	Token *int32 `json:"token"`
}

// lazyTriggers reads grammar_triggers when the grammar is lazy.
func (f *grammarFields) lazyTriggers(j *job) error {
	if !f.GrammarLazy || j.gram == nil {
		return nil
	}
	var ts []triggerJSON
	if !isNull(f.GrammarTriggers) {
		if err := json.Unmarshal(f.GrammarTriggers, &ts); err != nil {
			return fieldErr("grammar_triggers", "grammar_triggers: want an array of {type, value, token}: %v", err)
		}
	}
	if len(ts) == 0 {
		return fieldErr("grammar_triggers", "grammar_triggers: no triggers set for lazy grammar")
	}
	for i, t := range ts {
		if t.Type == nil {
			return fieldErr("grammar_triggers", "grammar_triggers[%d]: type is required", i)
		}
		tr := grammar.Trigger{Kind: grammar.TriggerKind(*t.Type), Value: t.Value, Token: -1}
		if tr.Kind == grammar.TriggerToken {
			if t.Token == nil {
				return fieldErr("grammar_triggers", "grammar_triggers[%d]: a token trigger needs token", i)
			}
			tr.Token = *t.Token
		}
		j.triggers = append(j.triggers, tr)
	}
	j.lazy = true
	return nil
}

func isNull(v json.RawMessage) bool {
	v = bytes.TrimSpace(v)
	return len(v) == 0 || string(v) == "null"
}

// resolve parses the request's grammar into j.gram. On the OpenAI routes
// (oai) a grammar beside a JSON schema is an error, as llama-server's chat
// route has it; on /completion the grammar wins, as its field handler does.
func (f *grammarFields) resolve(oai bool, j *job) error {
	schema, field := f.JSONSchema, "json_schema"
	if !isNull(f.ResponseFormat) {
		s, err := responseSchema(f.ResponseFormat, schema)
		if err != nil {
			return err
		}
		if s != nil {
			schema, field = s, "response_format"
		}
	}
	switch {
	case !isNull(schema) && f.Grammar != "" && oai:
		return fieldErr("grammar", "grammar: cannot use both json_schema and grammar")
	case f.Grammar != "":
		g, err := grammar.Parse(f.Grammar)
		if err != nil {
			return fieldErr("grammar", "grammar: %v", err)
		}
		j.gram, j.grammarSrc = g, f.Grammar
	case !isNull(schema):
		src, err := grammar.FromJSONSchema(schema)
		if err != nil {
			return fieldErr(field, "%s: %v", field, err)
		}
		g, err := grammar.Parse(src)
		if err != nil {
			return fieldErr(field, "%s: the schema's grammar: %v", field, err)
		}
		j.gram, j.grammarSrc = g, src
	}
	return f.lazyTriggers(j)
}

// responseSchema is the schema response_format asks for (nil: none, for
// "text"), given the request's json_schema.
func responseSchema(v, jsonSchema json.RawMessage) (json.RawMessage, error) {
	var rf struct {
		Type       string          `json:"type"`
		Schema     json.RawMessage `json:"schema"`
		JSONSchema *struct {
			Schema json.RawMessage `json:"schema"`
		} `json:"json_schema"`
	}
	if err := json.Unmarshal(v, &rf); err != nil {
		return nil, fieldErr("response_format", "response_format: %v", err)
	}
	switch rf.Type {
	case "", "text":
		return nil, nil
	case "json_object":
		if !isNull(rf.Schema) {
			return rf.Schema, nil
		}
		if !isNull(jsonSchema) {
			return jsonSchema, nil
		}
		return json.RawMessage(`{}`), nil
	case "json_schema":
		if rf.JSONSchema != nil && !isNull(rf.JSONSchema.Schema) {
			return rf.JSONSchema.Schema, nil
		}
		return json.RawMessage(`{}`), nil
	}
	return nil, fieldErr("response_format", `response_format type must be one of "text", "json_object" or "json_schema", but got: %s`, rf.Type)
}

// newMask is a job's grammar as a fresh sample.Mask: a Matcher, or a Lazy
// one whose single-token trigger words become token triggers (as
// llama-server turns them).
func (s *intake) newMask(j *job) (sample.Mask, error) {
	v := s.grammarVocab()
	if !j.lazy {
		return grammar.NewMatcher(j.gram, v), nil
	}
	tok := s.o.Model.Tokenizer()
	ts := make([]grammar.Trigger, len(j.triggers))
	for i, t := range j.triggers {
		if ids := tok.Encode(t.Value, false, true); t.Kind == grammar.TriggerWord && len(ids) == 1 {
			t = grammar.Trigger{Kind: grammar.TriggerToken, Value: t.Value, Token: ids[0]}
		}
		ts[i] = t
	}
	l, err := grammar.NewLazy(j.gram, v, ts)
	if err != nil {
		return nil, fieldErr("grammar_triggers", "grammar_triggers: %v", err)
	}
	return l, nil
}

// vocabCache is the grammar vocabulary of the served model's tokenizer,
// built on the first request with a grammar.
type vocabCache struct {
	once sync.Once
	v    *grammar.Vocab
}

func (s *intake) grammarVocab() *grammar.Vocab {
	s.gvocab.once.Do(func() { s.gvocab.v = grammar.VocabOf(s.o.Model.Tokenizer()) })
	return s.gvocab.v
}
