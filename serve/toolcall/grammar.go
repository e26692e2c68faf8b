package toolcall

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"strings"

	"github.com/pipe-engine/pipe/sample/grammar"
)

// ErrNoGrammar: the format has no grammar that forces a call here.
var ErrNoGrammar = errors.New("no tool-call grammar")

// Grammar is the GBNF of what the format writes for a call of one of
// tools (several calls when parallel), each call's arguments constrained
// by its tool's parameter schema (llama.cpp's json-schema-to-grammar rules,
// sample/grammar.FromJSONSchema). The grammar starts at the format's first
// trigger word (Triggers), so it serves both an enforced call and a lazy one.
func (f Format) Grammar(tools []Tool, parallel bool) (string, error) {
	if len(tools) == 0 {
		return "", fmt.Errorf("%w: no tools", ErrNoGrammar)
	}
	b := &gbuilder{}
	calls := make([]string, len(tools))
	for i, t := range tools {
		c, err := f.callRule(b, t)
		if err != nil {
			return "", err
		}
		calls[i] = c
	}
	var g strings.Builder
	fmt.Fprintf(&g, "tc-call ::= %s\n", strings.Join(calls, " | "))
	g.WriteString(f.rootRule(parallel))
	args, err := b.rules()
	if err != nil {
		return "", err
	}
	g.WriteString(args)
	return g.String(), nil
}

// rootRule sequences tc-call.
func (f Format) rootRule(parallel bool) string {
	many := func(sep string) string {
		if !parallel {
			return "tc-call"
		}
		return "tc-call (" + sep + " tc-call)*"
	}
	switch f {
	case Hermes, QwenXML, GLM:
		return "root ::= " + many(`"\n"`) + "\n"
	case Generic:
		if parallel {
			return `root ::= "{\"tool_calls\": [" ` + many(`", "`) + ` "]}"` + "\n"
		}
		return `root ::= "{\"tool_call\": " tc-call "}"` + "\n"
	case Mistral:
		return `root ::= "[TOOL_CALLS][" ` + many(`", "`) + ` "]"` + "\n"
	case DeepSeek:
		return "root ::= " + lit(dsCallsBegin) + " " + many(`""`) + " " + lit(dsCallsEnd) + "\n"
	case MistralArgs, Gemma4:
		return "root ::= " + many(`""`) + "\n"
	case MiniMaxM2:
		return "root ::= " + lit(mmCallsBegin+"\n") + " " + many(`""`) + " " + lit(mmCallsEnd) + "\n"
	}
	return "root ::= tc-call\n" // Llama3, Harmony: one call
}

// callRule is the GBNF of one call of t.
func (f Format) callRule(b *gbuilder, t Tool) (string, error) {
	name := lit(t.Name)
	jname := lit(jsonString(t.Name))
	switch f {
	case Hermes:
		return fmt.Sprintf(`( "<tool_call>\n{\"name\": " %s ", \"arguments\": " %s "}\n</tool_call>" )`, jname, b.add(t.Parameters)), nil
	case Generic, Mistral:
		return fmt.Sprintf(`( "{\"name\": " %s ", \"arguments\": " %s "}" )`, jname, b.add(t.Parameters)), nil
	case Llama3:
		return fmt.Sprintf(`( "{\"name\": " %s ", \"parameters\": " %s "}" )`, jname, b.add(t.Parameters)), nil
	case MistralArgs:
		return fmt.Sprintf(`( "[TOOL_CALLS]" %s "[ARGS]" %s )`, name, b.add(t.Parameters)), nil
	case DeepSeek:
		return fmt.Sprintf(`( %s %s %s %s %s )`, lit(dsCallBegin), name, lit(dsSep), b.add(t.Parameters), lit(dsCallEnd)), nil
	case Harmony:
		return fmt.Sprintf(`( "<|channel|>commentary to=functions." %s " <|constrain|>json<|message|>" %s )`, name, b.add(t.Parameters)), nil
	case QwenXML, GLM, Gemma4, MiniMaxM2:
		return f.paramsRule(b, t)
	}
	return "", fmt.Errorf("%w for %v", ErrNoGrammar, f)
}

