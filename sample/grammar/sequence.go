package grammar

import (
	"strconv"
	"unicode/utf8"
)

// seq is the state of one sequence being parsed: where its last symbol
// starts (for a repetition) and how many rules that symbol stands for.
type seq struct {
	name     string
	r        *[]elem
	lastSym  int
	nPrev    uint64
	nested   bool
	startPos int
}

func (p *parser) sequence(i int, name string, r *[]elem, nested bool) (int, error) {
	s := &seq{name: name, r: r, lastSym: len(*r), nPrev: 1, nested: nested}
	for i < len(p.src) {
		s.startPos = i
		next, ok, err := p.item(i, s)
		if err != nil {
			return 0, err
		}
		if !ok {
			break
		}
		i = next
	}
	return i, nil
}

// item parses one element of a sequence at i; ok is false at anything that
// is not one (the sequence ends there).
func (p *parser) item(i int, s *seq) (next int, ok bool, err error) {
	switch c := p.at(i); {
	case c == '"':
		next, err = p.literal(i+1, s)
	case c == '[':
		next, err = p.class(i+1, s)
	case c == '<' || c == '!':
		return 0, false, p.posErr(i, "token references are not supported")
	case isWord(c):
		end, _ := p.name(i)
		s.mark()
		*s.r = append(*s.r, elem{kRef, p.symbol(string(p.src[i:end]))})
		next = p.space(end, s.nested)
	case c == '(':
		next, err = p.group(i, s)
	case c == '.':
		s.mark()
		*s.r = append(*s.r, elem{k: kAny})
		next = p.space(i+1, s.nested)
	case c == '*' || c == '+' || c == '?':
		lo, hi := uint64(0), noMax
		if c == '+' {
			lo = 1
		} else if c == '?' {
			hi = 1
		}
		next = p.space(i+1, s.nested)
		err = p.repeat(s, lo, hi)
	case c == '{':
		next, err = p.braces(i, s)
	default:
		return i, false, nil
	}
	return next, err == nil, err
}

// mark starts a new last symbol at the end of the rule.
func (s *seq) mark() {
	s.lastSym = len(*s.r)
	s.nPrev = 1
}

func (p *parser) literal(i int, s *seq) (int, error) {
	s.mark()
	for p.at(i) != '"' {
		if i >= len(p.src) {
			return 0, p.posErr(i, "unexpected end of input")
		}
		c, next, err := p.char(i)
		if err != nil {
			return 0, err
		}
		*s.r = append(*s.r, elem{kChar, c})
		i = next
	}
	return p.space(i+1, s.nested), nil
}

func (p *parser) class(i int, s *seq) (int, error) {
	start := kChar
	if p.at(i) == '^' {
		i++
		start = kCharNot
	}
	s.mark()
	for p.at(i) != ']' {
		if i >= len(p.src) {
			return 0, p.posErr(i, "unexpected end of input")
		}
		c, next, err := p.char(i)
		if err != nil {
			return 0, err
		}
		k := start
		if s.lastSym < len(*s.r) {
			k = kCharAlt
		}
		*s.r = append(*s.r, elem{k, c})
		i = next
		if p.at(i) == '-' && p.at(i+1) != ']' {
			if i+1 >= len(p.src) {
				return 0, p.posErr(i+1, "unexpected end of input")
			}
			hi, next, err := p.char(i + 1)
			if err != nil {
				return 0, err
			}
			*s.r = append(*s.r, elem{kRngUpper, hi})
			i = next
		}
	}
	return p.space(i+1, s.nested), nil
}

// char reads one character of a literal or class: an escape or a UTF-8
// code point.
func (p *parser) char(i int) (uint32, int, error) {
	if p.at(i) != '\\' {
		r, n := utf8.DecodeRune(p.src[i:])
		return uint32(r), i + n, nil
	}
	switch c := p.at(i + 1); c {
	case 'x':
		return p.hex(i, 2)
	case 'u':
		return p.hex(i, 4)
	case 'U':
		return p.hex(i, 8)
	case 't':
		return '\t', i + 2, nil
	case 'r':
		return '\r', i + 2, nil
	case 'n':
		return '\n', i + 2, nil
	case '\\', '"', '[', ']':
		return uint32(c), i + 2, nil
	}
	return 0, 0, p.posErr(i, "unknown escape")
}

