package serve

import (
	"strings"
	"testing"
)

// TestReasoningBudget: with a reasoning budget the grammar-shaped reply's
// reasoning ([a-z ]* after <think>) ends where the budget says, with the
// budget message and </think> forced and the answer after it: 0 tokens
// gives an empty reasoning, 2 at most two tokens' text; the request's
// reasoning_budget_tokens (or thinking_budget_tokens) wins over the
// server's --reasoning-budget; a budget below -1 is a 400 naming the field.
func TestReasoningBudget(t *testing.T) {
	zero := 0
	h := start(t, func(o *Options) { o.ReasoningFormat = ReasoningAuto; o.ReasoningBudget = &zero })
	req := func(extra string) map[string]any {
		t.Helper()
		r := h.do("/v1/chat/completions", `{"messages":[{"role":"user","content":"ok?"}],"max_tokens":60,`+
			`"grammar":"root ::= \"<think>\" [a-z ]* \"</think>\" \"yes\""`+extra+`}`, 200)
		return r["choices"].([]any)[0].(map[string]any)
	}
	msg := func(c map[string]any) (string, string) {
		m := c["message"].(map[string]any)
		r, _ := m["reasoning_content"].(string)
		s, _ := m["content"].(string)
		return r, s
	}
	if r, s := msg(req("")); r != "" || s != "yes" {
		t.Errorf("server budget 0: reasoning %q content %q, want \"\" \"yes\"", r, s)
	}
	for _, f := range []string{"reasoning_budget_tokens", "thinking_budget_tokens"} {
		r, s := msg(req(`,"` + f + `":2`))
		if s != "yes" || r == "" || len(r) > 2*8 {
			t.Errorf("%s 2: reasoning %q content %q", f, r, s)
		}
	}
	c := req(`,"reasoning_budget_tokens":3,"reasoning_budget_message":" ok done"`)
	if r, s := msg(c); !strings.HasSuffix(r, " ok done") || s != "yes" || c["finish_reason"] != "stop" {
		t.Errorf("budget 3 with a message: reasoning %q content %q finish %v", r, s, c["finish_reason"])
	}
	// -1 is the server's budget: 0 here
	if r, s := msg(req(`,"reasoning_budget_tokens":-1`)); r != "" || s != "yes" {
		t.Errorf("-1 (the server's 0): reasoning %q content %q", r, s)
	}
	e := h.do("/v1/chat/completions", `{"messages":[{"role":"user","content":"ok?"}],"reasoning_budget_tokens":-2}`, 400)
	if m, _ := e["error"].(map[string]any); m == nil || !strings.Contains(m["message"].(string), "reasoning_budget_tokens") {
		t.Errorf("budget -2: %v", e)
	}
}

// TestThinkBudgetStates: the budget counts only inside a reasoning, forces
// its sequence after the token that completes a character, and counts
// again after a second <think>.
func TestThinkBudgetStates(t *testing.T) {
	pieces := map[int32]string{1: "<th", 2: "ink>", 3: "a", 4: "\xe2\x82", 5: "\xac", 6: "</think>", 7: "b", 8: "X", 9: "Y"}
	b := &thinkBudget{piece: func(id int32) []byte { return []byte(pieces[id]) }, forced: []int32{8, 9}, budget: 1}
	accept := func(ids ...int32) {
		for _, id := range ids {
			if err := b.Accept(id); err != nil {
				t.Fatal(err)
			}
		}
	}
	accept(3, 3)
	if b.state != budgetIdle {
		t.Fatalf("before <think>: state %d", b.state)
	}
	accept(1, 2)
	if b.state != budgetCounting {
		t.Fatalf("after <th ink>: state %d", b.state)
	}
	accept(4) // the budget is spent inside a character
	if b.state != budgetWaitUTF8 {
		t.Fatalf("spent mid-character: state %d", b.state)
	}
	accept(5)
	logits := make([]float32, 10)
	if err := b.Apply(logits); err != nil || b.state != budgetForcing {
		t.Fatalf("forcing: state %d, %v", b.state, err)
	}
	for i, l := range logits {
		if (i == 8) != (l == 0) {
			t.Fatalf("forcing 8: logits %v", logits)
		}
	}
	accept(8, 9)
	if b.state != budgetDone {
		t.Fatalf("after the forced sequence: state %d", b.state)
	}
	accept(1, 2, 6)
	if b.state != budgetDone {
		t.Fatalf("a second reasoning closed naturally: state %d", b.state)
	}
	for _, c := range []struct {
		p    string
		want bool
	}{{"a", true}, {"\xe2\x82", false}, {"\xe2\x82\xac", true}, {"\xf0\x9f", false}, {"", true}} {
		if utf8Complete([]byte(c.p)) != c.want {
			t.Errorf("utf8Complete(%q) != %v", c.p, c.want)
		}
	}
}
