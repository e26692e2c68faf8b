package serve

import (
	"bytes"
	"math"
	"unicode/utf8"

	"github.com/pipe-engine/pipe/sample"
	"github.com/pipe-engine/pipe/tokenizer"
)

// The reasoning budget, as llama-server's (--reasoning-budget N, a chat's
// reasoning_budget_tokens or thinking_budget_tokens, reasoning_budget_message;
// common/reasoning-budget.cpp at 3f545becc): once a reply's reasoning opens
// (<think> generated, or left open by the prompt), at most N tokens of it
// are sampled; then, after the token that completes a UTF-8 character, the
// budget message and </think> are forced token by token, and the reply goes
// on as the answer. -1 is no budget, 0 ends the reasoning at once. Unlike
// llama.cpp, which matches the tags' token ids, the tags are matched in the
// generated text, so a tag the model spells with other tokens counts too.

// budgetState is where a thinkBudget is.
type budgetState int

const (
	budgetIdle     budgetState = iota // before <think>
	budgetCounting                    // in the reasoning, counting down
	budgetWaitUTF8                    // spent: waiting for a complete character
	budgetForcing                     // forcing the message and </think>
	budgetDone                        // after </think> (a new <think> counts again)
)

// thinkBudget is a sample.Mask that enforces the reasoning budget around
// the request's own mask (inner, nil: none). While it forces a token the
// inner mask is not applied (the forced token wins), but it still accepts
// every token.
type thinkBudget struct {
	inner     sample.Mask
	piece     func(id int32) []byte
	forced    []int32
	budget    int
	remaining int
	state     budgetState
	pos       int    // next of forced
	tail      []byte // the text since the last tag, for matching the next
}

// budgetFields are a chat request's reasoning budget fields.
type budgetFields struct {
	ReasoningBudgetTokens *int    `json:"reasoning_budget_tokens"`
	ThinkingBudgetTokens  *int    `json:"thinking_budget_tokens"`
	ReasoningBudgetMsg    *string `json:"reasoning_budget_message"`
}

// parse sets the job's budget: reasoning_budget_tokens, else
// thinking_budget_tokens (-1: the server's).
func (f *budgetFields) parse(j *job) error {
	for _, c := range []struct {
		name string
		v    *int
	}{{"reasoning_budget_tokens", f.ReasoningBudgetTokens}, {"thinking_budget_tokens", f.ThinkingBudgetTokens}} {
		if c.v == nil || *c.v == -1 {
			continue
		}
		if *c.v < -1 {
			return fieldErr(c.name, "%s %d must be >= 0, or -1 (the server's budget)", c.name, *c.v)
		}
		if j.budget == nil {
			j.budget = c.v
		}
	}
	j.budgetMsg = f.ReasoningBudgetMsg
	return nil
}

// budgetOf is a chat job's reasoning budget (the request's, else the
// server's; -1: none) and the message forced before </think>.
func (s *intake) budgetOf(j *job) (int, string) {
	n, msg := -1, s.o.ReasoningBudgetMessage
	if s.o.ReasoningBudget != nil {
		n = *s.o.ReasoningBudget
	}
	if j.budget != nil {
		n = *j.budget
	}
	if j.budgetMsg != nil {
		msg = *j.budgetMsg
	}
	return n, msg
}

// withBudget wraps the job's mask in its reasoning budget, if it has one.
func (s *intake) withBudget(j *job) {
	n, msg := s.budgetOf(j)
	if !j.chat || n < 0 {
		return
	}
	tok := s.o.Model.Tokenizer()
	b := &thinkBudget{
		inner:  j.mask,
		piece:  func(id int32) []byte { return tok.Piece(nil, id, true) },
		forced: tok.Encode(msg+thinkClose, false, true),
		budget: n,
	}
	if opensThink(tok, j.ids) {
		b.open()
	}
	j.mask = b
}

// opensThink reports whether a chat prompt ends with an open <think> (a
// template that starts the reasoning itself).
func opensThink(tok *tokenizer.Tokenizer, ids []int32) bool {
	var tail []byte
	for _, id := range ids[max(len(ids)-4, 0):] {
		tail = tok.Piece(tail, id, true)
	}
	return bytes.HasSuffix(bytes.TrimRight(tail, " \t\r\n"), []byte(thinkOpen))
}

// open starts counting a reasoning.
func (b *thinkBudget) open() {
	b.state, b.remaining, b.tail = budgetCounting, b.budget, b.tail[:0]
	if b.remaining <= 0 {
		b.state, b.pos = budgetForcing, 0
	}
}

// Apply forces the next token of the message and </think> when forcing,
// else applies the inner mask.
func (b *thinkBudget) Apply(logits []float32) error {
	if b.state == budgetForcing && b.pos < len(b.forced) {
		f := b.forced[b.pos]
		for i := range logits {
			if int32(i) != f {
				logits[i] = float32(math.Inf(-1))
			}
		}
		return nil
	}
	if b.inner != nil {
		return b.inner.Apply(logits)
	}
	return nil
}

// Accept advances the budget past the chosen token, then the inner mask.
func (b *thinkBudget) Accept(id int32) error {
	p := b.piece(id)
	switch b.state {
	case budgetIdle, budgetDone:
		if b.saw(p, thinkOpen) {
			b.open()
		}
	case budgetCounting, budgetWaitUTF8:
		b.counting(p)
	case budgetForcing:
		if b.pos++; b.pos >= len(b.forced) {
			b.state, b.tail = budgetDone, b.tail[:0]
		}
	}
	if b.inner != nil {
		return b.inner.Accept(id)
	}
	return nil
}

// counting is Accept in the reasoning: a natural </think> ends it; else
// the token counts against the budget.
func (b *thinkBudget) counting(p []byte) {
	if b.saw(p, thinkClose) {
		b.state, b.tail = budgetDone, b.tail[:0]
		return
	}
	complete := utf8Complete(p)
	if b.state == budgetWaitUTF8 {
		if complete {
			b.state, b.pos = budgetForcing, 0
		}
		return
	}
	if b.remaining--; b.remaining <= 0 {
		b.state, b.pos = budgetWaitUTF8, 0
		if complete {
			b.state = budgetForcing
		}
	}
}

// saw appends a piece to the text since the last tag and reports whether
// that text now ends with tag (then it starts over).
func (b *thinkBudget) saw(p []byte, tag string) bool {
	b.tail = append(b.tail, p...)
	if bytes.HasSuffix(b.tail, []byte(tag)) {
		b.tail = b.tail[:0]
		return true
	}
	if k := 2 * len(thinkClose); len(b.tail) > k {
		b.tail = append(b.tail[:0], b.tail[len(b.tail)-k:]...)
	}
	return false
}

// utf8Complete reports whether p does not end inside a UTF-8 character
// (llama.cpp's common_utf8_is_complete).
func utf8Complete(p []byte) bool {
	for i := 1; i <= min(len(p), utf8.UTFMax); i++ {
		c := p[len(p)-i]
		if c&0xC0 == 0x80 { // a continuation byte: look further back
			continue
		}
		need := 1
		switch {
		case c&0xE0 == 0xC0:
			need = 2
		case c&0xF0 == 0xE0:
			need = 3
		case c&0xF8 == 0xF0:
			need = 4
		}
		return i >= need
	}
	return true
}