// hex reads the n hex digits after the escape at i.
func (p *parser) hex(i, n int) (uint32, int, error) {
	var v uint32
	for j := i + 2; j < i+2+n; j++ {
		c := p.at(j)
		switch {
		case 'a' <= c && c <= 'f':
			v = v<<4 + uint32(c-'a'+10)
		case 'A' <= c && c <= 'F':
			v = v<<4 + uint32(c-'A'+10)
		case isDigit(c):
			v = v<<4 + uint32(c-'0')
		default:
			return 0, 0, p.posErr(i, "expecting %d hex chars", n)
		}
	}
	return v, i + 2 + n, nil
}

func (p *parser) group(i int, s *seq) (int, error) {
	j := p.space(i+1, true)
	before := len(p.names)
	id := p.generate(s.name)
	j, err := p.alternates(j, s.name, id, true)
	if err != nil {
		return 0, err
	}
	s.nPrev = max(1, uint64(len(p.names)-before))
	s.lastSym = len(*s.r)
	*s.r = append(*s.r, elem{kRef, id})
	if p.at(j) != ')' {
		return 0, p.posErr(j, "expecting ')'")
	}
	return p.space(j+1, s.nested), nil
}

// braces parses {m}, {m,} or {m,n} at i.
func (p *parser) braces(i int, s *seq) (int, error) {
	j := p.space(i+1, s.nested)
	lo, j, err := p.integer(j)
	if err != nil {
		return 0, err
	}
	j = p.space(j, s.nested)
	hi := noMax
	switch p.at(j) {
	case '}':
		hi = lo
		j = p.space(j+1, s.nested)
	case ',':
		j = p.space(j+1, s.nested)
		if isDigit(p.at(j)) {
			if hi, j, err = p.integer(j); err != nil {
				return 0, err
			}
			j = p.space(j, s.nested)
		}
		if p.at(j) != '}' {
			return 0, p.posErr(j, "expecting '}'")
		}
		j = p.space(j+1, s.nested)
	default:
		return 0, p.posErr(j, "expecting ','")
	}
	if lo > maxRepetition {
		return 0, p.posErr(i, "number of repetitions exceeds sane defaults, please reduce the number of repetitions")
	}
	if hi < lo {
		return 0, p.posErr(i, "the maximum of a repetition is below its minimum")
	}
	if hi != noMax && hi > maxRepetition {
		hi = noMax
	}
	return j, p.repeat(s, lo, hi)
}

func (p *parser) integer(i int) (uint64, int, error) {
	j := i
	for isDigit(p.at(j)) {
		j++
	}
	if j == i {
		return 0, 0, p.posErr(i, "expecting an int")
	}
	v, err := strconv.ParseUint(string(p.src[i:j]), 10, 64)
	if err != nil {
		return 0, 0, p.posErr(i, "integer out of range")
	}
	return v, j, nil
}

const noMax = ^uint64(0)

// repeat rewrites the sequence's last symbol S as llama.cpp does:
// S{m,n} -> S…S (m times) S'(n-m) with S'(x) ::= S S'(x-1) |, and
// S{m,} -> S…S S' with S' ::= S S' |.
func (p *parser) repeat(s *seq, lo, hi uint64) error {
	r := s.r
	if s.lastSym == len(*r) {
		return p.posErr(s.startPos, "expecting preceding item to */+/?/{")
	}
	unbounded := hi == noMax
	total := uint64(1)
	if !unbounded && hi > 0 {
		total = hi
	} else if lo > 0 {
		total = lo
	}
	if s.nPrev*total >= maxRepetition {
		return p.posErr(s.startPos, "number of rules that are going to be repeated multiplied by the new repetition exceeds sane defaults, please reduce the number of repetitions or rule complexity")
	}
	prev := append([]elem(nil), (*r)[s.lastSym:]...)
	if lo == 0 {
		*r = (*r)[:s.lastSym]
	} else {
		for k := uint64(1); k < lo; k++ {
			*r = append(*r, prev...)
		}
	}
	nOpt := uint64(1)
	if !unbounded {
		nOpt = hi - lo
	}
	var last uint32
	for k := uint64(0); k < nOpt; k++ {
		rec := append([]elem(nil), prev...)
		id := p.generate(s.name)
		if k > 0 || unbounded {
			ref := last
			if unbounded {
				ref = id
			}
			rec = append(rec, elem{kRef, ref})
		}
		rec = append(rec, elem{k: kAlt}, elem{k: kEnd})
		p.addRule(id, rec)
		last = id
	}
	if nOpt > 0 {
		*r = append(*r, elem{kRef, last})
	}
	s.nPrev *= total
	return nil
}
