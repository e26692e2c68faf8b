package jinja

import (
	"context"
	"errors"
	"strings"
	"testing"
	"time"
)

// hostileTemplates are issue 35's reproducers: each must end with a
// LimitError (or, where noted, sane output), never a panic, a fatal
// out-of-memory or a stack overflow.
var hostileTemplates = map[string]string{
	"repeat":          `{{ 'x' * 1000000000 }}`,
	"repeat-huge":     `{{ 'x' * 1000000000000 }}`,
	"range":           `{% for i in range(10**12) %}{% endfor %}`,
	"range-list":      `{{ range(10**12)|length }}`,
	"nested-loops":    `{% for i in range(1000000) %}{% for j in range(1000000) %}{% endfor %}{% endfor %}`,
	"doubling":        `{% set ns = namespace(s='x') %}{% for i in range(100) %}{% set ns.s = ns.s + ns.s %}{% endfor %}{{ ns.s|length }}`,
	"doubling-tilde":  `{% set ns = namespace(s='x') %}{% for i in range(100) %}{% set ns.s = ns.s ~ ns.s %}{% endfor %}`,
	"list-doubling":   `{% set ns = namespace(l=[1]) %}{% for i in range(100) %}{% set ns.l = ns.l + ns.l %}{% endfor %}`,
	"tojson-indent":   `{{ [1,2,3]|tojson(indent=1000000000) }}`,
	"tojson-nested":   `{% set ns = namespace(l=[1]) %}{% for i in range(40) %}{% set ns.l = [ns.l, ns.l] %}{% endfor %}{{ ns.l|tojson(indent=2) }}`,
	"replace-empty":   `{% set s = 'x' * 10000000 %}{{ s.replace('', 'yyyyyyyyyy') }}`,
	"replace-filter":  `{% set s = 'x' * 10000000 %}{{ s|replace('', 'yyyyyyyyyy') }}`,
	"macro-recursion": `{% macro f(n) %}{{ f(n + 1) }}{% endmacro %}{{ f(0) }}`,
	"caller-output":   `{% macro f() %}{{ caller() }}{{ caller() }}{% endmacro %}{% set ns = namespace(s='x' * 1000000) %}{% for i in range(100) %}{% call f() %}{{ ns.s }}{% endcall %}{% endfor %}`,
	"parens":          `{{ ` + strings.Repeat("(", 1000000) + "1" + strings.Repeat(")", 1000000) + ` }}`,
	"not-chain":       `{{ ` + strings.Repeat("not ", 1000000) + `1 }}`,
	"minus-chain":     `{{ ` + strings.Repeat("- ", 1000000) + `1 }}`,
	"list-nesting":    `{{ ` + strings.Repeat("[", 1000000) + strings.Repeat("]", 1000000) + ` }}`,
	"tilde-chain":     `{{ 1` + strings.Repeat(" ~ 1", 100000) + ` }}`,
	"nested-ifs":      strings.Repeat("{% if true %}", 100000) + "x" + strings.Repeat("{% endif %}", 100000),
	"join-sep":        `{{ range(1000000)|join('x' * 1000) }}`,
	"indent":          `{{ ('a\n' * 1000000)|indent(1000) }}`,
	"format":          `{{ ('{0}' * 1000000).format('x' * 1000) }}`,
	"string-list":     `{{ ('x' * 60000000)|list|length }}`,
	"split":           `{{ ('x' * 60000000).split('')|length }}`,
	"self-append":     `{% set l = [1] %}{% set _ = l.append(l) %}{{ l }}`,
	"self-equal":      `{% set l = [1] %}{% set _ = l.append(l) %}{{ l == l }}`,
	"self-tojson":     `{% set l = [1] %}{% set _ = l.append(l) %}{{ l|tojson }}`,
	"dag-equal":       `{% set ns = namespace(l=[1]) %}{% for i in range(60) %}{% set ns.l = [ns.l, ns.l] %}{% endfor %}{{ ns.l == ns.l }}`,
	"dag-print":       `{% set ns = namespace(l=[1]) %}{% for i in range(60) %}{% set ns.l = [ns.l, ns.l] %}{% endfor %}{{ ns.l }}`,
	"append-loop":     `{% set l = [] %}{% for i in range(2000000) %}{% set _ = l.append(i) %}{% endfor %}`,
	"fromjson-big":    `{{ ('[' ~ '0,' * 5000000 ~ '0]')|fromjson|length }}`,
	"output":          `{% for i in range(100000) %}{{ 'x' * 1000 }}{% endfor %}`,
}