// paramsRule is a call in a format that writes each parameter apart.
func (f Format) paramsRule(b *gbuilder, t Tool) (string, error) {
	ps, err := properties(t.Parameters)
	if err != nil {
		return "", fmt.Errorf("tool %s: %w", t.Name, err)
	}
	var parts []string
	first := true
	for _, p := range ps {
		if f == Gemma4 && !p.required {
			continue // Gemma 4 separates with commas: the required ones only
		}
		r := f.paramRule(b, p, first)
		if !p.required {
			r = "( " + r + " )?"
		}
		first = false
		parts = append(parts, r)
	}
	body := strings.Join(parts, " ")
	if body == "" {
		body = `""`
	}
	name := lit(t.Name)
	switch f {
	case QwenXML:
		return fmt.Sprintf(`( "<tool_call>\n<function=" %s ">\n" %s "</function>\n</tool_call>" )`, name, body), nil
	case GLM:
		return fmt.Sprintf(`( "<tool_call>" %s %s "\n</tool_call>" )`, name, body), nil
	case MiniMaxM2:
		return fmt.Sprintf(`( %s %s "\">\n" %s %s )`, lit(mmInvoke), name, body, lit(mmInvokeEnd+"\n")), nil
	}
	return fmt.Sprintf(`( "<|tool_call>call:" %s "{" %s "}<tool_call|>" )`, name, body), nil
}

// paramRule is one parameter as the format writes it; a string parameter's
// value is free text without '<' (a JSON value by its schema otherwise).
func (f Format) paramRule(b *gbuilder, p property, first bool) string {
	key := lit(p.name)
	v := p.text()
	if p.typ != "string" {
		v = b.add(p.schema)
	}
	switch f {
	case QwenXML:
		return fmt.Sprintf(`"<parameter=" %s ">\n" %s "\n</parameter>\n"`, key, v)
	case GLM:
		return fmt.Sprintf(`"\n<arg_key>" %s "</arg_key>\n<arg_value>" %s "</arg_value>"`, key, v)
	case MiniMaxM2:
		return fmt.Sprintf(`%s %s "\">" %s %s`, lit(mmParam), key, v, lit(mmParamEnd+"\n"))
	}
	if p.typ == "string" {
		v = `"<|\"|>" ` + v + ` "<|\"|>"`
	}
	sep := `","`
	if first {
		sep = ""
	}
	return fmt.Sprintf(`%s %s ":" %s`, sep, key, v)
}

// text is a string parameter's value written raw: one of its enum, or
// free text without '<'.
func (p property) text() string {
	var s struct {
		Enum []string `json:"enum"`
	}
	if json.Unmarshal(p.schema, &s) != nil || len(s.Enum) == 0 {
		return "tc-text"
	}
	alts := make([]string, len(s.Enum))
	for i, e := range s.Enum {
		alts[i] = lit(e)
	}
	return "( " + strings.Join(alts, " | ") + " )"
}

// property is one parameter of a tool's schema, in the schema's order.
type property struct {
	name     string
	schema   json.RawMessage
	typ      string
	required bool
}

// properties reads a parameters schema's properties in their order.
func properties(params json.RawMessage) ([]property, error) {
	if isNull(params) {
		return nil, nil
	}
	var s struct {
		Properties json.RawMessage `json:"properties"`
		Required   []string        `json:"required"`
	}
	if err := json.Unmarshal(params, &s); err != nil {
		return nil, fmt.Errorf("parameters: %w", err)
	}
	if isNull(s.Properties) {
		return nil, nil
	}
	dec := json.NewDecoder(bytes.NewReader(s.Properties))
	if tok, err := dec.Token(); err != nil || tok != json.Delim('{') {
		return nil, errors.New("parameters.properties: want an object")
	}
	var ps []property
	for dec.More() {
		k, err := dec.Token()
		if err != nil {
			return nil, fmt.Errorf("parameters.properties: %w", err)
		}
		var raw json.RawMessage
		if err := dec.Decode(&raw); err != nil {
			return nil, fmt.Errorf("parameters.properties: %w", err)
		}
		p := property{name: k.(string), schema: raw}
		var ty struct {
			Type any `json:"type"`
		}
		if json.Unmarshal(raw, &ty) == nil {
			p.typ, _ = ty.Type.(string)
		}
		for _, r := range s.Required {
			p.required = p.required || r == p.name
		}
		ps = append(ps, p)
	}
	return ps, nil
}

