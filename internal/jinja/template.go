package jinja

import (
	"context"
	"errors"
	"fmt"
)

// Template is a compiled Jinja template ready for rendering.
type Template struct {
	nodes []node
	src   string
}

// Compile parses a Jinja template source string and returns a compiled
// template that can be rendered multiple times with different data.
func Compile(source string) (*Template, error) {
	segs, err := scan(source)
	if err != nil {
		return nil, fmt.Errorf("jinja scan: %w", err)
	}

	nodes, err := parseTemplate(segs)
	if err != nil {
		return nil, fmt.Errorf("jinja parse: %w", err)
	}

	return &Template{nodes: nodes, src: source}, nil
}

// Render executes the template with the provided data under DefaultLimits
// and returns the rendered string. Each call creates an isolated scope so
// templates are safe to render concurrently after compilation.
func (t *Template) Render(data map[string]any) (string, error) {
	return t.RenderContext(context.Background(), data, Limits{})
}

// RenderContext is Render bounded by lim (zero fields: DefaultLimits) and
// stopped by ctx. A limit hit is a *LimitError (errors.Is ErrLimit); a
// cancelled ctx is an error wrapping its cause.
func (t *Template) RenderContext(ctx context.Context, data map[string]any, lim Limits) (string, error) {
	// Convert Go data to Value types.
	vals := make(map[string]Value, len(data))
	for k, v := range data {
		vals[k] = FromGoValue(v)
	}

	return render(t.nodes, vals, newBudget(ctx, lim))
}

// RenderValues is like Render but accepts pre-converted Value data.
func (t *Template) RenderValues(data map[string]Value) (string, error) {
	return render(t.nodes, data, newBudget(context.Background(), Limits{}))
}

// =============================================================================

// render executes the AST with the given data and returns the result. A
// limit hit deep in value printing arrives as a limitPanic; any other panic
// is a defect of the engine, returned as an error rather than taking the
// process down.
func render(nodes []node, data map[string]Value, b *budget) (out string, err error) {
	defer func() {
		if r := recover(); r != nil {
			if lp, ok := r.(limitPanic); ok {
				out, err = "", lp.err
				return
			}
			out, err = "", fmt.Errorf("%w: %v", ErrEngine, r)
		}
	}()
	e := evaluator{b: b}

	// Use the cached builtins scope directly. The scope is initialized
	// once at package init and is only read after that (lookupFilter,
	// chained get() through parent links, passed to nested evaluators).
	// No code path writes to e.builtins, so sharing the cached scope
	// across renders is safe and avoids cloning ~20 entries per render.
	e.builtins = cachedBuiltins

	// Create user data scope on top of builtins.
	e.scope = newScope(e.builtins)
	for k, v := range data {
		e.scope.set(k, v)
	}

	if err := e.execNodes(nodes); err != nil {
		return "", err
	}

	return e.output.String(), nil
}

// ErrEngine is a panic inside the engine, recovered into an error.
var ErrEngine = errors.New("template engine failure")
