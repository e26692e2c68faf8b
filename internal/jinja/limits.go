package jinja

import (
	"context"
	"errors"
	"fmt"
	"time"
)

// Limits bound one render of a template. A zero field takes its value from
// DefaultLimits.
type Limits struct {
	MaxOutput int64         // bytes of any one rendered body (the output, a macro's, a set block's)
	MaxAlloc  int64         // bytes of strings, list and dict slots the render creates, summed
	MaxSteps  int64         // loop iterations plus calls of macros, filters and functions
	MaxDepth  int           // nesting of macro and caller calls
	Timeout   time.Duration // wall-clock time of the render
}

// DefaultLimits are generous for every real chat template (they render in
// milliseconds, a few thousand steps and a call depth under 20) and stop
// a hostile one within seconds and well under 1 GiB.
func DefaultLimits() Limits {
	return Limits{MaxOutput: MaxValueBytes, MaxAlloc: 1 << 30, MaxSteps: 2_000_000, MaxDepth: 200, Timeout: 10 * time.Second}
}

// MaxCallDepth bounds Limits.MaxDepth: each macro call nests a few
// evaluator frames on the goroutine's stack.
const MaxCallDepth = 10_000

// ErrBadLimits is what every LimitsError matches with errors.Is.
var ErrBadLimits = errors.New("bad template limits")

// LimitsError is a Limits field Validate refuses; Field is its name.
type LimitsError struct {
	Field string // "MaxOutput", "MaxAlloc", "MaxSteps", "MaxDepth", "Timeout"
	Value any
	Range string
}

func (e *LimitsError) Error() string {
	return fmt.Sprintf("%s %v: must be %s (0: the default)", e.Field, e.Value, e.Range)
}

// Is makes every LimitsError match ErrBadLimits.
func (e *LimitsError) Is(target error) bool { return target == ErrBadLimits }

// Validate checks every field is 0 (the default) or in its range: the
// output at most MaxValueBytes (no string can be longer), the call depth at
// most MaxCallDepth, the others positive.
func (l Limits) Validate() error {
	switch {
	case l.MaxOutput < 0 || l.MaxOutput > MaxValueBytes:
		return &LimitsError{"MaxOutput", l.MaxOutput, fmt.Sprintf("in 1..%d bytes", int64(MaxValueBytes))}
	case l.MaxAlloc < 0:
		return &LimitsError{"MaxAlloc", l.MaxAlloc, "positive"}
	case l.MaxSteps < 0:
		return &LimitsError{"MaxSteps", l.MaxSteps, "positive"}
	case l.MaxDepth < 0 || l.MaxDepth > MaxCallDepth:
		return &LimitsError{"MaxDepth", l.MaxDepth, fmt.Sprintf("in 1..%d", MaxCallDepth)}
	case l.Timeout < 0:
		return &LimitsError{"Timeout", l.Timeout, "positive"}
	}
	return nil
}

// The fixed caps every render has, whatever its Limits: the size of one
// string value, the items of one list or dict, and the nesting of a
// template's blocks and expressions and of its values.
const (
	MaxValueBytes = 64 << 20
	MaxItems      = 1 << 20
	MaxNesting    = 256
)

// ErrLimit is what every LimitError matches with errors.Is.
var ErrLimit = errors.New("template limit exceeded")

// LimitError is a render or parse stopped by one of its limits.
type LimitError struct {
	Limit string // "output", "allocation", "steps", "call depth", "time", "value size", "items", "nesting"
	Max   int64
}

func (e *LimitError) Error() string {
	if e.Limit == "time" {
		return fmt.Sprintf("template exceeds its time limit (%v)", time.Duration(e.Max))
	}
	return fmt.Sprintf("template exceeds its %s limit (%d)", e.Limit, e.Max)
}

// Is makes every LimitError match ErrLimit.
func (e *LimitError) Is(target error) bool { return target == ErrLimit }

func limitErr(name string, max int64) error { return &LimitError{Limit: name, Max: max} }

// limitPanic carries a LimitError out of code that cannot return one (value
// printing and comparison); render recovers it.
type limitPanic struct{ err error }

func overLimit(name string, max int64) { panic(limitPanic{limitErr(name, max)}) }

// checkValueSize is the fixed cap on a string about to be built.
func checkValueSize(n int64) error {
	if n > MaxValueBytes || n < 0 {
		return limitErr("value size", MaxValueBytes)
	}
	return nil
}