// gbuilder collects the JSON schemas a grammar needs: schema i becomes
// rule tcI-root, its own rules prefixed tcI-.
type gbuilder struct {
	schemas []json.RawMessage
}

func (b *gbuilder) add(schema json.RawMessage) string {
	if isNull(schema) {
		schema = json.RawMessage(`{"type": "object"}`)
	}
	b.schemas = append(b.schemas, schema)
	return fmt.Sprintf("tc%d-root", len(b.schemas)-1)
}

// rules converts the schemas, plus tc-text.
func (b *gbuilder) rules() (string, error) {
	var out strings.Builder
	out.WriteString("tc-text ::= [^<]*\n")
	for i, s := range b.schemas {
		src, err := grammar.FromJSONSchema(s)
		if err != nil {
			return "", fmt.Errorf("parameters: %w", err)
		}
		out.WriteString(prefixRules(src, fmt.Sprintf("tc%d-", i)))
		out.WriteByte('\n')
	}
	return out.String(), nil
}

// prefixRules puts prefix before every rule name of a GBNF source (the
// words outside literals, classes, repetition counts and comments).
func prefixRules(src, prefix string) string {
	var b strings.Builder
	for i := 0; i < len(src); {
		c := src[i]
		switch {
		case c == '"' || c == '[' || c == '{':
			end := map[byte]byte{'"': '"', '[': ']', '{': '}'}[c]
			j := i + 1
			for j < len(src) && src[j] != end {
				if src[j] == '\\' {
					j++
				}
				j++
			}
			j = min(j+1, len(src))
			b.WriteString(src[i:j])
			i = j
		case c == '#':
			j := strings.IndexByte(src[i:], '\n')
			if j < 0 {
				j = len(src) - i
			}
			i += j
		case isWord(c):
			j := i
			for j < len(src) && isWord(src[j]) {
				j++
			}
			b.WriteString(prefix + src[i:j])
			i = j
		default:
			b.WriteByte(c)
			i++
		}
	}
	return b.String()
}

func isWord(c byte) bool {
	return c == '-' || c == '_' || c >= 'a' && c <= 'z' || c >= 'A' && c <= 'Z' || c >= '0' && c <= '9'
}

// Triggers are the words that begin a call (for a lazy grammar); none for
// formats whose call is not marked by a word (Llama 3, harmony, generic).
func (f Format) Triggers() []string {
	switch f {
	case Hermes, QwenXML, GLM:
		return []string{"<tool_call>"}
	case DeepSeek:
		return []string{dsCallsBegin}
	case Mistral, MistralArgs:
		return []string{"[TOOL_CALLS]"}
	case Gemma4:
		return []string{"<|tool_call>"}
	case MiniMaxM2:
		return []string{mmCallsBegin}
	}
	return nil
}

// lit is s as a GBNF string literal.
func lit(s string) string {
	r := strings.NewReplacer(`\`, `\\`, `"`, `\"`, "\n", `\n`, "\r", `\r`, "\t", `\t`)
	return `"` + r.Replace(s) + `"`
}

func jsonString(s string) string {
	b, _ := json.Marshal(s)
	return string(b)
}

func isNull(v json.RawMessage) bool {
	v = bytes.TrimSpace(v)
	return len(v) == 0 || string(v) == "null"
}