// saneTemplates render without error: the fixes change what upstream did
// wrong (a panic) into Python's answer.
var saneTemplates = map[string]struct{ src, want string }{
	"repeat-negative": {`[{{ 'x' * -1 }}]`, "[]"},
	"indent-negative": {`{{ 'a\nb'|indent(-3) }}`, "a\nb"},
	"tojson-negative": {`{{ [1]|tojson(indent=-2) }}`, "[\n1\n]"},
	"slice-clamped":   {`{{ [1,2,3,4][0:10**12:2] }}{{ 'abcd'[0:10**12:3] }}`, "[1, 3]ad"},
	"slice-negative":  {`{{ [1,2,3,4][10**12::-2] }}`, "[4, 2]"},
}

// reproducerLimits are the defaults, or under -short (the race detector's
// run, where a 64 MiB string takes seconds to build) limits a thousand
// times tighter: every reproducer must hit a limit either way.
func reproducerLimits() Limits {
	if testing.Short() {
		return Limits{MaxOutput: 1 << 20, MaxAlloc: 16 << 20, MaxSteps: 20_000}
	}
	return Limits{}
}

// slowShort are reproducers of the fixed caps (MaxValueBytes, MaxNesting)
// that no Limits make cheaper: seconds each, tens under the race detector,
// so the -short run leaves them to the full one.
var slowShort = map[string]bool{"dag-print": true, "list-nesting": true, "parens": true}

func TestHostileTemplatesHitALimit(t *testing.T) {
	for name, src := range hostileTemplates {
		t.Run(name, func(t *testing.T) {
			if testing.Short() && slowShort[name] {
				t.Skip("a fixed cap's reproducer: seconds per run, left to the run without -short")
			}
			tmpl, err := Compile(src)
			if err == nil {
				_, err = tmpl.RenderContext(context.Background(), map[string]any{}, reproducerLimits())
			}
			if !errors.Is(err, ErrLimit) {
				t.Fatalf("got %v, want a limit error", err)
			}
		})
	}
}

func TestFixedPanicsRenderAsPython(t *testing.T) {
	for name, c := range saneTemplates {
		t.Run(name, func(t *testing.T) {
			tmpl, err := Compile(c.src)
			if err != nil {
				t.Fatal(err)
			}
			got, err := tmpl.Render(map[string]any{})
			if err != nil || got != c.want {
				t.Fatalf("got %q, %v; want %q", got, err, c.want)
			}
		})
	}
}

func TestLimitErrorNamesTheLimit(t *testing.T) {
	tmpl, err := Compile(`{% macro f(n) %}{{ f(n + 1) }}{% endmacro %}{{ f(0) }}`)
	if err != nil {
		t.Fatal(err)
	}
	_, err = tmpl.RenderContext(context.Background(), nil, Limits{MaxDepth: 7})
	var le *LimitError
	if !errors.As(err, &le) || le.Limit != "call depth" || le.Max != 7 {
		t.Fatalf("got %v, want the call depth limit 7", err)
	}
	if !strings.Contains(err.Error(), "call depth limit (7)") {
		t.Errorf("message %q does not name the limit", err)
	}
}

func TestRenderStopsOnContext(t *testing.T) {
	tmpl, err := Compile(`{% for i in range(1000000) %}{% for j in range(1000000) %}{% endfor %}{% endfor %}`)
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	_, err = tmpl.RenderContext(ctx, nil, Limits{MaxSteps: 1 << 62})
	if !errors.Is(err, context.Canceled) {
		t.Fatalf("got %v, want context.Canceled", err)
	}
}

func TestRenderStopsAtDeadline(t *testing.T) {
	tmpl, err := Compile(`{% for i in range(100000) %}{% for j in range(100000) %}{% endfor %}{% endfor %}`)
	if err != nil {
		t.Fatal(err)
	}
	_, err = tmpl.RenderContext(context.Background(), nil, Limits{MaxSteps: 1 << 62, Timeout: time.Nanosecond})
	var le *LimitError
	if !errors.As(err, &le) || le.Limit != "time" {
		t.Fatalf("got %v, want the time limit", err)
	}
}

// TestParseIsLinear compiles 200,000 tags with no text between them, which
// the quadratic trimming pass took minutes over, and a long flat template.
func TestParseIsLinear(t *testing.T) {
	src := strings.Repeat("{% if true %}{% endif %}", 100000)
	tmpl, err := Compile(src)
	if err != nil {
		t.Fatal(err)
	}
	if out, err := tmpl.Render(nil); err != nil || out != "" {
		t.Fatalf("got %q, %v", out, err)
	}
	deep := strings.Repeat("{% if true %}", MaxNesting-1) + "x" + strings.Repeat("{% endif %}", MaxNesting-1)
	tmpl, err = Compile(deep)
	if err != nil {
		t.Fatalf("%d nested ifs: %v", MaxNesting-1, err)
	}
	if out, err := tmpl.Render(nil); err != nil || out != "x" {
		t.Fatalf("got %q, %v", out, err)
	}
}
