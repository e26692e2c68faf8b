package grammar

import "fmt"

// build checks the parsed rules (every referenced rule defined, a root
// rule, no left recursion) and flattens them into a Grammar.
func (p *parser) build() (*Grammar, error) {
	if len(p.rules) == 0 {
		return nil, fmt.Errorf("empty grammar: %w", ErrSyntax)
	}
	for id, r := range p.rules {
		if !p.defined[id] {
			return nil, fmt.Errorf("undefined rule identifier '%s': %w", p.names[id], ErrSyntax)
		}
		for _, e := range r {
			if e.k == kRef && !p.defined[e.v] {
				return nil, fmt.Errorf("undefined rule identifier '%s': %w", p.names[e.v], ErrSyntax)
			}
		}
	}
	root, ok := p.ids["root"]
	if !ok {
		return nil, fmt.Errorf("grammar does not contain a 'root' symbol: %w", ErrSyntax)
	}
	if id, bad := p.leftRecursion(); bad {
		return nil, fmt.Errorf("left recursion detected for nonterminal '%s': %w", p.names[id], ErrSyntax)
	}
	g := &Grammar{root: int32(root), names: p.names, start: make([]int32, len(p.rules))}
	for id, r := range p.rules {
		g.start[id] = int32(len(g.elems))
		g.elems = append(g.elems, r...)
	}
	return g, nil
}

// leftRecursion reports a rule that can reach itself without consuming
// input (llama_grammar_detect_left_recursion).
func (p *parser) leftRecursion() (int, bool) {
	n := len(p.rules)
	lr := &leftRec{rules: p.rules, visited: make([]bool, n), busy: make([]bool, n), empty: make([]bool, n)}
	for i := range n {
		if !lr.visited[i] && lr.detect(i) {
			return i, true
		}
	}
	return 0, false
}

type leftRec struct {
	rules                [][]elem
	visited, busy, empty []bool
}

func endOfSeq(e elem) bool { return e.k == kEnd || e.k == kAlt }

func (lr *leftRec) detect(i int) bool {
	if lr.busy[i] {
		return true
	}
	lr.busy[i] = true
	r := lr.rules[i]
	atStart := true
	for _, e := range r {
		if endOfSeq(e) {
			if atStart {
				lr.empty[i] = true
				break
			}
			atStart = true
		} else {
			atStart = false
		}
	}
	into := true
	for _, e := range r {
		switch {
		case e.k == kRef && into:
			if lr.detect(int(e.v)) {
				return true
			}
			if !lr.empty[e.v] {
				into = false
			}
		case endOfSeq(e):
			into = true
		default:
			into = false
		}
	}
	lr.busy[i] = false
	lr.visited[i] = true
	return false
}
