package main

import (
	"io"
	"strings"
	"testing"
	"time"

	"github.com/pipe-engine/pipe/internal/jinja"
)

// TestTemplateLimitFlagsBad: a bad template limit stops run and serve
// before the model is opened (the model path does not exist), with an
// error naming the flag.
func TestTemplateLimitFlagsBad(t *testing.T) {
	for _, c := range []struct{ flag, value string }{
		{"--chat-template-max-depth", "-1"},
		{"--chat-template-max-depth", "100000"},
		{"--chat-template-max-output", "1G"},
		{"--chat-template-max-output", "lots"},
		{"--chat-template-max-memory", "-5M"},
		{"--chat-template-max-steps", "0"},
		{"--chat-template-max-steps", "-3"},
		{"--chat-template-timeout", "-1s"},
		{"--chat-template-timeout", "0s"},
	} {
		for _, cmd := range []string{"run", "serve"} {
			code, stderr := runCode(t, nil, "--log-format", "console", cmd, "-m", "no-such-model.gguf", c.flag+"="+c.value)
			noStack(t, stderr)
			if code == 0 || !strings.Contains(stderr, "bad flag: "+c.flag+": ") || strings.Contains(stderr, "no-such-model") {
				t.Errorf("%s %s %s: exit %d: %s", cmd, c.flag, c.value, code, stderr)
			}
		}
	}
}

// TestTemplateLimitFlagsDefaults: the flags' defaults are
// jinja.DefaultLimits, so that not giving them changes nothing.
func TestTemplateLimitFlagsDefaults(t *testing.T) {
	f := TemplateLimitFlags{TemplateTimeout: 10 * time.Second, TemplateMaxOutput: "64MiB", TemplateMaxMemory: "1GiB", TemplateMaxSteps: 2_000_000, TemplateMaxDepth: 200}
	got, err := f.limits()
	if err != nil || got != jinja.DefaultLimits() {
		t.Fatalf("limits %+v, %v; DefaultLimits %+v", got, err, jinja.DefaultLimits())
	}
	var cli CLI
	k, err := parser(&cli, io.Discard, io.Discard, func(int) {})
	if err != nil {
		t.Fatal(err)
	}
	if _, err := k.Parse([]string{"serve"}); err != nil {
		t.Fatal(err)
	}
	if cli.Serve.TemplateLimitFlags != f {
		t.Errorf("serve's default flags %+v, want %+v", cli.Serve.TemplateLimitFlags, f)
	}
}

// TestTemplateLimitFlagsApply: --chat-template-max-steps bounds the test
// render of the model's template: 1 step is too few for its loop over
// the probe's two messages.
func TestTemplateLimitFlagsApply(t *testing.T) {
	const tiny = "../../testdata/golden/models/tiny-qwen3moe-Q8_0.gguf"
	base := []string{"--log-format", "console", "run", "-m", tiny, "-n", "1", "--temp", "0", "--hot-set", "none", "--cache-mb", "4M", "-p", "hi", "--jinja"}
	if code, stderr := runCode(t, nil, base...); code != 0 {
		t.Fatalf("default limits: exit %d: %s", code, stderr)
	}
	code, stderr := runCode(t, nil, append(base, "--chat-template-max-steps", "1")...)
	noStack(t, stderr)
	if code == 0 || !strings.Contains(stderr, "steps limit (1)") || !strings.Contains(stderr, "tokenizer.chat_template") {
		t.Errorf("--chat-template-max-steps 1: exit %d: %s", code, stderr)
	}
}
