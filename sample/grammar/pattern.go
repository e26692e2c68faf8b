package grammar

import (
	"errors"
	"fmt"
	"math"
	"strconv"
	"strings"
)

// errPattern is a pattern with no grammar equivalent (llama.cpp accepts any
// string for it with a warning; pipe refuses it, so a schema is never
// silently loosened).
var errPattern = errors.New("pattern")

const maxPatternDepth = 100

// item is a piece of a pattern's sequence: a literal (GBNF-escaped, without
// quotes) or a rule expression.
type item struct {
	s   string
	lit bool
}

func (it item) rule() string {
	if it.lit {
		return `"` + it.s + `"`
	}
	return it.s
}

// patternRule is _pattern_to_rule: an anchored regular expression ^…$ as
// a JSON string rule, its classes and `.` kept to what a JSON string holds
// unescaped (jsonclass.go).
func (c *converter) patternRule(pattern, name string) (string, error) {
	if len(pattern) < 2 || pattern[0] != '^' || pattern[len(pattern)-1] != '$' {
		return "", fmt.Errorf("%w %s: not anchored with '^' and '$'", errPattern, pattern)
	}
	pc := &patternConv{c: c, src: pattern[1 : len(pattern)-1], name: name, subIDs: map[string]string{}}
	it, err := pc.transform()
	if err == nil && pc.depth != 0 {
		err = errors.New("unbalanced parentheses")
	}
	if err != nil {
		return "", fmt.Errorf("%w %s: %v", errPattern, pattern, err)
	}
	return c.addRule(name, `"\"" (`+it.rule()+`) "\""`), nil
}

type patternConv struct {
	c      *converter
	src    string
	i      int
	depth  int
	name   string
	subIDs map[string]string
}

func (p *patternConv) transform() (item, error) {
	var seq []item
	for p.i < len(p.src) {
		ch := p.src[p.i]
		var err error
		switch ch {
		case '.':
			seq = append(seq, item{s: p.c.addRule("dot", jsonSafeDot)})
			p.i++
		case '(':
			err = p.group(&seq)
		case ')':
			p.i++
			if p.depth == 0 {
				return item{}, errors.New("unbalanced parentheses")
			}
			p.depth--
			return joinSeq(seq), nil
		case '^', '$':
			return item{}, errors.New("anchor inside the pattern")
		case '[':
			err = p.class(&seq)
		case '|':
			seq = append(seq, item{s: "|"})
			p.i++
		case '*', '+', '?':
			if len(seq) == 0 {
				return item{}, errors.New("nothing to repeat")
			}
			seq[len(seq)-1] = item{s: seq[len(seq)-1].rule() + string(ch)}
			p.i++
		case '{':
			err = p.braces(seq)
		default:
			err = p.literal(&seq)
		}
		if err != nil {
			return item{}, err
		}
	}
	return joinSeq(seq), nil
}

// joinSeq joins a sequence, merging consecutive literals.
func joinSeq(seq []item) item {
	var out []string
	lit := ""
	for _, it := range seq {
		if it.lit {
			lit += it.s
			continue
		}
		if lit != "" {
			out = append(out, `"`+lit+`"`)
			lit = ""
		}
		out = append(out, it.s)
	}
	if lit != "" {
		out = append(out, `"`+lit+`"`)
	}
	return item{s: strings.Join(out, " ")}
}

func (p *patternConv) group(seq *[]item) error {
	p.i++
	if p.i < len(p.src) && p.src[p.i] == '?' {
		if p.i+1 < len(p.src) && p.src[p.i+1] == ':' {
			p.i += 2
		} else {
			return errors.New("unsupported group syntax")
		}
	}
	p.depth++
	if p.depth > maxPatternDepth {
		return errors.New("pattern nesting too deep")
	}
	inner, err := p.transform()
	if err != nil {
		return err
	}
	*seq = append(*seq, item{s: "(" + inner.rule() + ")"})
	return nil
}

