package serve

import (
	"encoding/json"
	"errors"
	"net/http"
	"strings"
	"time"

	"github.com/pipe-engine/pipe/sample"
)

// shape is what distinguishes a chat completion from a text completion on
// the wire.
type shape struct {
	chat    bool
	id      string
	model   string
	created int64
	fp      string // system_fingerprint
	// verbose is the answer's __verbose (nil: the request did not ask).
	verbose func(o *outcome, content string) *nativeFinal
	pf      *probFormat // nil: the request asked for no log-probabilities
	tools   *toolJob    // nil: the request had no tools (tools.go)
	// usage: a stream ends with a chunk of no choices carrying the usage
	// and the timings (stream_options.include_usage, as llama-server's).
	usage bool
}

// logprobs is a choice's "logprobs" for tps: null when none were asked for.
func (sh shape) logprobs(tps []sample.TokenProbs) any {
	if sh.pf == nil {
		return nil
	}
	return sh.pf.logprobs(tps, !sh.chat)
}

func (sh shape) object(chunk bool) string {
	switch {
	case sh.chat && chunk:
		return "chat.completion.chunk"
	case sh.chat:
		return "chat.completion"
	}
	return "text_completion"
}

func (sh shape) response(chunk bool, c choice) *response {
	return &response{ID: sh.id, Object: sh.object(chunk), Created: sh.created, Model: sh.model,
		SystemFingerprint: sh.fp, Choices: []choice{c}}
}

// collector is the emitter of a non-streaming request: one JSON body at the
// end.
type collector struct {
	sh      shape
	w       http.ResponseWriter
	timeout time.Duration // of the body's write (writeJSON)
	buf     strings.Builder
	reason  strings.Builder
	probs   []sample.TokenProbs
	hold    **response // not nil: end keeps the answer here instead of writing it (choices.go)
}

func (c *collector) begin() error { return nil }

func (c *collector) text(p piece) error {
	c.buf.WriteString(p.text)
	c.reason.WriteString(p.reasoning)
	c.probs = append(c.probs, p.probs...)
	return nil
}

func (c *collector) end(o *outcome) error {
	r := c.answer(o)
	if c.hold != nil {
		*c.hold = r
		return nil
	}
	return writeJSON(c.w, c.timeout, http.StatusOK, r)
}

// answer is the response the collected text makes.
func (c *collector) answer(o *outcome) *response {
	txt := c.buf.String()
	ch := choice{FinishReason: &o.finish, Logprobs: c.sh.logprobs(c.probs)}
	switch {
	case c.sh.tools != nil:
		m, finish := c.sh.tools.message(txt, o.finish)
		m.ReasoningContent = strings.TrimRight(c.reason.String(), " \t\r\n")
		ch.Message, ch.FinishReason = m, &finish
	case c.sh.chat:
		ch.Message = &chatMsgOut{Role: "assistant", Content: txt, ReasoningContent: strings.TrimRight(c.reason.String(), " \t\r\n")}
	default:
		ch.Text = &txt
	}
	r := c.sh.response(false, ch)
	r.Usage = o.usage()
	if c.sh.verbose != nil {
		r.Verbose = c.sh.verbose(o, txt)
	}
	return r
}

// sse is the emitter of a streaming request: server-sent events, one chunk
// per piece of text, a last chunk with finish_reason and usage, then
// `data: [DONE]`. Every write has its own deadline, so a client that stops
// reading cannot hold the decode slot for longer than writeTimeout.
type sse struct {
	sh      shape
	w       http.ResponseWriter
	rc      *http.ResponseController
	timeout time.Duration
	started bool
}

func (e *sse) begin() error {
	h := e.w.Header()
	h.Set("Content-Type", "text/event-stream")
	h.Set("Cache-Control", "no-cache")
	h.Set("X-Accel-Buffering", "no")
	e.w.WriteHeader(http.StatusOK)
	e.started = true
	if !e.sh.chat {
		return e.flush()
	}
	// llama-server's (and OpenAI's) first delta: the role, content null
	return e.event(e.sh.response(true, choice{Delta: roleDelta{Role: "assistant"}}))
}

// roleDelta is a stream's first delta.
type roleDelta struct {
	Role    string  `json:"role"`
	Content *string `json:"content"`
}

func (e *sse) text(p piece) error {
	c := choice{}
	if len(p.probs) > 0 {
		c.Logprobs = e.sh.logprobs(p.probs)
	}
	switch {
	case e.sh.chat && p.reasoning != "" && p.text == "":
		c.Delta = &chatDelta{ReasoningContent: &p.reasoning}
	case e.sh.chat && p.reasoning != "":
		c.Delta = &chatDelta{Content: &p.text, ReasoningContent: &p.reasoning}
	case e.sh.chat:
		c.Delta = &chatDelta{Content: &p.text}
	default:
		c.Text = &p.text
	}
	r := e.sh.response(true, c)
	r.Pipe = p.tel
	return e.event(r)
}

func (e *sse) end(o *outcome) error {
	c := choice{FinishReason: &o.finish}
	if e.sh.chat {
		c.Delta = &chatDelta{}
	} else {
		empty := ""
		c.Text = &empty
	}
	r := e.sh.response(true, c)
	r.Usage = o.usage()
	if err := e.event(r); err != nil {
		return err
	}
	if e.sh.usage {
		u := e.sh.response(true, choice{})
		tm := timingsOf(o)
		u.Choices, u.Usage, u.Timings = []choice{}, o.usage(), &tm
		if err := e.event(u); err != nil {
			return err
		}
	}
	return e.raw([]byte("data: [DONE]\n\n"))
}

// fail reports an error that happened after the stream started.
func (e *sse) fail(body apiError) error {
	return e.event(body)
}

func (e *sse) event(v any) error {
	b, err := json.Marshal(v)
	if err != nil {
		return err
	}
	buf := make([]byte, 0, len(b)+8)
	buf = append(buf, "data: "...)
	buf = append(buf, b...)
	buf = append(buf, "\n\n"...)
	return e.raw(buf)
}

func (e *sse) raw(b []byte) error {
	if err := e.rc.SetWriteDeadline(time.Now().Add(e.timeout)); err != nil && !errors.Is(err, http.ErrNotSupported) {
		return err
	}
	if _, err := e.w.Write(b); err != nil {
		return err
	}
	return e.flush()
}

func (e *sse) flush() error {
	if err := e.rc.Flush(); err != nil && !errors.Is(err, http.ErrNotSupported) {
		return err
	}
	return nil
}

// writeBy sets the deadline of w's writes to timeout from now (a
// ResponseWriter without deadlines, such as a test's recorder, has none).
func writeBy(w http.ResponseWriter, timeout time.Duration) error {
	if err := http.NewResponseController(w).SetWriteDeadline(time.Now().Add(timeout)); err != nil && !errors.Is(err, http.ErrNotSupported) {
		return err
	}
	return nil
}

// writeJSON writes v as the response's JSON body with status. The write
// gets a deadline timeout from now: a generation's body is written when
// it ends, minutes after the exchange's first deadline (route), and a
// client that stops reading must not hold the decode slot while it is.
func writeJSON(w http.ResponseWriter, timeout time.Duration, status int, v any) error {
	b, err := json.Marshal(v)
	if err != nil {
		return err
	}
	if err := writeBy(w, timeout); err != nil {
		return err
	}
	w.Header().Set("Content-Type", "application/json")
	w.WriteHeader(status)
	_, err = w.Write(append(b, '\n'))
	return err
}
