package serve

import (
	"encoding/json"
	"net/http"

	"github.com/pipe-engine/pipe/tokenizer"
)

// templateAPI is POST /apply-template, as llama-server's: the body of a
// chat completion in, {"prompt": the text the chat template renders for its
// messages (and tools, with the history's tool calls and turns)} out,
// without generating. add_generation_prompt (default true),
// continue_final_message and chat_template_kwargs are a chat's
// (chattemplate.go); the render is bounded like a chat's (the template's
// limits, the request's context).
type templateAPI struct{ parts }

func (s *templateAPI) apply(x *exchange) {
	body, ok := s.rq.readBody(x)
	if !ok {
		return
	}
	var r struct {
		Messages []chatMessage   `json:"messages"`
		Tools    json.RawMessage `json:"tools"` // rendered as a chat's (tools.go)
		chatTemplateFields
	}
	if err := json.Unmarshal(body, &r); err != nil {
		s.rq.fail(x, http.StatusBadRequest, "invalid_request_error", jsonError(err))
		return
	}
	var j job
	j.chat = true
	var err error
	if j.messages, err = chatMessages(r.Messages); err == nil {
		err = r.chatTemplateFields.parse(r.Messages, &j)
	}
	if media := chatMedia(r.Messages); err == nil && len(media) > 0 {
		err = checkMedia(s.o.MediaPath, media) // media.go
	}
	if err != nil {
		s.rq.fail(x, http.StatusBadRequest, "invalid_request_error", err)
		return
	}
	if !isNull(r.Tools) {
		j.tools = &toolJob{raw: r.Tools}
	}
	text, err := renderChat(x.r.Context(), s.o.Model.Tokenizer(), &j, s.o.withKwargs(&j))
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