func (p *patternConv) class(seq *[]item) error {
	var b strings.Builder
	b.WriteByte('[')
	p.i++
	for p.i < len(p.src) && p.src[p.i] != ']' {
		if p.src[p.i] == '\\' {
			n := escapeLen(p.src, p.i)
			if n == 0 {
				return fmt.Errorf("unsupported escape in character class: %s", p.src[p.i:min(p.i+2, len(p.src))])
			}
			b.WriteString(p.src[p.i : p.i+n])
			p.i += n
			continue
		}
		b.WriteByte(p.src[p.i])
		p.i++
	}
	if p.i >= len(p.src) {
		return errors.New("unterminated character class")
	}
	b.WriteByte(']')
	p.i++
	safe, err := jsonSafeClass(b.String())
	if err != nil {
		return err
	}
	*seq = append(*seq, item{s: safe})
	return nil
}

func (p *patternConv) braces(seq []item) error {
	end := strings.IndexByte(p.src[p.i:], '}')
	if end < 0 {
		return errors.New("unterminated curly brackets")
	}
	body := p.src[p.i+1 : p.i+end]
	p.i += end + 1
	nums := strings.Split(body, ",")
	lo, hi := 0, math.MaxInt
	var err error
	switch {
	case len(nums) == 1:
		lo, err = strconv.Atoi(nums[0])
		hi = lo
	case len(nums) == 2:
		if nums[0] != "" {
			lo, err = strconv.Atoi(nums[0])
		}
		if err == nil && nums[1] != "" {
			hi, err = strconv.Atoi(nums[1])
		}
	default:
		return errors.New("wrong number of values in curly brackets")
	}
	if err != nil {
		return errors.New("invalid number in curly brackets")
	}
	if len(seq) == 0 {
		return errors.New("nothing to repeat")
	}
	last := &seq[len(seq)-1]
	sub := last.s
	if last.lit {
		sub = `"` + sub + `"`
	} else {
		id, ok := p.subIDs[last.s]
		if !ok {
			id = p.c.addRule(p.name+"-"+strconv.Itoa(len(p.subIDs)+1), last.s)
			p.subIDs[last.s] = id
		}
		sub = id
	}
	*last = item{s: repetition(sub, lo, hi, "")}
	return nil
}

const (
	nonLiteral       = "|.()[]{}*+?^$"
	escapedInRegexps = "^$.[]()|{}*+?"
)

// literal reads a run of literal characters (escapes included).
func (p *patternConv) literal(seq *[]item) error {
	var lit strings.Builder
	start := p.src[p.i]
	for p.i < len(p.src) {
		ch := p.src[p.i]
		switch {
		case ch == '\\':
			if p.i == len(p.src)-1 {
				return errors.New("trailing backslash")
			}
			if next := p.src[p.i+1]; strings.IndexByte(escapedInRegexps, next) >= 0 {
				lit.WriteByte(next)
				p.i += 2
				continue
			}
			n := escapeLen(p.src, p.i)
			if n == 0 {
				return fmt.Errorf("unsupported escape: %s", p.src[p.i:p.i+2])
			}
			lit.WriteString(p.src[p.i : p.i+n])
			p.i += n
		case ch == '"':
			lit.WriteString(`\"`)
			p.i++
		case strings.IndexByte(nonLiteral, ch) < 0 && (p.i == len(p.src)-1 || lit.Len() == 0 ||
			p.src[p.i+1] == '.' || strings.IndexByte(nonLiteral, p.src[p.i+1]) < 0):
			lit.WriteByte(ch)
			p.i++
		default:
			if lit.Len() == 0 {
				return fmt.Errorf("unsupported character: %c", start)
			}
			*seq = append(*seq, item{s: lit.String(), lit: true})
			return nil
		}
	}
	if lit.Len() == 0 {
		return fmt.Errorf("unsupported character: %c", start)
	}
	*seq = append(*seq, item{s: lit.String(), lit: true})
	return nil
}

// escapeLen is gbnf_escape_length: the length of a GBNF escape at pos, 0
// for none.
func escapeLen(s string, pos int) int {
	if pos+1 >= len(s) || s[pos] != '\\' {
		return 0
	}
	nHex := 0
	switch s[pos+1] {
	case 'x':
		nHex = 2
	case 'u':
		nHex = 4
	case 'U':
		nHex = 8
	case 't', 'r', 'n', '\\', '"', '[', ']':
		return 2
	default:
		return 0
	}
	if pos+2+nHex > len(s) {
		return 0
	}
	for _, h := range s[pos+2 : pos+2+nHex] {
		if !('0' <= h && h <= '9' || 'a' <= h && h <= 'f' || 'A' <= h && h <= 'F') {
			return 0
		}
	}
	return 2 + nHex
}
