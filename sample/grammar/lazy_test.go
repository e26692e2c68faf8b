package grammar

import (
	"errors"
	"math"
	"testing"
)

func lazyVocab() *Vocab {
	pieces := []string{"<eos>", "hi", " ", "<tool>", "{", "}", "\"", "a", "x", "<call", ">", "[", "]"}
	b := make([][]byte, len(pieces))
	for i, p := range pieces {
		b[i] = []byte(p)
	}
	return NewVocab(b, []int32{0})
}

func allowedIDs(t *testing.T, l *Lazy, n int) []int32 {
	t.Helper()
	logits := make([]float32, n)
	if err := l.Apply(logits); err != nil {
		t.Fatal(err)
	}
	var ok []int32
	for id, x := range logits {
		if !math.IsInf(float64(x), -1) {
			ok = append(ok, int32(id))
		}
	}
	return ok
}

// TestLazyWordTrigger: everything is allowed until the trigger word has
// been generated; then the grammar, which the trigger's own text starts,
// masks.
func TestLazyWordTrigger(t *testing.T) {
	g, err := Parse(`root ::= "<tool>" "{" "a"* "}"`)
	if err != nil {
		t.Fatal(err)
	}
	v := lazyVocab()
	l, err := NewLazy(g, v, []Trigger{{Kind: TriggerWord, Value: "<tool>"}})
	if err != nil {
		t.Fatal(err)
	}
	for _, id := range []int32{1, 2, 7} { // "hi", " ", "a": no trigger yet
		if got := allowedIDs(t, l, v.Size()); len(got) != v.Size() {
			t.Fatalf("awaiting: %d of %d allowed", len(got), v.Size())
		}
		if err := l.Accept(id); err != nil {
			t.Fatal(err)
		}
	}
	if err := l.Accept(3); err != nil || !l.Triggered() { // "<tool>"
		t.Fatalf("after the trigger: %v, triggered %v", err, l.Triggered())
	}
	if got := allowedIDs(t, l, v.Size()); len(got) != 1 || got[0] != 4 {
		t.Fatalf("after <tool>: allowed %v, want only {", got)
	}
	for _, id := range []int32{4, 7, 5} {
		if err := l.Accept(id); err != nil {
			t.Fatal(err)
		}
	}
	if got := allowedIDs(t, l, v.Size()); len(got) != 1 || got[0] != 0 {
		t.Fatalf("complete: allowed %v, want only EOG", got)
	}
}

// TestLazyPatternTrigger: a pattern's first capturing group starts the
// grammar, even in the middle of a token; a trigger token starts it too.
func TestLazyPatternTrigger(t *testing.T) {
	g, err := Parse(`root ::= "[" "x"* "]"`)
	if err != nil {
		t.Fatal(err)
	}
	v := lazyVocab()
	l, err := NewLazy(g, v, []Trigger{{Kind: TriggerPattern, Value: `<call>\s*(\[)`}})
	if err != nil {
		t.Fatal(err)
	}
	for _, id := range []int32{9, 10, 2} { // "<call", ">", " "
		if err := l.Accept(id); err != nil || l.Triggered() {
			t.Fatalf("token %d: %v, triggered %v", id, err, l.Triggered())
		}
	}
	if err := l.Accept(11); err != nil || !l.Triggered() { // "[" completes the pattern
		t.Fatalf("[: %v, triggered %v", err, l.Triggered())
	}
	if got := allowedIDs(t, l, v.Size()); len(got) != 2 || got[0] != 8 || got[1] != 12 {
		t.Fatalf("after [: allowed %v, want x and ]", got)
	}
	tk, err := NewLazy(g, v, []Trigger{{Kind: TriggerToken, Token: 11}})
	if err != nil {
		t.Fatal(err)
	}
	if err := tk.Accept(11); err != nil || !tk.Triggered() {
		t.Fatalf("trigger token: %v, triggered %v", err, tk.Triggered())
	}
	full, err := NewLazy(g, v, []Trigger{{Kind: TriggerPatternFull, Value: `\[`}})
	if err != nil {
		t.Fatal(err)
	}
	full.Accept(1) // "hi": the whole output must match, so "hi[" never does
	full.Accept(11)
	if full.Triggered() {
		t.Fatal("a full pattern triggered on part of the output")
	}
}

func TestLazyErrors(t *testing.T) {
	g, _ := Parse(`root ::= "a"`)
	v := lazyVocab()
	for _, tr := range [][]Trigger{nil, {{Kind: TriggerPattern, Value: `(?=a)`}}, {{Kind: 7, Value: "a"}}, {{Kind: TriggerToken, Token: 99}}} {
		if _, err := NewLazy(g, v, tr); !errors.Is(err, ErrTrigger) {
			t.Errorf("%v: %v, want ErrTrigger", tr, err)
		}
	}
	l, _ := NewLazy(g, v, []Trigger{{Kind: TriggerWord, Value: "x"}})
	if err := l.Accept(8); !errors.Is(err, ErrRejected) { // "x" starts a grammar that wants "a"
		t.Errorf("trigger text the grammar rejects: %v, want ErrRejected", err)
	}
}
