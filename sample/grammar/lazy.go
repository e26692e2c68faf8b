package grammar

import (
	"errors"
	"fmt"
	"regexp"
	"slices"
)

// ErrTrigger is wrapped by NewLazy's errors about a trigger.
var ErrTrigger = errors.New("invalid grammar trigger")

// TriggerKind is a lazy grammar trigger's type, numbered as llama.cpp's
// common_grammar_trigger_type (and llama-server's grammar_triggers JSON).
type TriggerKind int

const (
	TriggerToken       TriggerKind = iota // a token id
	TriggerWord                           // a literal string
	TriggerPattern                        // a regular expression found anywhere in the output
	TriggerPatternFull                    // a regular expression matching the whole output
)

// Trigger starts a lazy grammar.
type Trigger struct {
	Kind  TriggerKind
	Value string // the word or pattern
	Token int32  // TriggerToken's id
}

// Lazy is a grammar that allows every token until a trigger appears in the
// generated text (llama.cpp's lazy grammar): a trigger token is then fed to
// the grammar, and for a word or pattern the text from the trigger's start
// (its first non-empty capturing group, or the whole match) is replayed
// into it; from then on it masks as a Matcher. Patterns are Go regular
// expressions (RE2): a pattern RE2 cannot compile is an ErrTrigger.
type Lazy struct {
	mt       *Matcher
	awaiting bool
	tokens   []int32
	patterns []*regexp.Regexp
	buf      []byte // the text generated while awaiting
}

// NewLazy makes a lazy matcher of g over v started by triggers.
func NewLazy(g *Grammar, v *Vocab, triggers []Trigger) (*Lazy, error) {
	if len(triggers) == 0 {
		return nil, fmt.Errorf("no triggers set for lazy grammar: %w", ErrTrigger)
	}
	l := &Lazy{mt: NewMatcher(g, v), awaiting: true}
	for _, t := range triggers {
		var src string
		switch t.Kind {
		case TriggerToken:
			if t.Token < 0 || int(t.Token) >= v.n {
				return nil, fmt.Errorf("trigger token %d of %d: %w", t.Token, v.n, ErrTrigger)
			}
			l.tokens = append(l.tokens, t.Token)
			continue
		case TriggerWord:
			src = regexp.QuoteMeta(t.Value)
		case TriggerPattern:
			src = t.Value
		case TriggerPatternFull:
			src = anchored(t.Value)
		default:
			return nil, fmt.Errorf("trigger type %d: %w (0 token, 1 word, 2 pattern, 3 full pattern)", t.Kind, ErrTrigger)
		}
		re, err := regexp.Compile(src)
		if err != nil {
			return nil, fmt.Errorf("trigger %q: %w: %v", t.Value, ErrTrigger, err)
		}
		l.patterns = append(l.patterns, re)
	}
	return l, nil
}

// anchored is llama.cpp's full-pattern anchoring: ^ and $ added where
// missing.
func anchored(p string) string {
	if p == "" {
		return "^$"
	}
	if p[0] != '^' {
		p = "^" + p
	}
	if p[len(p)-1] != '$' {
		p += "$"
	}
	return p
}

// Triggered reports whether a trigger has appeared.
func (l *Lazy) Triggered() bool { return !l.awaiting }

// Apply masks as the grammar once triggered, and allows everything before.
func (l *Lazy) Apply(logits []float32) error {
	if l.awaiting {
		return nil
	}
	return l.mt.Apply(logits)
}

// Accept advances the grammar, or (awaiting) buffers the token's text and
// looks for a trigger in it.
func (l *Lazy) Accept(id int32) error {
	if !l.awaiting {
		return l.mt.Accept(id)
	}
	if slices.Contains(l.tokens, id) {
		l.awaiting, l.buf = false, nil
		return l.mt.Accept(id)
	}
	if id < 0 || int(id) >= l.mt.v.n {
		return fmt.Errorf("token %d of %d: %w", id, l.mt.v.n, ErrRejected)
	}
	l.buf = append(l.buf, l.mt.v.piece(id)...)
	for _, re := range l.patterns {
		if start, ok := triggerStart(re, l.buf); ok {
			return l.fire(start)
		}
	}
	return nil
}

// triggerStart is where re's match in buf starts the grammar: its first
// non-empty capturing group, or the whole match.
func triggerStart(re *regexp.Regexp, buf []byte) (int, bool) {
	m := re.FindSubmatchIndex(buf)
	if m == nil {
		return 0, false
	}
	for i := 2; i+1 < len(m); i += 2 {
		if m[i] >= 0 && m[i+1] > m[i] {
			return m[i], true
		}
	}
	return m[0], true
}

// fire replays the buffered text from start into the grammar.
func (l *Lazy) fire(start int) error {
	l.awaiting = false
	buf := l.buf
	l.buf = nil
	if err := l.mt.AcceptString(string(buf[start:])); err != nil {
		return fmt.Errorf("the text after the trigger: %w", err)
	}
	return nil
}
