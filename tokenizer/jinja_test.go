package tokenizer

import (
	"context"
	"encoding/json"
	"errors"
	"os"
	"strings"
	"testing"

	"github.com/pipe-engine/pipe/internal/jinja"
)

const templates = "../testdata/chat-templates/"

// conversation is test-chat-template.cpp's.
var conversation = []Message{
	{Role: "system", Content: "You are a helpful assistant"},
	{Role: "user", Content: "Hello"},
	{Role: "assistant", Content: "Hi there"},
	{Role: "user", Content: "Who are you"},
	{Role: "assistant", Content: "   I am an assistant   "},
	{Role: "user", Content: "Another question"},
}

// llamaCase is one of test-chat-template.cpp's cases (extracted to JSON).
type llamaCase struct {
	Name               string    `json:"name"`
	Template           string    `json:"template_str"`
	Expected           string    `json:"expected_output"`
	ExpectedJinja      string    `json:"expected_output_jinja"`
	BOS                string    `json:"bos_token"`
	EOS                string    `json:"eos_token"`
	SupportedWithJinja *bool     `json:"supported_with_jinja"`
	Extra              []Message `json:"extra_conversation"`
}

// TestJinjaLlamaCases renders every template of llama.cpp's
// test-chat-template.cpp its Jinja run checks, with its conversation and
// tokens, and compares the outputs it expects.
func TestJinjaLlamaCases(t *testing.T) {
	b, err := os.ReadFile(templates + "test-chat-template-cases.json")
	if err != nil {
		t.Fatal(err)
	}
	var cases []llamaCase
	if err := json.Unmarshal(b, &cases); err != nil {
		t.Fatal(err)
	}
	// the cases this engine renders differently from llama.cpp's, and why
	known := map[string]string{
		"ChatGLM3": "the engine drops the space in `|>\\n {{` (text before an expression)",
	}
	run, equal := 0, 0
	for _, c := range cases {
		if c.SupportedWithJinja != nil && !*c.SupportedWithJinja {
			continue
		}
		run++
		want := c.ExpectedJinja
		if want == "" {
			want = c.Expected
		}
		tmpl, err := compileJinja(c.Template, c.Name, jinja.Limits{})
		if err != nil {
			t.Errorf("%s: %v", c.Name, err)
			continue
		}
		got, err := renderJinja(context.Background(), tmpl, append(append([]Message(nil), conversation...), c.Extra...), true, false, c.BOS, c.EOS)
		if why, ok := known[c.Name]; ok {
			if got == want {
				t.Errorf("%s: now equal (%s no longer holds): drop it from known", c.Name, why)
			}
			continue
		}
		if err != nil || got != want {
			t.Errorf("%s: %v\n got %q\nwant %q", c.Name, err, got, want)
			continue
		}
		equal++
	}
	t.Logf("llama.cpp's test-chat-template cases: %d run, %d equal", run, equal)
	if run < 30 {
		t.Fatalf("only %d cases", run)
	}
}

