package grammar

import (
	"errors"
	"fmt"
	"strconv"
)

// ErrSyntax is wrapped by every error about a grammar's text or structure.
var ErrSyntax = errors.New("invalid grammar")

// kind is a grammar element's type (llama.cpp's llama_gretype).
type kind uint8

const (
	kEnd      kind = iota // end of a rule
	kAlt                  // start of another alternative
	kRef                  // reference to the rule in value
	kChar                 // a code point, or the first of a class
	kCharNot              // the first of a negated class
	kRngUpper             // makes the previous char a range up to value
	kCharAlt              // another char of the class
	kAny                  // any code point (.)
)

type elem struct {
	k kind
	v uint32
}

// maxRepetition is llama.cpp's MAX_REPETITION_THRESHOLD.
const maxRepetition = 2000

// Grammar is a parsed grammar: every rule's elements in one array (a stack
// position is an index into it).
type Grammar struct {
	elems []elem
	start []int32 // rule id -> index of its first element
	root  int32
	names []string // rule id -> name
}

// parser is a recursive-descent reader of GBNF text.
type parser struct {
	src   []byte
	ids   map[string]uint32
	names []string
	rules [][]elem
	// defined[i] tells whether rule i has a definition.
	defined []bool
}

// Parse reads a GBNF grammar whose start rule is root.
func Parse(src string) (*Grammar, error) {
	p := &parser{src: []byte(src), ids: map[string]uint32{}}
	if err := p.parseAll(); err != nil {
		return nil, err
	}
	return p.build()
}

// posErr is an error at byte offset at, naming its line and column.
func (p *parser) posErr(at int, format string, args ...any) error {
	line, col := 1, 1
	for i := 0; i < at && i < len(p.src); i++ {
		if p.src[i] == '\n' {
			line, col = line+1, 1
		} else {
			col++
		}
	}
	return fmt.Errorf("line %d, column %d: %s: %w", line, col, fmt.Sprintf(format, args...), ErrSyntax)
}

func (p *parser) at(i int) byte {
	if i < len(p.src) {
		return p.src[i]
	}
	return 0
}

func (p *parser) space(i int, newlineOK bool) int {
	for {
		c := p.at(i)
		switch {
		case c == '#':
			for i < len(p.src) && p.src[i] != '\r' && p.src[i] != '\n' {
				i++
			}
		case c == ' ' || c == '\t' || newlineOK && (c == '\r' || c == '\n'):
			i++
		default:
			return i
		}
	}
}

func isDigit(c byte) bool { return '0' <= c && c <= '9' }

func isWord(c byte) bool {
	return 'a' <= c && c <= 'z' || 'A' <= c && c <= 'Z' || c == '-' || isDigit(c)
}

func (p *parser) name(i int) (int, error) {
	j := i
	for isWord(p.at(j)) {
		j++
	}
	if j == i {
		return 0, p.posErr(i, "expecting name")
	}
	return j, nil
}

func (p *parser) symbol(name string) uint32 {
	if id, ok := p.ids[name]; ok {
		return id
	}
	id := uint32(len(p.names))
	p.ids[name] = id
	p.names = append(p.names, name)
	p.rules = append(p.rules, nil)
	p.defined = append(p.defined, false)
	return id
}

func (p *parser) generate(base string) uint32 {
	return p.symbol(base + "_" + strconv.Itoa(len(p.names)))
}

func (p *parser) addRule(id uint32, r []elem) {
	p.rules[id] = r
	p.defined[id] = true
}

func (p *parser) parseAll() error {
	i := p.space(0, true)
	for i < len(p.src) {
		var err error
		if i, err = p.rule(i); err != nil {
			return err
		}
	}
	return nil
}

func (p *parser) rule(i int) (int, error) {
	end, err := p.name(i)
	if err != nil {
		return 0, err
	}
	name := string(p.src[i:end])
	id := p.symbol(name)
	j := p.space(end, false)
	if p.at(j) != ':' || p.at(j+1) != ':' || p.at(j+2) != '=' {
		return 0, p.posErr(j, "expecting ::=")
	}
	j, err = p.alternates(p.space(j+3, true), name, id, false)
	if err != nil {
		return 0, err
	}
	switch c := p.at(j); {
	case c == '\r':
		j++
		if p.at(j) == '\n' {
			j++
		}
	case c == '\n':
		j++
	case j < len(p.src):
		return 0, p.posErr(j, "expecting newline or end")
	}
	return p.space(j, true), nil
}

func (p *parser) alternates(i int, name string, id uint32, nested bool) (int, error) {
	var r []elem
	i, err := p.sequence(i, name, &r, nested)
	for err == nil && p.at(i) == '|' {
		r = append(r, elem{k: kAlt})
		i, err = p.sequence(p.space(i+1, true), name, &r, nested)
	}
	if err != nil {
		return 0, err
	}
	p.addRule(id, append(r, elem{k: kEnd}))
	return i, nil
}
