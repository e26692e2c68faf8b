package grammar

import (
	"encoding/hex"
	"encoding/json"
	"errors"
	"math"
	"math/rand/v2"
	"os"
	"strings"
	"testing"
)

type llamaCase struct {
	Kind    string   `json:"kind"`
	Desc    string   `json:"desc"`
	Text    string   `json:"text"`
	PassHex []string `json:"pass_hex"`
	FailHex []string `json:"fail_hex"`
}

func llamaCases(t *testing.T, kind string) []llamaCase {
	t.Helper()
	raw, err := os.ReadFile("testdata/llama-integration.json")
	if err != nil {
		t.Fatal(err)
	}
	var f struct{ Cases []llamaCase }
	if err := json.Unmarshal(raw, &f); err != nil {
		t.Fatal(err)
	}
	var out []llamaCase
	for _, c := range f.Cases {
		if c.Kind == kind {
			out = append(out, c)
		}
	}
	if len(out) == 0 {
		t.Fatalf("no %s cases", kind)
	}
	return out
}

// matches is llama.cpp's match_string: every code point accepted, and some
// stack complete at the end.
func matches(g *Grammar, s string) bool {
	mt := NewMatcher(g, NewVocab(nil, nil))
	return mt.AcceptString(s) == nil && mt.Done()
}

func checkStrings(t *testing.T, g *Grammar, c llamaCase) {
	t.Helper()
	for _, h := range c.PassHex {
		s, _ := hex.DecodeString(h)
		if !matches(g, string(s)) {
			t.Errorf("%s: %q should match", c.Desc, s)
		}
	}
	for _, h := range c.FailHex {
		s, _ := hex.DecodeString(h)
		if matches(g, string(s)) {
			t.Errorf("%s: %q should not match", c.Desc, s)
		}
	}
}

// TestLlamaGrammarIntegration runs llama.cpp's test_grammar cases
// (tests/test-grammar-integration.cpp at 3f545becc, extracted into
// testdata): the passing strings match, the failing ones do not.
func TestLlamaGrammarIntegration(t *testing.T) {
	for _, c := range llamaCases(t, "grammar") {
		g, err := Parse(c.Text)
		if err != nil {
			t.Errorf("%s: %v", c.Desc, err)
			continue
		}
		checkStrings(t, g, c)
	}
}

func TestParseErrors(t *testing.T) {
	cases := []struct{ src, want string }{
		{"root ::= \"a\"\nfoo ::= [a-\n", "line 3, column 1: unexpected end of input"},
		{"root ::= \"a\" | ( \"b\"", "expecting ')'"},
		{"root ::= \"a\\q\"", "line 1, column 12: unknown escape"},
		{"root := \"a\"", "line 1, column 6: expecting ::="},
		{"root ::= * \"a\"", "line 1, column 10: expecting preceding item"},
		{"root ::= \"a\"{2,1}", "below its minimum"},
		{"root ::= \"a\"{3001}", "exceeds sane defaults"},
		{"root ::= \"\\x4\"", "expecting 2 hex chars"},
		{"root ::= foo", "undefined rule identifier 'foo'"},
		{"rot ::= \"a\"", "'root'"},
		{"root ::= \"a\" | root \"a\"", "left recursion"},
		{"root ::= asdf\nasdf ::= \"a\" | foo \"b\"\nfoo ::= \"c\" | empty asdf \"d\" | \"e\"\nempty ::= \"blah\" | ", "left recursion"},
		{"root ::= <[12]>", "token references are not supported"},
		{"root ::= \"a\" )", "line 1, column 14: expecting newline or end"},
		{"", "empty grammar"},
	}
	for _, c := range cases {
		_, err := Parse(c.src)
		if !errors.Is(err, ErrSyntax) || !strings.Contains(err.Error(), c.want) {
			t.Errorf("Parse(%q) = %v, want ErrSyntax containing %q", c.src, err, c.want)
		}
	}
}

func TestEscapesAndClasses(t *testing.T) {
	g, err := Parse(`root ::= "\x41\u00e9\U0001F600\n\t\\\"" [^a-c\]] . # comment
`)
	if err != nil {
		t.Fatal(err)
	}
	for s, want := range map[string]bool{
		"Aé😀\n\t\\\"dx": true, "Aé😀\n\t\\\"]x": false, "Aé😀\n\t\\\"bx": false,
		"Aé😀\n\t\\\"d": false, "Aé😀\n\t\\\"d€": true,
	} {
		if got := matches(g, s); got != want {
			t.Errorf("%q: match %v, want %v", s, got, want)
		}
	}
}

// toyVocab is every 1- and 2-byte string over an alphabet, a few longer
// tokens, split UTF-8 characters and an EOG token (id 0).
func toyVocab() ([][]byte, []int32) {
	alpha := []string{"{", "}", "[", "]", "\"", ":", ",", " ", "\n", "a", "b", "1", "0", "-", ".", "e", "t", "r", "u", "n", "l", "\\", "é"}
	pieces := [][]byte{[]byte("<eos>")}
	for _, a := range alpha {
		pieces = append(pieces, []byte(a))
		for _, b := range alpha {
			pieces = append(pieces, []byte(a+b))
		}
	}
	for _, s := range []string{"true", "false", "null", "\": \"", "\"}", "{\"", "   ", "é"[:1], "é"[1:], "€"[:2], "😀"[:1], "😀"[1:3]} {
		pieces = append(pieces, []byte(s))
	}
	pieces = append(pieces, nil, []byte("a\x00"))
	return pieces, []int32{0}
}

