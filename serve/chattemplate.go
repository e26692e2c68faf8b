package serve

import (
	"context"
	"encoding/json"
	"time"

	"github.com/pipe-engine/pipe/tokenizer"
)

// A chat's template fields, as llama-server's oaicompat_chat_params_parse
// reads them (tools/server/server-common.cpp at 3f545becc):
// add_generation_prompt (default true), continue_final_message (true or
// "content": the last message is rendered as the start of the reply, not
// as a turn), an assistant's last message continued the same way (llama-
// server's --prefill-assistant, on by default), and chat_template_kwargs,
// the Jinja template's extra variables beside the date (date_string,
// datetime) that llama.cpp's common_chat_extra_context sets.

// chatTemplateFields are a chat request's template fields.
type chatTemplateFields struct {
	AddGenerationPrompt  *bool                      `json:"add_generation_prompt"`
	ContinueFinalMessage json.RawMessage            `json:"continue_final_message"`
	Kwargs               map[string]json.RawMessage `json:"chat_template_kwargs"`
}

// parse sets the job's rendering from the fields and the request's
// messages (in, as given; j.messages, as the tokenizer renders them).
func (f *chatTemplateFields) parse(in []chatMessage, j *job) error {
	var err error
	if j.think, j.vars, err = templateKwargs(f.Kwargs); err != nil {
		return err
	}
	add := f.AddGenerationPrompt == nil || *f.AddGenerationPrompt
	cont, err := continuation(f.ContinueFinalMessage)
	if err != nil {
		return err
	}
	n := len(in)
	if !cont && n > 0 && in[n-1].Role == "assistant" {
		if n >= 2 && in[n-2].Role == "assistant" {
			return fieldErr("messages", "messages: Cannot have 2 or more assistant messages at the end of the list.")
		}
		cont, add = true, false
	}
	if cont && add {
		return fieldErr("continue_final_message", "continue_final_message: Cannot set both add_generation_prompt and continue_final_message to true.")
	}
	if !cont {
		j.noGenPrompt = !add
		return nil
	}
	prefill := in[n-1].Content.prefill()
	j.prefill, j.messages = &prefill, j.messages[:n-1]
	return nil
}

// continuation reads continue_final_message as llama.cpp's
// common_chat_continuation_parse: true or "content" continue the last
// message; "reasoning_content" (continuing a reasoning) pipe cannot do;
// anything else is no continuation.
func continuation(v json.RawMessage) (bool, error) {
	if isNull(v) {
		return false, nil
	}
	var b bool
	if json.Unmarshal(v, &b) == nil {
		return b, nil
	}
	var s string
	if json.Unmarshal(v, &s) == nil {
		switch s {
		case "content":
			return true, nil
		case "reasoning_content":
			return false, fieldErr("continue_final_message", `continue_final_message: "reasoning_content" is not supported: pipe serve continues a message's content`)
		}
	}
	return false, nil
}

// templateKwargs reads a request's chat_template_kwargs: enable_thinking (a
// bool; nil when not given) turns the template's thinking on or off, for
// the built-in renderers too; every other key is a variable of a Jinja
// template, as llama-server passes it.
func templateKwargs(kw map[string]json.RawMessage) (*bool, map[string]json.RawMessage, error) {
	var think *bool
	var vars map[string]json.RawMessage
	for k, v := range kw {
		if k != "enable_thinking" {
			if vars == nil {
				vars = map[string]json.RawMessage{}
			}
			vars[k] = v
			continue
		}
		var b bool
		if err := json.Unmarshal(v, &b); err != nil {
			return nil, nil, fieldErr("chat_template_kwargs", "chat_template_kwargs.enable_thinking: want true or false")
		}
		think = &b
	}
	return think, vars, nil
}

// noThink is the server's --no-think unless the request's enable_thinking
// says otherwise.
func noThink(server bool, think *bool) bool {
	if think != nil {
		return !*think
	}
	return server
}

// withKwargs sets the job's template variables to the server's
// TemplateKwargs with the request's over them, and returns whether the
// chat renders without thinking: the request's enable_thinking, else the
// server's kwargs', else NoThink.
func (o *Options) withKwargs(j *job) bool {
	think, vars, _ := templateKwargs(o.TemplateKwargs) // checked by New
	if len(vars) > 0 {
		for k, v := range j.vars {
			vars[k] = v
		}
		j.vars = vars
	}
	if j.think != nil {
		think = j.think
	}
	return noThink(o.NoThink, think)
}

// templateContext is ctx with a chat's Jinja variables: the date as
// llama.cpp sets it (local time, date_string "06 Dec 2026" and datetime
// "Dec 06 2026"), then the request's chat_template_kwargs over it.
func templateContext(ctx context.Context, kwargs map[string]json.RawMessage) context.Context {
	now := time.Now()
	vars := map[string]json.RawMessage{
		"date_string": jsonString(now.Format("02 Jan 2006")),
		"datetime":    jsonString(now.Format("Jan 02 2006")),
	}
	for k, v := range kwargs {
		vars[k] = v
	}
	return tokenizer.WithTemplateVars(ctx, vars)
}

func jsonString(s string) json.RawMessage {
	b, _ := json.Marshal(s)
	return b
}

// renderChat is a chat job's prompt text: its messages through the chat
// template (with tools and tool turns, tools.go), the generation prompt
// unless add_generation_prompt is false, and a continued message's text.
func renderChat(ctx context.Context, tok *tokenizer.Tokenizer, j *job, noThink bool) (string, error) {
	ctx = templateContext(ctx, j.vars)
	add := !j.noGenPrompt
	var text string
	var err error
	if j.tools == nil && !hasToolTurns(j.messages) {
		text, err = tok.ChatContext(ctx, j.messages, add, noThink)
	} else {
		var raw json.RawMessage
		if j.tools != nil {
			raw = j.tools.raw
		}
		text, err = tok.ChatTools(ctx, j.messages, raw, add, noThink)
	}
	if err != nil || j.prefill == nil {
		return text, err
	}
	return text + *j.prefill, nil
}
