package serve

import (
	"encoding/json"
	"os"
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

// TestServerTemplateKwargs: the server's TemplateKwargs (llama-server's
// --chat-template-kwargs) reach every chat's Jinja template under the
// request's own chat_template_kwargs, and their enable_thinking false
// renders without thinking (as --reasoning off) unless the request turns
// it on; a non-bool enable_thinking there stops New.
func TestServerTemplateKwargs(t *testing.T) {
	kw := map[string]json.RawMessage{"date_string": json.RawMessage(`"01 Jan 2000"`), "enable_thinking": json.RawMessage(`false`)}
	withKw := func(o *Options) { o.TemplateKwargs = kw }
	h := startJinja(t, "meta-llama-Llama-3.3-70B-Instruct.jinja", withKw)
	const msgs = `"messages":[{"role":"user","content":"What is today?"}]`
	if p := h.do("/apply-template", `{`+msgs+`}`, 200)["prompt"].(string); !strings.Contains(p, "Today Date: 01 Jan 2000") {
		t.Errorf("server kwargs: %q", p)
	}
	if p := h.do("/apply-template", `{`+msgs+`,"chat_template_kwargs":{"date_string":"02 Feb 2002"}}`, 200)["prompt"].(string); !strings.Contains(p, "Today Date: 02 Feb 2002") {
		t.Errorf("the request's over the server's: %q", p)
	}
	on := startJinja(t, "Qwen-Qwen3-0.6B.jinja", nil).do("/apply-template", `{`+msgs+`}`, 200)["prompt"].(string)
	q := startJinja(t, "Qwen-Qwen3-0.6B.jinja", withKw)
	off := q.do("/apply-template", `{`+msgs+`}`, 200)["prompt"].(string)
	if !strings.HasSuffix(off, "<think>\n\n</think>\n\n") || strings.HasSuffix(on, "</think>\n\n") {
		t.Errorf("server enable_thinking false: %q (without: %q)", off, on)
	}
	if p := q.do("/apply-template", `{`+msgs+`,"chat_template_kwargs":{"enable_thinking":true}}`, 200)["prompt"].(string); p != on {
		t.Errorf("the request's enable_thinking true: %q, want %q", p, on)
	}
	o := Options{Model: q.m, Sampling: greedy, TemplateKwargs: map[string]json.RawMessage{"enable_thinking": json.RawMessage(`"no"`)}}
	if _, err := New(o); err == nil || !strings.Contains(err.Error(), "TemplateKwargs") {
		t.Errorf("New with a bad enable_thinking: %v", err)
	}
}

// startJinja serves the tiny model with one of llama.cpp's templates as
// Jinja and the options tune sets.
func startJinja(t *testing.T, template string, tune func(*Options)) *harness {
	t.Helper()
	src, err := os.ReadFile("../testdata/chat-templates/llamacpp/" + template)
	if err != nil {
		t.Fatal(err)
	}
	return start(t, func(o *Options) {
		if err := o.Model.Tokenizer().UseJinja(string(src), template); err != nil {
			t.Fatal(err)
		}
		if tune != nil {
			tune(o)
		}
	})
}