// TestJinjaFamilies: the templates of the families pipe runs, from
// llama.cpp's corpus, rendered as Jinja give what the built-in renderers
// give (the fast default) — except gpt-oss's, whose template writes a
// system preamble (model identity, date, reasoning effort) that the
// built-in harmony renderer, like llama.cpp's own, leaves out.
func TestJinjaFamilies(t *testing.T) {
	for _, c := range []struct {
		vocab, template string
		// the built-in renderer's output equals the Jinja one for these
		// noThink values (enable_thinking = !noThink; llama.cpp's default is
		// thinking on, Gemma 4's built-in renders its template's default, off)
		equal []bool
	}{
		{"testdata/qwen3-vocab.gguf", "Qwen-Qwen3-0.6B.jinja", []bool{false, true}},
		{"testdata/qwen3-vocab.gguf", "Qwen3-Coder.jinja", []bool{false}},
		{"../testdata/gemma4-vocab/vocab.gguf", "google-gemma-4-31B-it.jinja", []bool{true}},
		{"../testdata/gemma4-vocab/vocab.gguf", "google-gemma-4-31B-it-interleaved.jinja", []bool{true}},
		{"testdata/gptoss-vocab.gguf", "openai-gpt-oss-120b.jinja", nil},
	} {
		src, err := os.ReadFile(templates + c.template)
		if err != nil {
			t.Fatal(err)
		}
		tok := fromFile(t, c.vocab) // its own: UseJinja changes it
		if err := tok.UseBuiltin(detectName(string(src))); err != nil {
			t.Fatalf("%s: %v", c.template, err)
		}
		eot, eotOK := tok.EndOfTurn()
		var builtin []string
		for _, noThink := range c.equal {
			b, err := tok.Chat(conversation, true, noThink)
			if err != nil {
				t.Fatalf("%s built-in: %v", c.template, err)
			}
			builtin = append(builtin, b)
		}
		if err := tok.UseJinja(string(src), c.template); err != nil {
			t.Fatalf("%s: %v", c.template, err)
		}
		for i, noThink := range c.equal {
			got, err := tok.Chat(conversation, true, noThink)
			if err != nil || got != builtin[i] {
				t.Errorf("%s (noThink %v): %v\nJinja    %q\nbuilt-in %q", c.template, noThink, err, got, builtin[i])
			}
		}
		if c.equal == nil {
			// harmony: the template's system preamble (identity, date,
			// reasoning effort) and the developer message the built-in
			// renderer, like llama.cpp's, leaves out
			got, err := tok.Chat(conversation, true, false)
			if err != nil || !strings.HasPrefix(got, "<|start|>system<|message|>You are ChatGPT") ||
				!strings.HasSuffix(got, "<|start|>user<|message|>Another question<|end|><|start|>assistant") {
				t.Errorf("%s: %v %q", c.template, err, got)
			}
		}
		if e, ok := tok.EndOfTurn(); e != eot || ok != eotOK || tok.ChatFormat() != "jinja" {
			t.Errorf("%s: end of turn %d %v, built-in %d %v; format %q", c.template, e, ok, eot, eotOK, tok.ChatFormat())
		}
	}
}

func detectName(src string) string { return formatName(detectChatFormat(src)) }

func TestUseTemplateErrors(t *testing.T) {
	tok := fromFile(t, "testdata/qwen3-vocab.gguf")
	if err := tok.UseBuiltin("llama5"); !errors.Is(err, ErrUnsupportedTemplate) {
		t.Errorf("UseBuiltin(llama5): %v", err)
	}
	if err := tok.UseJinja("{% for m in messages %}", "test"); err == nil {
		t.Error("an unclosed for compiled")
	}
	if err := tok.UseJinja("{{ raise_exception('no system role') }}", "test"); err != nil {
		t.Fatal(err)
	}
	if _, err := tok.Chat(conversation, true, false); err == nil || !strings.Contains(err.Error(), "no system role") {
		t.Errorf("raise_exception: %v", err)
	}
}

