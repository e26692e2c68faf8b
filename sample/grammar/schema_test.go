package grammar

import (
	"errors"
	"strings"
	"testing"
)

// TestLlamaSchemaIntegration runs llama.cpp's test_schema cases
// (tests/test-grammar-integration.cpp at 3f545becc): the schema's grammar
// matches the passing strings and none of the failing ones. Schemas with a
// pattern are refused with ErrSchema (pipe has no regex conversion).
func TestLlamaSchemaIntegration(t *testing.T) {
	for _, c := range llamaCases(t, "schema") {
		src, err := FromJSONSchema([]byte(c.Text))
		if strings.Contains(c.Text, `"pattern"`) {
			if !errors.Is(err, ErrSchema) {
				t.Errorf("%s: pattern: %v, want ErrSchema", c.Desc, err)
			}
			continue
		}
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
	for _, bad := range []string{`{"$ref": "https://example.com/s.json"}`, `{"type": "thing"}`, `{"type": "string", "pattern": "^a+$"}`, `{"type":`} {
		if _, err := FromJSONSchema([]byte(bad)); !errors.Is(err, ErrSchema) {
			t.Errorf("%s: %v, want ErrSchema", bad, err)
		}
	}
}