// allowedSlow is the mask by definition: each token's bytes fed one by one
// from the current state.
func allowedSlow(mt *Matcher, id int32) bool {
	if mt.v.eog[id] {
		return mt.Done()
	}
	p := mt.v.piece(id)
	if len(p) == 0 {
		return false
	}
	s := mt.cur
	for _, b := range p {
		var ok bool
		if b == 0 {
			return false
		}
		if s, ok = mt.step(s, b); !ok {
			return false
		}
	}
	return mt.endOK(s)
}

// TestMaskMatchesDefinition walks random paths through the JSON grammar
// on a toy vocabulary: at every step the trie walk's mask equals the
// token-by-token definition, and a chosen allowed token is accepted.
func TestMaskMatchesDefinition(t *testing.T) {
	g, err := Parse(JSONGrammar)
	if err != nil {
		t.Fatal(err)
	}
	pieces, eog := toyVocab()
	v := NewVocab(pieces, eog)
	rng := rand.New(rand.NewPCG(1, 2))
	for run := range 40 {
		mt := NewMatcher(g, v)
		for step := range 60 {
			logits := make([]float32, v.Size()+3)
			if err := mt.Apply(logits); err != nil {
				t.Fatal(err)
			}
			var ok []int32
			for id := range logits {
				allowed := !math.IsInf(float64(logits[id]), -1)
				if id < v.Size() && allowed != allowedSlow(mt, int32(id)) {
					t.Fatalf("run %d step %d: token %q: mask %v, definition %v", run, step, pieces[id], allowed, !allowed)
				}
				if id >= v.Size() && allowed {
					t.Fatalf("id %d beyond the vocabulary allowed", id)
				}
				if allowed {
					ok = append(ok, int32(id))
				}
			}
			if len(ok) == 0 {
				t.Fatalf("run %d step %d: nothing allowed", run, step)
			}
			id := ok[rng.IntN(len(ok))]
			if err := mt.Accept(id); err != nil {
				t.Fatalf("run %d step %d: accept allowed %q: %v", run, step, pieces[id], err)
			}
			if v.eog[id] {
				break
			}
		}
	}
}

func TestAcceptRejects(t *testing.T) {
	g, err := Parse(`root ::= "ab"`)
	if err != nil {
		t.Fatal(err)
	}
	v := NewVocab([][]byte{[]byte("<eos>"), []byte("a"), []byte("b"), []byte("ab")}, []int32{0})
	mt := NewMatcher(g, v)
	if err := mt.Accept(0); !errors.Is(err, ErrRejected) {
		t.Errorf("EOG before the end: %v, want ErrRejected", err)
	}
	if err := mt.Accept(2); !errors.Is(err, ErrRejected) {
		t.Errorf("b first: %v, want ErrRejected", err)
	}
	if err := mt.Accept(3); err != nil {
		t.Fatal(err)
	}
	logits := make([]float32, 4)
	mt.Apply(logits)
	if !math.IsInf(float64(logits[1]), -1) || math.IsInf(float64(logits[0]), -1) {
		t.Errorf("after ab: logits %v, want only EOG allowed", logits)
	}
	if err := mt.Accept(0); err != nil {
		t.Errorf("EOG at the end: %v", err)
	}
}

// TestInvalidUTF8Rejected: `.` takes any code point but no invalid UTF-8
// (llama.cpp would decode these bytes into code points and take them).
func TestInvalidUTF8Rejected(t *testing.T) {
	g, err := Parse(`root ::= .+`)
	if err != nil {
		t.Fatal(err)
	}
	for s, want := range map[string]bool{
		"é😀\U0010FFFF": true, "\xc0\x80": false, "\xc1\xbf": false, "\xe0\x80\x80": false,
		"\xed\xa0\x80": false, "\xf0\x80\x80\x80": false, "\xf4\x90\x80\x80": false, "\xf5\x80\x80\x80": false,
		"\x80": false, "a\xe2\x82": false,
	} {
		if got := matches(g, s); got != want {
			t.Errorf("%q: match %v, want %v", s, got, want)
		}
	}
}

// TestPartialCharacterNeedsCompletion: a token that ends inside a character
// is allowed only when some token of the vocabulary completes it into one
// the grammar takes.
func TestPartialCharacterNeedsCompletion(t *testing.T) {
	g, err := Parse(`root ::= [^a]+`)
	if err != nil {
		t.Fatal(err)
	}
	euro := "€" // e2 82 ac
	for _, c := range []struct {
		pieces []string
		want   bool
	}{
		{[]string{"<eos>", euro[:1], "b"}, false},                     // nothing completes e2
		{[]string{"<eos>", euro[:1], euro[:2], "b"}, false},           // no token starts with a continuation byte
		{[]string{"<eos>", euro[:1], euro[1:2], euro[2:], "b"}, true}, // byte by byte
		{[]string{"<eos>", euro[:1], euro[1:], "b"}, true},
		{[]string{"<eos>", "\xed", "\xa0\x80", "b"}, false}, // only a surrogate would complete it
	} {
		pieces := make([][]byte, len(c.pieces))
		for i, p := range c.pieces {
			pieces[i] = []byte(p)
		}
		mt := NewMatcher(g, NewVocab(pieces, []int32{0}))
		logits := make([]float32, len(pieces))
		mt.Apply(logits)
		if got := !math.IsInf(float64(logits[1]), -1); got != c.want {
			t.Errorf("%q: lead byte allowed %v, want %v", c.pieces, got, c.want)
		}
	}
}
