package serve

import "strings"

// Reasoning formats (--reasoning-format, a request's reasoning_format), as
// llama-server's: "none" leaves a thinking model's <think>…</think> in the
// content; "deepseek" and "auto" return it apart, as the message's (and
// the stream deltas') reasoning_content; "deepseek-legacy" returns it as
// reasoning_content and leaves it, tags and all, in the content too (a
// stream's deltas carry it in the content only, as llama-server's
// reasoning_in_content).
const (
	ReasoningNone     = "none"
	ReasoningDeepSeek = "deepseek"
	ReasoningAuto     = "auto"
	ReasoningLegacy   = "deepseek-legacy"
)

const (
	thinkOpen  = "<think>"
	thinkClose = "</think>"
)

// thinkState is where a thinkSplit is in the reply.
type thinkState int

const (
	thinkStart   thinkState = iota // nothing but whitespace yet: <think> may open
	thinkInside                    // in the reasoning
	thinkClosed                    // after </think>: whitespace before the answer
	thinkContent                   // in the answer
)

// thinkSplit separates a reply's leading <think>…</think> (or, when the
// prompt left <think> open, its text up to </think>) from the answer, piece
// by piece: text that may be the start of a tag is held back until the next
// piece tells. The reasoning and the answer lose their leading whitespace.
type thinkSplit struct {
	state thinkState
	held  string
	lead  bool // in the reasoning, before its first non-space
}

func newThinkSplit(open bool) *thinkSplit {
	if open {
		return &thinkSplit{state: thinkInside, lead: true}
	}
	return &thinkSplit{}
}

// feed takes the next piece of the reply and returns the reasoning and the
// answer it completes.
func (s *thinkSplit) feed(text string) (reasoning, content string) {
	buf := s.held + text
	s.held = ""
	switch s.state {
	case thinkStart:
		t := strings.TrimLeft(buf, " \t\r\n")
		switch {
		case strings.HasPrefix(t, thinkOpen):
			s.state, s.lead = thinkInside, true
			return s.inside(t[len(thinkOpen):])
		case strings.HasPrefix(thinkOpen, t):
			s.held = buf // "" or a partial <think>
			return "", ""
		}
		s.state = thinkContent
		return "", buf
	case thinkInside:
		return s.inside(buf)
	case thinkClosed:
		return "", s.closed(buf)
	}
	return "", buf
}

// inside is feed in the reasoning.
func (s *thinkSplit) inside(buf string) (reasoning, content string) {
	if s.lead {
		buf = strings.TrimLeft(buf, " \t\r\n")
		s.lead = buf == ""
	}
	if i := strings.Index(buf, thinkClose); i >= 0 {
		s.state = thinkClosed
		return buf[:i], s.closed(buf[i+len(thinkClose):])
	}
	k := partialSuffix(buf, thinkClose)
	s.held = buf[len(buf)-k:]
	return buf[:len(buf)-k], ""
}

// closed is feed between </think> and the answer.
func (s *thinkSplit) closed(buf string) string {
	t := strings.TrimLeft(buf, " \t\r\n")
	if t != "" {
		s.state = thinkContent
	}
	return t
}

// flush ends the reply: held text is what it was (an unclosed reasoning
// stays reasoning, a partial <think> is content).
func (s *thinkSplit) flush() (reasoning, content string) {
	held := s.held
	s.held = ""
	if s.state == thinkInside {
		return held, ""
	}
	return "", held
}

// partialSuffix is the length of the longest suffix of s that is a proper
// prefix of tag.
func partialSuffix(s, tag string) int {
	for k := min(len(s), len(tag)-1); k > 0; k-- {
		if strings.HasSuffix(s, tag[:k]) {
			return k
		}
	}
	return 0
}

// thinkEmitter is an emitter whose replies' reasoning goes apart from the
// answer (piece.reasoning): a chat with reasoning_format deepseek or auto.
type thinkEmitter struct {
	inner  emitter
	split  *thinkSplit
	legacy bool // deepseek-legacy: the content keeps the reasoning
}

func (e *thinkEmitter) begin() error { return e.inner.begin() }

func (e *thinkEmitter) text(p piece) error {
	r, c := e.split.feed(p.text)
	if !e.legacy {
		p.text = c
	}
	p.reasoning = r
	return e.inner.text(p)
}

func (e *thinkEmitter) end(o *outcome) error {
	if r, c := e.split.flush(); r != "" || c != "" && !e.legacy {
		if e.legacy {
			c = ""
		}
		if err := e.inner.text(piece{text: c, reasoning: r}); err != nil {
			return err
		}
	}
	return e.inner.end(o)
}

// withReasoning wraps a chat's emitter for its reasoning format (the
// request's, else the server's): a prompt whose last tokens open <think>
// (a template that starts the reasoning itself) starts in the reasoning.
func (a *openAI) withReasoning(j *job, em emitter) emitter {
	format := a.o.ReasoningFormat
	if j.reasoning != "" {
		format = j.reasoning
	}
	legacy := format == ReasoningLegacy
	if !j.chat || (format != ReasoningDeepSeek && format != ReasoningAuto && !legacy) || legacy && j.stream {
		return em
	}
	open := opensThink(a.o.Model.Tokenizer(), j.ids) // budget.go
	return &thinkEmitter{inner: em, split: newThinkSplit(open), legacy: legacy}
}
