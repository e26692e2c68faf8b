package toolcall

import (
	"fmt"
	"strings"
)

const gemmaQuote = `<|"|>`

// parseGemma4: <|tool_call>call:NAME{key:value,…}<tool_call|>, the
// arguments in Gemma 4's own notation: bare keys, strings between <|"|>
// marks, numbers, booleans, null, nested {…} and […].
func parseGemma4(text string) (string, []Call, error) {
	head := ""
	if i := strings.Index(text, "<channel|>"); i >= 0 && strings.HasPrefix(strings.TrimSpace(text), "<|channel>") {
		head, text = text[:i+len("<channel|>")], text[i+len("<channel|>"):] // the thought channel holds no calls
	}
	content, inner, err := between(text, "<|tool_call>", "<tool_call|>")
	if err != nil {
		return "", nil, err
	}
	content = head + content
	var calls []Call
	for _, s := range inner {
		rest, ok := strings.CutPrefix(strings.TrimSpace(s), "call:")
		if !ok {
			return "", nil, fmt.Errorf("%w: %q: want call:NAME{…}", ErrCall, clip(s))
		}
		name, args, ok := strings.Cut(rest, "{")
		if !ok {
			return "", nil, fmt.Errorf("%w: call:%s without its {arguments}", ErrCall, clip(rest))
		}
		a, err := compact(gemmaJSON("{" + args))
		if err != nil {
			return "", nil, err
		}
		calls = append(calls, Call{Name: strings.TrimSpace(name), Arguments: a})
	}
	return content, calls, nil
}

// gemmaJSON rewrites Gemma 4's argument notation as JSON: a quoted span
// becomes a JSON string, a bare key before ':' is quoted.
func gemmaJSON(s string) string {
	var b strings.Builder
	for len(s) > 0 {
		if rest, ok := strings.CutPrefix(s, gemmaQuote); ok {
			str, after, _ := strings.Cut(rest, gemmaQuote)
			b.WriteString(quoteJSON(str))
			s = after
			continue
		}
		c := s[0]
		if isKeyStart(c) {
			n := 1
			for n < len(s) && isKeyByte(s[n]) {
				n++
			}
			word := s[:n]
			if strings.HasPrefix(strings.TrimLeft(s[n:], " "), ":") {
				b.WriteString(quoteJSON(word))
			} else {
				b.WriteString(word) // true, false, null
			}
			s = s[n:]
			continue
		}
		b.WriteByte(c)
		s = s[1:]
	}
	return b.String()
}

func isKeyStart(c byte) bool {
	return c == '_' || c >= 'a' && c <= 'z' || c >= 'A' && c <= 'Z'
}

func isKeyByte(c byte) bool { return isKeyStart(c) || c >= '0' && c <= '9' || c == '-' || c == '.' }

func quoteJSON(s string) string {
	var b strings.Builder
	b.WriteByte('"')
	for _, r := range s {
		switch r {
		case '"':
			b.WriteString(`\"`)
		case '\\':
			b.WriteString(`\\`)
		case '\n':
			b.WriteString(`\n`)
		case '\r':
			b.WriteString(`\r`)
		case '\t':
			b.WriteString(`\t`)
		default:
			if r < 0x20 {
				fmt.Fprintf(&b, `\u%04x`, r)
			} else {
				b.WriteRune(r)
			}
		}
	}
	b.WriteByte('"')
	return b.String()
}
