package grammar

import (
	"errors"
	"fmt"
	"regexp"
	"slices"
	"strconv"
	"strings"
)

// ErrSchema is wrapped by FromJSONSchema's errors.
var ErrSchema = errors.New("JSON schema conversion failed")

// builtin is a primitive rule and the rules it uses
// (json-schema-to-grammar.cpp's PRIMITIVE_RULES and STRING_FORMAT_RULES).
type builtin struct {
	content string
	deps    []string
}

const spaceRule = `| " " | "\n"{1,2} [ \t]{0,20}`

var primitives = map[string]builtin{
	"boolean":       {`("true" | "false")`, nil},
	"decimal-part":  {`[0-9]{1,16}`, nil},
	"integral-part": {`[0] | [1-9] [0-9]{0,15}`, nil},
	"number":        {`("-"? integral-part) ("." decimal-part)? ([eE] [-+]? integral-part)?`, []string{"integral-part", "decimal-part"}},
	"integer":       {`("-"? integral-part)`, []string{"integral-part"}},
	"value":         {`object | array | string | number | boolean | null`, []string{"object", "array", "string", "number", "boolean", "null"}},
	"object":        {`"{" space ( string ":" space value ("," space string ":" space value)* )? space "}"`, []string{"string", "value"}},
	"array":         {`"[" space ( value ("," space value)* )? space "]"`, []string{"value"}},
	"uuid":          {`"\"" [0-9a-fA-F]{8} "-" [0-9a-fA-F]{4} "-" [0-9a-fA-F]{4} "-" [0-9a-fA-F]{4} "-" [0-9a-fA-F]{12} "\""`, nil},
	"char":          {`[^"\\\x7F\x00-\x1F] | [\\] (["\\bfnrt] | "u" [0-9a-fA-F]{4})`, nil},
	"string":        {`"\"" char* "\""`, []string{"char"}},
	"null":          {`"null"`, nil},
}

var formats = map[string]builtin{
	"date":             {`[0-9]{4} "-" ( "0" [1-9] | "1" [0-2] ) "-" ( "0" [1-9] | [1-2] [0-9] | "3" [0-1] )`, nil},
	"time":             {`([01] [0-9] | "2" [0-3]) ":" [0-5] [0-9] ":" [0-5] [0-9] ( "." [0-9]{3} )? ( "Z" | ( "+" | "-" ) ( [01] [0-9] | "2" [0-3] ) ":" [0-5] [0-9] )`, nil},
	"date-time":        {`date "T" time`, []string{"date", "time"}},
	"date-string":      {`"\"" date "\""`, []string{"date"}},
	"time-string":      {`"\"" time "\""`, []string{"time"}},
	"date-time-string": {`"\"" date-time "\""`, []string{"date-time"}},
}

var (
	invalidRuleChars = regexp.MustCompile(`[^a-zA-Z0-9-]+`)
	uuidFormat       = regexp.MustCompile(`^uuid[1-5]?$`)
)

func reserved(name string) bool {
	_, p := primitives[name]
	_, f := formats[name]
	return name == "root" || p || f
}

