package main

import (
	"errors"
	"fmt"
	"time"

	"github.com/pipe-engine/pipe/internal/jinja"
	"github.com/pipe-engine/pipe/internal/size"
)

// TemplateLimitFlags bound every render of a Jinja chat template (--jinja,
// --chat-template FILE|SOURCE): a template is code from the model file.
// The defaults are jinja.DefaultLimits, generous for every real template.
type TemplateLimitFlags struct {
	TemplateTimeout   time.Duration `name:"chat-template-timeout" help:"Longest a Jinja chat template may take to render one prompt." default:"10s" group:"Prompt"`
	TemplateMaxOutput string        `name:"chat-template-max-output" help:"Largest prompt (or macro body) a Jinja chat template may render (default ${default}, at most 64MiB)." default:"64MiB" placeholder:"SIZE" group:"Prompt"`
	TemplateMaxMemory string        `name:"chat-template-max-memory" help:"Most memory a Jinja chat template's strings, lists and dicts may take in one render (default ${default})." default:"1GiB" placeholder:"SIZE" group:"Prompt"`
	TemplateMaxSteps  int64         `name:"chat-template-max-steps" help:"Most loop iterations and calls of one Jinja chat template render." default:"2000000" group:"Prompt"`
	TemplateMaxDepth  int           `name:"chat-template-max-depth" help:"Deepest nesting of macro calls in a Jinja chat template (at most 10000)." default:"200" group:"Prompt"`

	lim *jinja.Limits // check's result
}

// check validates the flags once, before the model is opened, and keeps
// the limits for apply.
func (f *TemplateLimitFlags) check() error {
	lim, err := f.limits()
	if err != nil {
		return err
	}
	f.lim = &lim
	return nil
}

// checked are the limits check kept (checking now if it has not run).
func (f *TemplateLimitFlags) checked() (jinja.Limits, error) {
	if f.lim == nil {
		if err := f.check(); err != nil {
			return jinja.Limits{}, err
		}
	}
	return *f.lim, nil
}

// templateLimitFlag names the flag of each jinja.Limits field.
var templateLimitFlag = map[string]string{
	"MaxOutput": "--chat-template-max-output", "MaxAlloc": "--chat-template-max-memory",
	"MaxSteps": "--chat-template-max-steps", "MaxDepth": "--chat-template-max-depth", "Timeout": "--chat-template-timeout",
}

// limits are the flags as jinja.Limits, checked once by its Validate; an
// error names the flag.
func (f *TemplateLimitFlags) limits() (jinja.Limits, error) {
	out, err := size.Parse(f.TemplateMaxOutput)
	if err != nil {
		return jinja.Limits{}, fmt.Errorf("%w: --chat-template-max-output: %w", errFlag, err)
	}
	alloc, err := size.Parse(f.TemplateMaxMemory)
	if err != nil {
		return jinja.Limits{}, fmt.Errorf("%w: --chat-template-max-memory: %w", errFlag, err)
	}
	lim := jinja.Limits{MaxOutput: out, MaxAlloc: alloc, MaxSteps: f.TemplateMaxSteps, MaxDepth: f.TemplateMaxDepth, Timeout: f.TemplateTimeout}
	// 0 would mean the default to jinja; on the command line it is a mistake.
	for _, z := range []struct {
		field string
		zero  bool
	}{{"MaxSteps", lim.MaxSteps == 0}, {"MaxDepth", lim.MaxDepth == 0}, {"Timeout", lim.Timeout == 0}} {
		if z.zero {
			return jinja.Limits{}, fmt.Errorf("%w: %s: 0: must be positive", errFlag, templateLimitFlag[z.field])
		}
	}
	if err := lim.Validate(); err != nil {
		var le *jinja.LimitsError
		if errors.As(err, &le) {
			return jinja.Limits{}, fmt.Errorf("%w: %s: %w", errFlag, templateLimitFlag[le.Field], err)
		}
		return jinja.Limits{}, fmt.Errorf("%w: %w", errFlag, err)
	}
	return lim, nil
}
