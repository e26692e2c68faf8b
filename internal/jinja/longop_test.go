package jinja

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"sync/atomic"
	"testing"
	"time"
)

// longOps are single operations that run long on a big value: each is one
// or two steps of the render, so only a check inside the operation stops it.
var longOps = map[string]string{
	"repeat":         `{{ (bigstr * 8)|length }}`,
	"replace-method": `{{ bigstr.replace('x', 'yy')|length }}`,
	"replace-filter": `{{ (bigstr|replace('x', 'yy'))|length }}`,
	"replace-empty":  `{{ bigstr.replace('', '-')|length }}`,
	"format":         `{{ (fmtstr.format(arg))|length }}`,
	"join":           `{{ biglist|join(',')|length }}`,
	"tojson":         `{{ biglist|tojson|length }}`,
	"sort":           `{{ biglist|sort|first }}`,
	"dictsort":       `{{ bigdict|dictsort(reverse=true)|first }}`,
	"unique":         `{{ biglist|unique|length }}`,
	"select":         `{{ biglist|select('odd')|list|length }}`,
	"selectattr":     `{{ dicts|selectattr('a')|list|length }}`,
	"map":            `{{ dicts|map(attribute='a')|list|length }}`,
}

// longOpData are the big values longOps work on.
func longOpData() map[string]any {
	l := make([]any, 200_000)
	ds := make([]any, len(l))
	d := make(map[string]any, 50_000)
	for i := range l {
		l[i] = len(l) - i
		ds[i] = map[string]any{"a": i}
		if i < 50_000 {
			d[fmt.Sprintf("k%06d", (i*7919)%50_000)] = i
		}
	}
	return map[string]any{"bigstr": strings.Repeat("x", 4<<20), "fmtstr": strings.Repeat("{0}", 1000), "arg": strings.Repeat("x", 1000),
		"biglist": l, "dicts": ds, "bigdict": d}
}

// longOpInputs are the values of data that src names.
func longOpInputs(src string, data map[string]any) map[string]any {
	in := map[string]any{}
	for k, v := range data {
		if strings.Contains(src, k) {
			in[k] = v
		}
	}
	return in
}

// TestLongOpStopsAtDeadline: with a deadline already passed when the render
// starts, each single long operation must stop with the time limit. Before
// the operations polled the budget, the deadline was checked only every 64
// steps, so these renders of two or three steps ran to the end.
func TestLongOpStopsAtDeadline(t *testing.T) {
	data := longOpData()
	for name, src := range longOps {
		t.Run(name, func(t *testing.T) {
			tmpl, err := Compile(src)
			if err != nil {
				t.Fatal(err)
			}
			out, err := tmpl.RenderContext(context.Background(), longOpInputs(src, data), Limits{Timeout: time.Nanosecond})
			var le *LimitError
			if !errors.As(err, &le) || le.Limit != "time" {
				t.Fatalf("rendered %.40q, err %v; want the time limit", out, err)
			}
		})
	}
}

// cancelAfterCtx is a context whose Err turns context.Canceled after n
// calls: the render's own checks are what cancel it, not the clock.
type cancelAfterCtx struct {
	context.Context
	n atomic.Int64
}

func (c *cancelAfterCtx) Err() error {
	if c.n.Add(-1) < 0 {
		return context.Canceled
	}
	return nil
}

// TestLongOpStopsOnCancel: a context cancelled while one long operation runs
// (after the render's first check) stops it with the context's error. The
// time limit is an hour, so only the cancellation can stop the render: with
// the default 10 s, a race-instrumented run on a loaded machine (issue 38,
// load 37) reached the deadline before the fourth check and failed with
// the time limit instead ("unique").
func TestLongOpStopsOnCancel(t *testing.T) {
	data := longOpData()
	for name, src := range longOps {
		t.Run(name, func(t *testing.T) {
			tmpl, err := Compile(src)
			if err != nil {
				t.Fatal(err)
			}
			// The steps before the operation (its evaluation and the
			// filter call) each check the context once.
			ctx := &cancelAfterCtx{Context: context.Background()}
			ctx.n.Store(3)
			out, err := tmpl.RenderContext(ctx, longOpInputs(src, data), Limits{Timeout: time.Hour})
			if !errors.Is(err, context.Canceled) {
				t.Fatalf("rendered %.40q, err %v; want context.Canceled", out, err)
			}
		})
	}
}

// TestRepeatAndReplaceUnchanged: the polled repeat and replace build what
// strings.Repeat and strings.Replace do, across chunk boundaries.
func TestRepeatAndReplaceUnchanged(t *testing.T) {
	b := newBudget(context.Background(), Limits{})
	for _, s := range []string{"x", "abc", "héllo", strings.Repeat("q", repeatChunk+7)} {
		for _, n := range []int{1, 2, 3, 1000, repeatChunk/len(s) + 3} {
			if len(s)*n > 8<<20 {
				continue
			}
			v, err := repeatPolled(b, s, n)
			if err != nil {
				t.Fatalf("repeat %d×%d: %v", len(s), n, err)
			}
			if v.AsString() != strings.Repeat(s, n) {
				t.Fatalf("repeat %d×%d differs from strings.Repeat", len(s), n)
			}
		}
	}
	for _, c := range []struct{ s, old, repl string }{
		{"", "", "-"}, {"abc", "", "-"}, {"héllo", "", "<>"}, {"aaaa", "aa", "b"}, {"abcabc", "bc", "XYZ"}, {"abc", "z", "y"}, {"xax", "x", ""},
	} {
		for _, count := range []int{-1, 0, 1, 2} {
			v, err := replaceBounded(b, c.s, c.old, c.repl, count)
			if err != nil {
				t.Fatalf("replace(%q, %q, %q, %d): %v", c.s, c.old, c.repl, count, err)
			}
			if want := strings.Replace(c.s, c.old, c.repl, count); v.AsString() != want {
				t.Errorf("replace(%q, %q, %q, %d) = %q; want %q", c.s, c.old, c.repl, count, v.AsString(), want)
			}
		}
	}
}

// TestLimitsValidate: every field out of range is a LimitsError naming it;
// the widest valid call depth stops a recursive macro with the depth limit,
// not a stack overflow.
func TestLimitsValidate(t *testing.T) {
	if err := DefaultLimits().Validate(); err != nil {
		t.Fatalf("DefaultLimits: %v", err)
	}
	if err := (Limits{}).Validate(); err != nil {
		t.Fatalf("zero Limits: %v", err)
	}
	for field, l := range map[string]Limits{
		"MaxOutput": {MaxOutput: MaxValueBytes + 1}, "MaxAlloc": {MaxAlloc: -1}, "MaxSteps": {MaxSteps: -1},
		"MaxDepth": {MaxDepth: MaxCallDepth + 1}, "Timeout": {Timeout: -time.Second},
	} {
		var le *LimitsError
		if err := l.Validate(); !errors.As(err, &le) || le.Field != field || !errors.Is(err, ErrBadLimits) {
			t.Errorf("%s: %v", field, err)
		}
	}
	tmpl, err := Compile(`{% macro f(n) %}{{ f(n + 1) }}{% endmacro %}{{ f(0) }}`)
	if err != nil {
		t.Fatal(err)
	}
	_, err = tmpl.RenderContext(context.Background(), nil, Limits{MaxDepth: MaxCallDepth})
	var le *LimitError
	if !errors.As(err, &le) || le.Limit != "call depth" {
		t.Fatalf("recursion at MaxDepth %d: %v", MaxCallDepth, err)
	}
}
