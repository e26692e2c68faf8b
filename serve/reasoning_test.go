package serve

import (
	"strings"
	"testing"
)

// TestThinkSplit: the reasoning and the answer come apart whatever the
// pieces' boundaries (every split of the reply into two and into single
// bytes), a reply without <think> is all answer, and a prompt that left
// <think> open starts in the reasoning.
func TestThinkSplit(t *testing.T) {
	for _, c := range []struct {
		open                  bool
		reply, reason, answer string
	}{
		{false, "<think>\nLet me see.\n</think>\n\nParis.", "Let me see.\n", "Paris."},
		{false, "  <think>a<b</think>c", "a<b", "c"},
		{false, "Paris, </think> no.", "", "Paris, </think> no."},
		{false, "<thin", "", "<thin"},
		{false, "<think>unclosed </thi", "unclosed </thi", ""},
		{true, "\nI think.\n</think>\n\nYes.", "I think.\n", "Yes."},
		{true, "no close", "no close", ""},
		{false, "", "", ""},
	} {
		splits := [][]string{{c.reply}, strings.Split(c.reply, "")}
		for i := 1; i < len(c.reply); i++ {
			splits = append(splits, []string{c.reply[:i], c.reply[i:]})
		}
		for _, pieces := range splits {
			s := newThinkSplit(c.open)
			var reason, answer strings.Builder
			for _, p := range pieces {
				r, a := s.feed(p)
				reason.WriteString(r)
				answer.WriteString(a)
			}
			r, a := s.flush()
			reason.WriteString(r)
			answer.WriteString(a)
			if reason.String() != c.reason || answer.String() != c.answer {
				t.Errorf("open %v %q: reasoning %q answer %q; want %q %q", c.open, pieces, reason.String(), answer.String(), c.reason, c.answer)
			}
		}
	}
}

// TestReasoningContent: a chat whose reply (forced by a grammar) opens with
// <think>…</think> answers with the reasoning in reasoning_content and the
// rest in content, with reasoning_format auto (what llama.cpp's web UI
// sends; a 400 before) and deepseek, in the message and in the stream's
// deltas; with none, or a server whose format is none, it stays in the
// content. An unknown format is a 400 naming the field.
func TestReasoningContent(t *testing.T) {
	h := start(t, func(o *Options) { o.ReasoningFormat = ReasoningAuto })
	const reply = "<think>\nwhy not</think>\n\nyes"
	req := func(format string) string {
		f := ""
		if format != "" {
			f = `,"reasoning_format":"` + format + `"`
		}
		return `{"messages":[{"role":"user","content":"ok?"}],"max_tokens":40,"grammar":"root ::= \"<think>\\nwhy not</think>\\n\\nyes\""` + f + `}`
	}
	for _, c := range []struct{ format, reason, content string }{
		{"", "why not", "yes"}, {"auto", "why not", "yes"}, {"deepseek", "why not", "yes"}, {"none", "", reply},
	} {
		r := h.do("/v1/chat/completions", req(c.format), 200)
		msg := r["choices"].([]any)[0].(map[string]any)["message"].(map[string]any)
		if msg["content"] != c.content || (msg["reasoning_content"] != nil || c.reason != "") && msg["reasoning_content"] != c.reason {
			t.Errorf("reasoning_format %q: message %v", c.format, msg)
		}
		var reason, content strings.Builder
		for _, ev := range h.sseData("/v1/chat/completions", strings.Replace(req(c.format), "{", `{"stream":true,`, 1)) {
			d, _ := ev["choices"].([]any)[0].(map[string]any)["delta"].(map[string]any)
			if s, ok := d["reasoning_content"].(string); ok {
				reason.WriteString(s)
			}
			if s, ok := d["content"].(string); ok {
				content.WriteString(s)
			}
		}
		if strings.TrimSpace(reason.String()) != c.reason || content.String() != c.content {
			t.Errorf("reasoning_format %q stream: reasoning %q content %q", c.format, reason.String(), content.String())
		}
	}
	r := h.do("/v1/chat/completions", req("sideways"), 400)
	if e, _ := r["error"].(map[string]any); e == nil || !strings.Contains(e["message"].(string), "reasoning_format") {
		t.Errorf("reasoning_format sideways: %v", r)
	}
	plain := start(t, nil)
	msg := plain.do("/v1/chat/completions", req(""), 200)["choices"].([]any)[0].(map[string]any)["message"].(map[string]any)
	if msg["content"] != reply || msg["reasoning_content"] != nil {
		t.Errorf("server format none: %v", msg)
	}
}

// TestReasoningLegacy: reasoning_format deepseek-legacy (a 400 before)
// returns the reasoning as reasoning_content and leaves the reply, tags and
// all, in the content; streamed, the deltas carry it in the content only,
// as llama-server's reasoning_in_content.
func TestReasoningLegacy(t *testing.T) {
	h := start(t, nil)
	const reply = "<think>\nwhy not</think>\n\nyes"
	const body = `{"messages":[{"role":"user","content":"ok?"}],"max_tokens":40,"reasoning_format":"deepseek-legacy","grammar":"root ::= \"<think>\\nwhy not</think>\\n\\nyes\""}`
	msg := h.do("/v1/chat/completions", body, 200)["choices"].([]any)[0].(map[string]any)["message"].(map[string]any)
	if msg["content"] != reply || msg["reasoning_content"] != "why not" {
		t.Errorf("message %v", msg)
	}
	var content strings.Builder
	for _, ev := range h.sseData("/v1/chat/completions", strings.Replace(body, "{", `{"stream":true,`, 1)) {
		d, _ := ev["choices"].([]any)[0].(map[string]any)["delta"].(map[string]any)
		if d["reasoning_content"] != nil {
			t.Errorf("a reasoning_content delta: %v", d)
		}
		if s, ok := d["content"].(string); ok {
			content.WriteString(s)
		}
	}
	if content.String() != reply {
		t.Errorf("stream content %q", content.String())
	}
}
