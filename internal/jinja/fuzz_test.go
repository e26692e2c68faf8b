package jinja

import (
	"context"
	"errors"
	"flag"
	"os"
	"path/filepath"
	"testing"
	"time"
)

// fuzzLimits are tighter than DefaultLimits so that every input the fuzzer
// tries ends in well under a second: a small output and allocation budget,
// so that mutants of the size reproducers stop at a few MiB rather than
// building 64 MiB strings. The fixed caps (MaxValueBytes, MaxItems,
// MaxNesting) are the real ones, and TestHostileTemplatesHitALimit checks
// every reproducer against DefaultLimits.
var fuzzLimits = Limits{MaxOutput: 1 << 20, MaxAlloc: 16 << 20, MaxSteps: 100_000, Timeout: 250 * time.Millisecond}

// maxFuzzSeed is the largest reproducer the fuzzing engine mutates.
const maxFuzzSeed = 64 << 10

// FuzzTemplate compiles and renders arbitrary template source with an
// arbitrary message: any outcome but a recovered engine panic (ErrEngine),
// a Go panic or a fatal error is fine. Seeds: issue 35's reproducers, the
// Python-answer cases, small real templates and a few expressions; they run
// as a normal test.
//
// Under -fuzz two kinds of reproducer are left out; the plain run and
// TestHostileTemplatesHitALimit still run them.
//   - The slowShort ones (seconds each): the engine runs every seed with
//     coverage instrumentation and kills a worker whose input takes 10 s of
//     wall time ("fuzzing process hung or terminated unexpectedly"), which
//     one of them did on a loaded machine.
//   - Sources past maxFuzzSeed (the parser-depth ones are megabytes): every
//     mutant of one costs a compile of megabytes under instrumentation, so
//     a fixed count of executions took minutes instead of seconds whenever
//     the engine picked one to mutate.
func FuzzTemplate(f *testing.F) {
	for name, src := range hostileTemplates {
		if slowShort[name] && (testing.Short() || fuzzing()) {
			continue
		}
		if len(src) > maxFuzzSeed && fuzzing() {
			continue
		}
		f.Add(src, "hi")
	}
	for _, c := range saneTemplates {
		f.Add(c.src, "hi")
	}
	for _, src := range []string{
		"{{ messages[0].content|tojson(indent=2) }}", "{{ messages|map(attribute='role')|join(', ') }}",
		"{% for m in messages %}{{ m.content[::-1] }}{{ loop.index }}{% endfor %}",
		"{{ (messages[0].content * 3).split(' ')|unique|list }}", "{{ messages[0].content|fromjson }}",
		"{% set ns = namespace(a=1) %}{% set ns.a = ns %}{{ ns == ns }}", "{{ 'x' * 2**62 }}", "{{ -9223372036854775808 // -1 }}",
		"{% macro m(a, b=[1,2]) %}{{ caller(a) }}{% endmacro %}{% call(x) m(3) %}{{ x }}{% endcall %}",
		"{% filter upper %}{{ messages[0].content }}{% endfilter %}", "{{ messages[0].content|indent(2, true) }}",
		"{{ '{0}{1}{}'.format(1, 2) }}", "{% raw %}{{ x }}{% endraw %}", "{{ range(5)|batch(2)|list }}",
	} {
		f.Add(src, `{"a": [1, 2, {"b": null}]}`)
	}
	for _, dir := range []string{"testdata/gguf", "../../testdata/chat-templates"} {
		files, _ := filepath.Glob(filepath.Join(dir, "*.jinja"))
		for _, p := range files {
			if b, err := os.ReadFile(p); err == nil && len(b) < 8<<10 {
				f.Add(string(b), "Hello <b>there</b>")
			}
		}
	}
	f.Fuzz(func(t *testing.T, src, content string) {
		tmpl, err := Compile(src)
		if err != nil {
			return
		}
		data := map[string]any{
			"messages":              []any{map[string]any{"role": "system", "content": "sys"}, map[string]any{"role": "user", "content": content}},
			"add_generation_prompt": true, "bos_token": "<s>", "eos_token": "</s>",
		}
		lim := fuzzLimits
		if testing.Short() {
			lim = reproducerLimits()
		}
		out, err := tmpl.RenderContext(context.Background(), data, lim)
		if errors.Is(err, ErrEngine) {
			t.Fatalf("engine panic on %q: %v", src, err)
		}
		if err == nil && int64(len(out)) > MaxValueBytes {
			t.Fatalf("output of %d bytes past the output limit", len(out))
		}
	})
}

// fuzzing reports whether this test binary runs with -test.fuzz (the
// fuzzing engine) rather than running the seeds as a test.
func fuzzing() bool {
	fl := flag.Lookup("test.fuzz")
	return fl != nil && fl.Value.String() != ""
}
