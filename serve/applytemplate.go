package serve

import (
	"encoding/json"
	"net/http"

	"github.com/pipe-engine/pipe/tokenizer"
)

// templateAPI is POST /apply-template, as llama-server's: the body of a
// chat completion in, {"prompt": the text the chat template renders for its
// messages (and tools, with the history's tool calls and turns)} out,
// without generating. add_generation_prompt (default true)
// is honoured here, as llama-server does; the render is bounded like a
// chat's (the template's limits, the request's context).
type templateAPI struct{ parts }

func (s *templateAPI) apply(x *exchange) {
	body, ok := s.rq.readBody(x)
	if !ok {
		return
	}
	var r struct {
		Messages            []chatMessage              `json:"messages"`
		AddGenerationPrompt *bool                      `json:"add_generation_prompt"`
		Kwargs              map[string]json.RawMessage `json:"chat_template_kwargs"`
		Tools               json.RawMessage            `json:"tools"` // rendered as a chat's (tools.go)
	}
	if err := json.Unmarshal(body, &r); err != nil {
		s.rq.fail(x, http.StatusBadRequest, "invalid_request_error", jsonError(err))
		return
	}
	msgs, err := chatMessages(r.Messages)
	if err != nil {
		s.rq.fail(x, http.StatusBadRequest, "invalid_request_error", err)
		return
	}
	think, err := templateKwargs(r.Kwargs)
	if err != nil {
		s.rq.fail(x, http.StatusBadRequest, "invalid_request_error", err)
		return
	}
	add := r.AddGenerationPrompt == nil || *r.AddGenerationPrompt
	tok, nt := s.o.Model.Tokenizer(), noThink(s.o.NoThink, think)
	var text string
	if isNull(r.Tools) && !hasToolTurns(msgs) {
		text, err = tok.ChatContext(x.r.Context(), msgs, add, nt)
	} else {
		text, err = tok.ChatTools(x.r.Context(), msgs, r.Tools, add, nt)
	}
	if err != nil {
		s.rq.fail(x, http.StatusBadRequest, "invalid_request_error", badRequest("messages: %v", err))
		return
	}
	_ = writeJSON(x.w, s.o.WriteTimeout, http.StatusOK, map[string]string{"prompt": text})
}

// chatMessages are a request's messages as the tokenizer renders them:
// at least one, each a system (or developer), user, assistant (with its
// tool_calls) or tool turn.
func chatMessages(in []chatMessage) ([]tokenizer.Message, error) {
	if len(in) == 0 {
		return nil, badRequest("messages: at least one message is required")
	}
	out := make([]tokenizer.Message, 0, len(in))
	for i, m := range in {
		switch m.Role {
		case "system", "user", "assistant", "tool":
		case "developer":
			m.Role = "system"
		default:
			return nil, badRequest("messages[%d].role %q: want system, user, assistant or tool", i, m.Role)
		}
		tm, err := historyMessage(i, m) // tools.go
		if err != nil {
			return nil, err
		}
		out = append(out, tm)
	}
	return out, nil
}

// templateKwargs reads a request's chat_template_kwargs: enable_thinking
// (a bool; nil when not given) is the one template variable pipe's
// renderers take; any other is a 400 naming it.
func templateKwargs(kw map[string]json.RawMessage) (*bool, error) {
	var think *bool
	for k, v := range kw {
		if k != "enable_thinking" {
			return nil, fieldErr("chat_template_kwargs", "chat_template_kwargs.%s: not supported: pipe's chat templates take enable_thinking only", k)
		}
		var b bool
		if err := json.Unmarshal(v, &b); err != nil {
			return nil, fieldErr("chat_template_kwargs", "chat_template_kwargs.enable_thinking: want true or false")
		}
		think = &b
	}
	return think, nil
}

// noThink is the server's --no-think unless the request's enable_thinking
// says otherwise.
func noThink(server bool, think *bool) bool {
	if think != nil {
		return !*think
	}
	return server
}
