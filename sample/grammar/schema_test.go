package grammar

import (
	"errors"
	"testing"
)

// TestLlamaSchemaIntegration runs llama.cpp's test_schema cases
// (tests/test-grammar-integration.cpp at 3f545becc): the schema's grammar
// matches the passing strings and none of the failing ones.
func TestLlamaSchemaIntegration(t *testing.T) {
	for _, c := range llamaCases(t, "schema") {
		src, err := FromJSONSchema([]byte(c.Text))
		if err != nil {
			t.Errorf("%s: %v", c.Desc, err)
			continue
		}
		g, err := Parse(src)
		if err != nil {
			t.Errorf("%s: grammar %q: %v", c.Desc, src, err)
			continue
		}
		checkStrings(t, g, c)
	}
}

// TestSchemaRefsAndUnions: $ref to $defs, anyOf, enum and an array of
// objects, checked on strings that do and do not satisfy the schema.
func TestSchemaRefsAndUnions(t *testing.T) {
	schema := `{"type": "object", "properties": {
		"pets": {"type": "array", "items": {"$ref": "#/$defs/pet"}, "maxItems": 2},
		"id": {"anyOf": [{"type": "integer"}, {"type": "null"}]}},
		"required": ["pets"], "additionalProperties": false,
		"$defs": {"pet": {"type": "object", "properties": {"kind": {"enum": ["cat", "dog"]}}, "required": ["kind"]}}}`
	src, err := FromJSONSchema([]byte(schema))
	if err != nil {
		t.Fatal(err)
	}
	g, err := Parse(src)
	if err != nil {
		t.Fatalf("%v\n%s", err, src)
	}
	for s, want := range map[string]bool{
		`{"pets": []}`: true, `{"pets": [{"kind": "cat"}, {"kind":"dog"}], "id": 7}`: true,
		`{"pets": [], "id": null}`: true, `{"id": 1}`: false, `{"pets": [{"kind": "cow"}]}`: false,
		`{"pets": [{"kind": "cat"}, {"kind": "cat"}, {"kind": "cat"}]}`: false, `{"pets": [], "x": 1}`: false,
		`{"pets": [], "id": "7"}`: false,
	} {
		if got := matches(g, s); got != want {
			t.Errorf("%s: match %v, want %v\n%s", s, got, want, src)
		}
	}
	for _, bad := range []string{`{"$ref": "https://example.com/s.json"}`, `{"type": "thing"}`, `{"type": "string", "pattern": "a+"}`, `{"type": "string", "pattern": "^\\d+$"}`, `{"type": "string", "pattern": "^(?=a)$"}`, `{"type": "string", "pattern": "^(a$"}`, `{"type":`} {
		if _, err := FromJSONSchema([]byte(bad)); !errors.Is(err, ErrSchema) {
			t.Errorf("%s: %v, want ErrSchema", bad, err)
		}
	}
}

// TestSchemaPattern: an anchored pattern of groups, alternation, classes,
// repetitions and escapes becomes a string rule with llama.cpp's
// conversion.
func TestSchemaPattern(t *testing.T) {
	src, err := FromJSONSchema([]byte(`{"type": "string", "pattern": "^(ab|c[0-9]){2}x?\\.[^\"q]+$"}`))
	if err != nil {
		t.Fatal(err)
	}
	g, err := Parse(src)
	if err != nil {
		t.Fatalf("%v\n%s", err, src)
	}
	for s, want := range map[string]bool{
		`"abc7.z"`: true, `"c1abx.zz"`: true, `"ab.z"`: false, `"abab.q"`: false, `"ababx."`: false, `"abab.z`: false,
		`"abab.a\\"`: false, "\"abab.a\x01\"": false,
	} {
		if got := matches(g, s); got != want {
			t.Errorf("%s: match %v, want %v\n%s", s, got, want, src)
		}
	}
}

// TestPatternKeepsJSON: `.` and classes of a pattern never take what
// would break the JSON string ('"', '\\', control characters), so the
// answer always parses.
func TestPatternKeepsJSON(t *testing.T) {
	for _, pat := range []string{`^.+$`, `^[ -~]+$`, `^[^a]+$`, `^[\\x00-\\x7F]+$`} {
		src, err := FromJSONSchema([]byte(`{"type": "string", "pattern": "` + pat + `"}`))
		if err != nil {
			t.Fatalf("%s: %v", pat, err)
		}
		g, err := Parse(src)
		if err != nil {
			t.Fatalf("%s: %v\n%s", pat, err, src)
		}
		for _, s := range []string{`"a"b"`, `"a\\"`, "\"a\tb\"", "\"a\x7F\""} {
			if matches(g, s) {
				t.Errorf("%s: %q matches %s", pat, s, src)
			}
		}
		if !matches(g, `"ok"`) {
			t.Errorf("%s: \"ok\" does not match %s", pat, src)
		}
	}
	if _, err := FromJSONSchema([]byte(`{"type": "string", "pattern": "^[\\\\\"]$"}`)); !errors.Is(err, ErrSchema) {
		t.Errorf("a class of only '\\\\' and '\"': %v, want ErrSchema", err)
	}
}