// checkItems is the fixed cap on a list or dict about to be built.
func checkItems(n int64) error {
	if n > MaxItems || n < 0 {
		return limitErr("items", MaxItems)
	}
	return nil
}

// budget is one render's limits and what it has used; the evaluators of a
// render (its macros, callers and blocks) share it.
type budget struct {
	ctx      context.Context
	lim      Limits
	deadline time.Time
	steps    int64
	alloc    int64
	depth    int
	// exprDepth is the recursion of expression evaluation (evalExpr).
	exprDepth int
	// work counts the units (bytes built, items visited, comparisons)
	// of single long operations; at nextPoll, poll checks the context and
	// the deadline again.
	work, nextPoll int64
}

func newBudget(ctx context.Context, lim Limits) *budget {
	def := DefaultLimits()
	if lim.MaxOutput <= 0 || lim.MaxOutput > MaxValueBytes {
		lim.MaxOutput = def.MaxOutput
	}
	if lim.MaxAlloc <= 0 {
		lim.MaxAlloc = def.MaxAlloc
	}
	if lim.MaxSteps <= 0 {
		lim.MaxSteps = def.MaxSteps
	}
	if lim.MaxDepth <= 0 {
		lim.MaxDepth = def.MaxDepth
	}
	if lim.Timeout <= 0 {
		lim.Timeout = def.Timeout
	}
	return &budget{ctx: ctx, lim: lim, deadline: time.Now().Add(lim.Timeout)}
}

// step counts one loop iteration or call and checks the step limit, the
// caller's context and the deadline.
func (b *budget) step() error {
	b.steps++
	if b.steps > b.lim.MaxSteps {
		return limitErr("steps", b.lim.MaxSteps)
	}
	if err := b.ctx.Err(); err != nil {
		return fmt.Errorf("template render stopped: %w", context.Cause(b.ctx))
	}
	if b.steps&63 == 0 && time.Now().After(b.deadline) {
		return limitErr("time", int64(b.lim.Timeout))
	}
	return nil
}

// pollEvery is how much work a long single operation (a string repeated,
// replaced or joined, a value encoded as JSON, a sort, a filter's loop over
// a list) does between two checks of the context and the deadline.
const pollEvery = 1 << 16

// poll counts n units of work inside one operation and checks the caller's
// context and the deadline at its first call and every pollEvery units, so
// that one big operation stops as a loop of small ones does. A nil budget
// (a builtin called outside a render) never stops.
func (b *budget) poll(n int64) error {
	if b == nil {
		return nil
	}
	b.work += n
	if b.work < b.nextPoll {
		return nil
	}
	b.nextPoll = b.work + pollEvery
	if err := b.ctx.Err(); err != nil {
		return fmt.Errorf("template render stopped: %w", context.Cause(b.ctx))
	}
	if time.Now().After(b.deadline) {
		return limitErr("time", int64(b.lim.Timeout))
	}
	return nil
}

// mustPoll is poll for code that cannot return an error (a sort's
// comparison): it panics with a limitPanic, which render recovers.
func (b *budget) mustPoll(n int64) {
	if err := b.poll(n); err != nil {
		panic(limitPanic{err})
	}
}

// charge counts n bytes the render allocated.
func (b *budget) charge(n int64) error {
	b.alloc += n
	if b.alloc > b.lim.MaxAlloc {
		return limitErr("allocation", b.lim.MaxAlloc)
	}
	return nil
}

// chargeValue charges a value the render created and checks the fixed caps
// on its size.
func (b *budget) chargeValue(v Value) error {
	switch v.kind {
	case KindString:
		n := int64(len(v.AsString()))
		if err := checkValueSize(n); err != nil {
			return err
		}
		return b.charge(n)
	case KindList:
		n := int64(v.AsList().Len())
		if err := checkItems(n); err != nil {
			return err
		}
		return b.charge(24 * n)
	case KindDict:
		n := int64(v.AsDict().Len())
		if err := checkItems(n); err != nil {
			return err
		}
		return b.charge(48 * n)
	}
	return nil
}

// enter and leave bound the nesting of macro and caller calls.
func (b *budget) enter() error {
	b.depth++
	if b.depth > b.lim.MaxDepth {
		b.depth--
		return limitErr("call depth", int64(b.lim.MaxDepth))
	}
	return b.step()
}

func (b *budget) leave() { b.depth-- }