// formatLiteral is a GBNF string literal of s.
func formatLiteral(s string) string {
	r := strings.NewReplacer("\r", `\r`, "\n", `\n`, `"`, `\"`, `\`, `\\`)
	return `"` + r.Replace(s) + `"`
}

// converter is common_schema_converter.
type converter struct {
	rules     map[string]string
	refs      map[string]*jv
	resolving map[string]bool
	errs      []string
}

// FromJSONSchema converts a JSON schema to a GBNF grammar with llama.cpp's
// rules (common/json-schema-to-grammar.cpp at 3f545becc): type (one or a
// list), const, enum, object properties (in the order written) with
// required and additionalProperties, allOf of objects, array items,
// prefixItems, minItems and maxItems, string minLength and maxLength and
// the date, time, date-time and uuid formats, integer minimum and maximum
// (exclusive too), anyOf / oneOf, local $ref ("#/$defs/…") and anchored
// patterns (pattern.go). Remote refs, and patterns llama.cpp would loosen to
// any string, are errors.
func FromJSONSchema(schema []byte) (string, error) {
	s, err := parseJSON(schema)
	if err != nil {
		return "", fmt.Errorf("%w: not JSON: %v", ErrSchema, err)
	}
	c := &converter{rules: map[string]string{"space": spaceRule}, refs: map[string]*jv{}, resolving: map[string]bool{}}
	c.resolveRefs(s, s)
	c.visit(s, "")
	if len(c.errs) > 0 {
		return "", fmt.Errorf("%w: %s", ErrSchema, strings.Join(c.errs, "; "))
	}
	names := make([]string, 0, len(c.rules))
	for n := range c.rules {
		names = append(names, n)
	}
	slices.Sort(names)
	var b strings.Builder
	for _, n := range names {
		fmt.Fprintf(&b, "%s ::= %s\n", n, c.rules[n])
	}
	return b.String(), nil
}

func (c *converter) addRule(name, rule string) string {
	esc := invalidRuleChars.ReplaceAllString(name, "-")
	if old, ok := c.rules[esc]; !ok || old == rule {
		c.rules[esc] = rule
		return esc
	}
	i := 0
	for {
		old, ok := c.rules[esc+strconv.Itoa(i)]
		if !ok || old == rule {
			break
		}
		i++
	}
	key := esc + strconv.Itoa(i)
	c.rules[key] = rule
	return key
}

func (c *converter) addPrimitive(name string, r builtin) string {
	n := c.addRule(name, r.content)
	for _, dep := range r.deps {
		d, ok := primitives[dep]
		if !ok {
			d, ok = formats[dep]
		}
		if !ok {
			c.errs = append(c.errs, "rule "+dep+" not known")
			continue
		}
		if _, have := c.rules[dep]; !have {
			c.addPrimitive(dep, d)
		}
	}
	return n
}

// resolveRefs records the target of every local $ref under n.
func (c *converter) resolveRefs(root, n *jv) {
	switch {
	case n == nil:
	case n.kind == 'a':
		for _, x := range n.vals {
			c.resolveRefs(root, x)
		}
	case n.kind == 'o' && n.has("$ref"):
		ref := n.get("$ref")
		if ref.kind != 's' {
			c.errs = append(c.errs, "$ref must be a string")
			return
		}
		if _, done := c.refs[ref.str]; done {
			return
		}
		if !strings.HasPrefix(ref.str, "#/") {
			c.errs = append(c.errs, "unsupported ref: "+ref.str)
			return
		}
		target := root
		for _, sel := range strings.Split(ref.str[2:], "/") {
			next := target.get(sel)
			if target.kind == 'a' {
				if i, err := strconv.Atoi(sel); err == nil && i >= 0 && i < len(target.vals) {
					next = target.vals[i]
				}
			}
			if next == nil {
				c.errs = append(c.errs, "error resolving ref "+ref.str+": "+sel+" not in "+target.dump())
				return
			}
			target = next
		}
		c.refs[ref.str] = target
	case n.kind == 'o':
		for _, x := range n.vals {
			c.resolveRefs(root, x)
		}
	}
}

func (c *converter) resolveRef(ref string) string {
	frag := ref
	if i := strings.IndexByte(ref, '#'); i >= 0 {
		frag = ref[i+1:]
	}
	name := "ref" + invalidRuleChars.ReplaceAllString(frag, "-")
	if _, ok := c.rules[name]; !ok && !c.resolving[ref] {
		c.resolving[ref] = true
		target, ok := c.refs[ref]
		if !ok {
			target = &jv{kind: 'z'}
		}
		name = c.visit(target, name)
		delete(c.resolving, ref)
	}
	return name
}

func (c *converter) union(name string, alts []*jv) string {
	rules := make([]string, len(alts))
	for i, a := range alts {
		sub := name + "-" + strconv.Itoa(i)
		if name == "" {
			sub = "alternative-" + strconv.Itoa(i)
		}
		rules[i] = c.visit(a, sub)
	}
	return strings.Join(rules, " | ")
}

func sub(name, part string) string {
	if name == "" {
		return part
	}
	return name + "-" + part
}
