package serve

import (
	"strings"
	"testing"
)

// TestSeveralChoices: n=2 (a 400 before) answers two choices, indexed 0
// and 1, the first the n=1 answer of the same seed, the second the answer
// of the next seed; usage counts the prompt once and both choices' tokens;
// a grammar holds in every choice; n out of 1..16, or n > 1 streamed, is a
// 400 naming n.
func TestSeveralChoices(t *testing.T) {
	h := start(t, nil)
	const msgs = `"messages":[{"role":"system","content":"Book"},{"role":"user","content":"What is the best book"}],"max_tokens":8,"temperature":1`
	content := func(r map[string]any, i int) string {
		return r["choices"].([]any)[i].(map[string]any)["message"].(map[string]any)["content"].(string)
	}
	one := h.do("/v1/chat/completions", `{`+msgs+`,"seed":7}`, 200)
	next := h.do("/v1/chat/completions", `{`+msgs+`,"seed":8}`, 200)
	two := h.do("/v1/chat/completions", `{`+msgs+`,"seed":7,"n":2,"id_slot":0}`, 200)
	cs := two["choices"].([]any)
	if len(cs) != 2 || cs[0].(map[string]any)["index"] != float64(0) || cs[1].(map[string]any)["index"] != float64(1) {
		t.Fatalf("choices %v", cs)
	}
	if content(two, 0) != content(one, 0) || content(two, 1) != content(next, 0) {
		t.Errorf("choices %q %q, want seed 7's %q and seed 8's %q", content(two, 0), content(two, 1), content(one, 0), content(next, 0))
	}
	u, u1 := two["usage"].(map[string]any), one["usage"].(map[string]any)
	if u["prompt_tokens"] != u1["prompt_tokens"] || u["completion_tokens"] != float64(16) || u["total_tokens"] != u1["prompt_tokens"].(float64)+16 {
		t.Errorf("usage %v (one choice: %v)", u, u1)
	}
	g := h.do("/v1/completions", `{"prompt":"x","max_tokens":8,"temperature":1,"n":3,"grammar":"root ::= [a-c]+"}`, 200)
	for _, c := range g["choices"].([]any) {
		if txt := c.(map[string]any)["text"].(string); strings.Trim(txt, "abc") != "" || txt == "" {
			t.Errorf("grammar choice %q", txt)
		}
	}
	for _, bad := range []string{`"n":0`, `"n":17`, `"n":2,"stream":true`} {
		e := h.do("/v1/chat/completions", `{`+msgs+`,`+bad+`}`, 400)
		if m, _ := e["error"].(map[string]any); m == nil || !strings.Contains(m["message"].(string), "n=") {
			t.Errorf("%s: %v", bad, e)
		}
	}
}