// TestHostileTemplateErrors: a template whose start-up test render hits a
// limit is refused naming its origin and the limit; one that reacts to a
// user's message fails that render only, naming both; a cancelled context
// stops a render.
func TestHostileTemplateErrors(t *testing.T) {
	tok := fromFile(t, "testdata/qwen3-vocab.gguf")
	err := tok.UseJinja("{{ 'x' * 1000000000 }}", "GGUF key tokenizer.chat_template")
	if !errors.Is(err, ErrTemplateLimit) || !strings.Contains(err.Error(), "tokenizer.chat_template") || !strings.Contains(err.Error(), "value size limit") {
		t.Fatalf("start-up render: %v", err)
	}
	const reacts = "{% for m in messages %}{% if m.content == 'boom' %}{% for i in range(10**12) %}{% endfor %}{% endif %}{{ m.content }}{% endfor %}"
	if err := tok.UseJinja(reacts, "evil.jinja"); err != nil {
		t.Fatal(err)
	}
	_, err = tok.Chat([]Message{{Role: "user", Content: "boom"}}, true, false)
	if !errors.Is(err, ErrTemplateLimit) || !strings.Contains(err.Error(), "evil.jinja") || !strings.Contains(err.Error(), "items limit") {
		t.Fatalf("hostile render: %v", err)
	}
	if out, err := tok.Chat([]Message{{Role: "user", Content: "fine"}}, true, false); err != nil || out != "fine" {
		t.Fatalf("next render: %q, %v", out, err)
	}
	const loops = "{% for i in range(1000000) %}{% for m in messages %}{% endfor %}{% endfor %}"
	if err := tok.UseJinja(loops, "slow.jinja"); !errors.Is(err, ErrTemplateLimit) {
		t.Fatalf("2,000,000 steps at start-up: %v", err)
	}
	if err := tok.UseJinja("{% for m in messages %}{% for i in range(m.content|int) %}{% endfor %}{% endfor %}", "slow.jinja"); err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	if _, err := tok.ChatContext(ctx, []Message{{Role: "user", Content: "1000"}}, true, false); !errors.Is(err, context.Canceled) || !strings.Contains(err.Error(), "slow.jinja") {
		t.Fatalf("cancelled render: %v", err)
	}
}

// TestTemplateLimitsApply: the limits SetTemplateLimits sets bound the
// test render of UseJinja and every render after it; invalid limits are
// refused naming the field.
func TestTemplateLimitsApply(t *testing.T) {
	tok := tinyWithTemplate(t, "")
	src := `{% for m in messages %}{% for i in range(50) %}{{ m.content }}{% endfor %}{% endfor %}`
	if err := tok.UseJinja(src, "loop.jinja"); err != nil {
		t.Fatalf("default limits: %v", err)
	}
	if err := tok.SetTemplateLimits(jinja.Limits{MaxSteps: 10}); err != nil {
		t.Fatal(err)
	}
	err := tok.UseJinja(src, "loop.jinja")
	var le *jinja.LimitError
	if !errors.As(err, &le) || le.Limit != "steps" || !strings.Contains(err.Error(), "loop.jinja") {
		t.Fatalf("MaxSteps 10: %v; want the steps limit naming loop.jinja", err)
	}
	err = tok.SetTemplateLimits(jinja.Limits{MaxDepth: -1})
	if !errors.Is(err, jinja.ErrBadLimits) || !strings.Contains(err.Error(), "MaxDepth") {
		t.Fatalf("MaxDepth -1: %v; want ErrBadLimits naming MaxDepth", err)
	}
}

// TestTemplateVars: variables in the context reach a Jinja render and set
// over pipe's own (enable_thinking here), as llama.cpp's extra context
// does; a value that is not JSON is an error naming it; without them the
// render is what it was.
func TestTemplateVars(t *testing.T) {
	tmpl, err := compileJinja(`{{ date_string | default("none") }} {{ enable_thinking }} {{ opts.depth }}`, "test", jinja.Limits{})
	if err != nil {
		t.Fatal(err)
	}
	msgs := []Message{{Role: "user", Content: "hi"}}
	render := func(ctx context.Context) (string, error) {
		return renderJinja(ctx, tmpl, msgs, true, false, "", "")
	}
	ctx := WithTemplateVars(context.Background(), map[string]json.RawMessage{
		"date_string": json.RawMessage(`"06 Dec 2026"`), "enable_thinking": json.RawMessage(`false`), "opts": json.RawMessage(`{"depth": 3}`)})
	if got, err := render(ctx); err != nil || got != "06 Dec 2026 False 3" {
		t.Errorf("with variables: %q, %v", got, err)
	}
	if got, err := render(context.Background()); err != nil || got != "none True " {
		t.Errorf("without: %q, %v", got, err)
	}
	bad := WithTemplateVars(context.Background(), map[string]json.RawMessage{"x": json.RawMessage(`{`)})
	if _, err := render(bad); err == nil || !strings.Contains(err.Error(), "template variable x") {
		t.Errorf("bad JSON: %v", err)
	}
}
