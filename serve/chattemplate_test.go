package serve

import (
	"strings"
	"testing"
	"time"
)

// TestChatContinuation: as llama-server, an assistant's last message is
// continued (rendered as the start of the reply, its text parts joined by
// a blank line), and so is any last message with continue_final_message
// true and add_generation_prompt false; add_generation_prompt false alone
// drops the generation prompt; both true, or two assistant messages at
// the end, are 400s naming the field (all were 400s or ignored before).
func TestChatContinuation(t *testing.T) {
	h := startTools(t, "", "meta-llama-Llama-3.1-8B-Instruct.jinja")
	const head = `"messages":[{"role":"system","content":"Book"},{"role":"user","content":"What is the best book"}`
	const turn = "<|start_header_id|>user<|end_header_id|>\n\nWhat is the best book<|eot_id|>"
	const gen = "<|start_header_id|>assistant<|end_header_id|>\n\n"
	prompt := func(body string) string {
		t.Helper()
		p := h.do("/apply-template", body, 200)["prompt"].(string)
		chat := h.do("/v1/chat/completions", strings.Replace(body, "{", `{"max_tokens":1,"verbose":true,`, 1), 200)
		if vp, _ := chat["__verbose"].(map[string]any)["prompt"].(string); !strings.HasSuffix(vp, p) {
			t.Errorf("%s: chat prompt %q does not end with /apply-template's %q", body, vp, p)
		}
		return p
	}
	for _, c := range []struct{ body, end string }{
		{`{` + head + `]}`, turn + gen},
		{`{` + head + `],"add_generation_prompt":false}`, turn},
		{`{` + head + `,{"role":"assistant","content":"Whill"}]}`, turn + gen + "Whill"},
		{`{` + head + `,{"role":"assistant","content":[{"type":"text","text":"Wh"},{"type":"text","text":"ill"}]}]}`, turn + gen + "Wh\n\nill"},
		{`{"add_generation_prompt":false,"continue_final_message":true,` + head + `,{"role":"assistant","content":"Whill"}]}`, turn + gen + "Whill"},
		{`{"continue_final_message":"content","add_generation_prompt":false,` + head + `]}`, "<|eot_id|>" + gen + "What is the best book"},
	} {
		if p := prompt(c.body); !strings.HasSuffix(p, c.end) {
			t.Errorf("%s:\n prompt %q\n want the end %q", c.body, p, c.end)
		}
	}
	for _, c := range []struct{ body, field string }{
		{`{"continue_final_message":true,` + head + `,{"role":"assistant","content":"Hello"}]}`, "continue_final_message"},
		{`{` + head + `,{"role":"assistant","content":"a"},{"role":"assistant","content":"b"}]}`, "messages"},
	} {
		for _, path := range []string{"/apply-template", "/v1/chat/completions"} {
			r := h.do(path, c.body, 400)
			if e, _ := r["error"].(map[string]any); e == nil || !strings.Contains(e["message"].(string), c.field) {
				t.Errorf("%s %s: %v", path, c.body, r)
			}
		}
	}
}

// TestChatTemplateVars: a Jinja template sees today's date as llama.cpp
// sets it (date_string, datetime: Llama 3.x and firefunction write it into
// the system turn instead of their 26 Jul 2024) and a request's
// chat_template_kwargs beside enable_thinking, over the date.
func TestChatTemplateVars(t *testing.T) {
	h := startTools(t, "", "meta-llama-Llama-3.3-70B-Instruct.jinja")
	const msgs = `"messages":[{"role":"user","content":"What is today?"}]`
	before := time.Now()
	p := h.do("/apply-template", `{`+msgs+`}`, 200)["prompt"].(string)
	if d1, d2 := before.Format("02 Jan 2006"), time.Now().Format("02 Jan 2006"); !strings.Contains(p, "Today Date: "+d1) && !strings.Contains(p, "Today Date: "+d2) {
		t.Errorf("no date_string %s in %q", d1, p)
	}
	p = h.do("/apply-template", `{`+msgs+`,"chat_template_kwargs":{"date_string":"01 Jan 2000"}}`, 200)["prompt"].(string)
	if !strings.Contains(p, "Today Date: 01 Jan 2000") {
		t.Errorf("chat_template_kwargs.date_string: %q", p)
	}
	fw := startTools(t, "", "fireworks-ai-llama-3-firefunction-v2.jinja")
	p = fw.do("/apply-template", `{`+msgs+`}`, 200)["prompt"].(string)
	if d1, d2 := before.Format("Jan 02 2006"), time.Now().Format("Jan 02 2006"); !strings.Contains(p, d1) && !strings.Contains(p, d2) {
		t.Errorf("no datetime %s in %q", d1, p)
	}
}
