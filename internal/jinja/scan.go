package jinja

import "fmt"

// segKind identifies the type of a scanned template segment.
type segKind int

const (
	segText    segKind = iota // Raw text between tags.
	segComment                // {# ... #}
	segExpr                   // {{ ... }}
	segStmt                   // {% ... %}
)

// segment represents a single scanned piece of a template.
type segment struct {
	kind      segKind
	text      string // Content between delimiters (tags) or raw text.
	trimLeft  bool   // {%- / {{- / {#- was used.
	trimRight bool   // -%} / -}} / -#} was used.
	line      int    // 1-based line number where the segment starts.
	col       int    // 1-based column number where the segment starts.
}

// scan splits source into a flat slice of segments representing the raw text,
// comments, expressions, and statements that make up a Jinja template.
func scan(source string) ([]segment, error) {
	var segs []segment

	// Position tracking.
	pos := scanPos{line: 1, col: 1}
	textStart := 0
	textLine := 1
	textCol := 1

	for pos.i < len(source) {
		// Look for a two-character tag opener starting with '{'.
		if source[pos.i] != '{' || pos.i+1 >= len(source) {
			pos.step(source)
			continue
		}

		kind, closer, ok := tagOpener(source[pos.i+1])
		if !ok {
			pos.step(source)
			continue
		}

		// Emit any accumulated text before this tag.
		if pos.i > textStart {
			segs = append(segs, segment{
				kind: segText,
				text: source[textStart:pos.i],
				line: textLine,
				col:  textCol,
			})
		}

		seg, err := scanTag(source, &pos, kind, closer)
		if err != nil {
			return nil, err
		}
		segs = append(segs, seg)

		// Next text segment starts here.
		textStart = pos.i
		textLine = pos.line
		textCol = pos.col
	}

	// Emit any trailing text.
	if textStart < len(source) {
		segs = append(segs, segment{
			kind: segText,
			text: source[textStart:],
			line: textLine,
			col:  textCol,
		})
	}

	return segs, nil
}

// scanPos is the scanner's position: the byte index i and its line and
// column.
type scanPos struct {
	i, line, col int
}

// step moves past source[p.i], counting a newline as a new line.
func (p *scanPos) step(source string) {
	if source[p.i] == '\n' {
		p.line++
		p.col = 1
	} else {
		p.col++
	}
	p.i++
}

// tagOpener returns the kind and the closer of the tag whose opener is '{'
// followed by next; ok is false when "{"+next opens no tag.
func tagOpener(next byte) (kind segKind, closer string, ok bool) {
	switch next {
	case '{':
		return segExpr, "}}", true
	case '%':
		return segStmt, "%}", true
	case '#':
		return segComment, "#}", true
	}
	return 0, "", false
}

// scanTag scans the tag of the given kind whose opener p stands on, up to
// and including its closer, and returns it as a segment; p ends after the
// closer. A tag without its closer is an error naming its line and column.
func scanTag(source string, p *scanPos, kind segKind, closer string) (segment, error) {
	tagLine := p.line
	tagCol := p.col

	// Skip past the two-character opener.
	p.i += 2
	p.col += 2

	// Check for the trim flag immediately after the opener.
	trimLeft := false
	if p.i < len(source) && source[p.i] == '-' {
		trimLeft = true
		p.i++
		p.col++
	}

	contentStart := p.i

	// Scan forward for the matching closer, respecting quoted strings.
	for p.i < len(source) {
		ch := source[p.i]

		// Handle quoted strings so that closers inside them are ignored.
		// Comments are raw text until #}, so don't treat quotes specially there.
		if kind != segComment && (ch == '\'' || ch == '"') {
			skipQuoted(source, p)
			continue
		}

		// Check for trim-right flag followed by the closer, then for the
		// two-character closer.
		trimRight := ch == '-' && p.i+2 < len(source) && source[p.i+1] == closer[0] && source[p.i+2] == closer[1]
		if trimRight || (p.i+1 < len(source) && ch == closer[0] && source[p.i+1] == closer[1]) {
			contentEnd := p.i
			n := 2
			if trimRight {
				n = 3
			}
			p.i += n
			p.col += n
			return segment{
				kind:      kind,
				text:      source[contentStart:contentEnd],
				trimLeft:  trimLeft,
				trimRight: trimRight,
				line:      tagLine,
				col:       tagCol,
			}, nil
		}

		p.step(source)
	}

	tagKind := "expression"
	switch kind {
	case segStmt:
		tagKind = "statement"
	case segComment:
		tagKind = "comment"
	}
	return segment{}, fmt.Errorf("unclosed %s tag at line %d, col %d", tagKind, tagLine, tagCol)
}

// skipQuoted moves p past the quoted string it stands on (its opening
// quote), escapes included, and past the closing quote if there is one.
func skipQuoted(source string, p *scanPos) {
	quote := source[p.i]
	p.step(source)
	for p.i < len(source) && source[p.i] != quote {
		if source[p.i] == '\\' && p.i+1 < len(source) {
			// Skip escaped character.
			if source[p.i+1] == '\n' {
				p.line++
				p.col = 1
			} else {
				p.col++
			}
			p.i++
		}
		p.step(source)
	}
	if p.i < len(source) {
		// Skip closing quote.
		p.col++
		p.i++
	}
}
