package bench

import (
	"errors"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
)

func readPeerData(t *testing.T, name string) []byte {
	t.Helper()
	b, err := os.ReadFile(filepath.Join("testdata", "peer", name))
	if err != nil {
		t.Fatal(err)
	}
	return b
}

// TestParsePeerOutput reads each engine's output with the built-in parsers.
func TestParsePeerOutput(t *testing.T) {
	for _, c := range []struct {
		file, stream string
		tokS         float64
		tokens       int
		source       string
	}{
		{"llama-bench.json", "stdout", 13.440012, 32, "llama-bench json"},
		{"llama-bench.md", "stdout", 13.44, 32, "llama-bench table"},
		{"llama-completion.stderr", "stderr", 13.23, 63, "llama.cpp eval time"},
		{"bmoe-cli.stdout", "stdout", 1.12, 64, "bmoe-cli generation"},
		{"llama-bench-tiny.json", "stdout", 994.842735, 8, "llama-bench json"},
		{"llama-bench-tiny.md", "stdout", 3481.73, 8, "llama-bench table"},
		{"llama-completion-tiny.stderr", "stderr", 3151.73, 7, "llama.cpp eval time"},
	} {
		b := readPeerData(t, c.file)
		var out, errOut []byte
		if c.stream == "stdout" {
			out = b
		} else {
			errOut = b
		}
		got, err := ParsePeerOutput(out, errOut, nil)
		if err != nil {
			t.Errorf("%s: %v", c.file, err)
			continue
		}
		if got.TokS != c.tokS || got.Tokens != c.tokens || got.Source != c.source {
			t.Errorf("%s: %+v, want %v tok/s over %d tokens from %s", c.file, got, c.tokS, c.tokens, c.source)
		}
	}
}

// TestParsePeerOutputJSONLines: llama-bench -o jsonl, one object a line.
func TestParsePeerOutputJSONLines(t *testing.T) {
	lines := `{"n_prompt": 0, "n_gen": 64, "n_depth": 0, "avg_ts": 9.5, "samples_ts": [ 9.5 ]}` + "\n"
	got, err := ParsePeerOutput([]byte(lines), nil, nil)
	if err != nil || got.TokS != 9.5 || got.Tokens != 64 {
		t.Fatalf("jsonl: %+v %v", got, err)
	}
}

// TestParsePeerOutputErrors: no rate, a zero or NaN rate, several tg tests
// or none are errors, never a 0.
func TestParsePeerOutputErrors(t *testing.T) {
	two := `[{"n_prompt":0,"n_gen":32,"avg_ts":1.5},{"n_prompt":0,"n_gen":64,"avg_ts":1.4}]`
	for name, c := range map[string]struct{ stdout, stderr string }{
		"usage text":     {string(readPeerData(t, "no-rate.stdout")), ""},
		"empty":          {"", ""},
		"bmoe nan":       {"generation: 0 tokens, 0.000 s/token (-nan tok/s)\n", ""},
		"bmoe zero":      {"generation: 0 tokens, 0.000 s/token (0.000 tok/s)\n", ""},
		"llama inf":      {"", "llama_perf_context_print:        eval time =       0.00 ms /     0 runs   (     nan ms per token,      inf tokens per second)\n"},
		"two tg tests":   {two, ""},
		"pp only":        {`[{"n_prompt":512,"n_gen":0,"avg_ts":30}]`, ""},
		"broken json":    {`[{"n_prompt":0,`, ""},
		"prompt only":    {"", "llama_perf_context_print: prompt eval time =    5734.53 ms /   121 tokens (   47.39 ms per token,    21.10 tokens per second)\n"},
		"two table rows": {"| test | t/s |\n| --- | --- |\n| tg32 | 1.0 ± 0.1 |\n| tg64 | 2.0 ± 0.1 |\n", ""},
	} {
		got, err := ParsePeerOutput([]byte(c.stdout), []byte(c.stderr), nil)
		if !errors.Is(err, ErrPeerOutput) {
			t.Errorf("%s: %+v, %v; want ErrPeerOutput", name, got, err)
		}
	}
}

// TestPeerRegex: --peer-regex overrides the built-ins; its first group is
// the rate, the last match counts.
func TestPeerRegex(t *testing.T) {
	p := Peer{Name: "x"}
	if err := p.SetRegex(`no group`); !errors.Is(err, ErrBadPeer) {
		t.Fatalf("a regex without a group: %v", err)
	}
	if err := p.SetRegex(`(`); !errors.Is(err, ErrBadPeer) {
		t.Fatalf("a bad regex: %v", err)
	}
	if err := p.SetRegex(`speed ([0-9.]+) tok/s`); err != nil {
		t.Fatal(err)
	}
	out := "speed 3.0 tok/s\ngeneration: 64 tokens, 0.893 s/token (1.120 tok/s)\nspeed 4.25 tok/s\n"
	got, err := ParsePeerOutput([]byte(out), nil, p.Regex)
	if err != nil || got.TokS != 4.25 || got.Source != "--peer-regex" {
		t.Fatalf("%+v %v", got, err)
	}
	if _, err := ParsePeerOutput([]byte("nothing"), nil, p.Regex); !errors.Is(err, ErrPeerOutput) {
		t.Fatalf("no match: %v", err)
	}
}

func TestSplitArgs(t *testing.T) {
	for in, want := range map[string][]string{
		`llama-bench -m {model} -n {n}`:        {"llama-bench", "-m", "{model}", "-n", "{n}"},
		`  a   b  `:                            {"a", "b"},
		`bmoe-cli -p 'two words' -x "a \"b\""`: {"bmoe-cli", "-p", "two words", "-x", `a "b"`},
		`a\ b c`:                               {"a b", "c"},
		`x '' y`:                               {"x", "", "y"},
		`--p="{prompt}"`:                       {"--p={prompt}"},
		`"a\nb"`:                               {`a\nb`},
		`'it'\''s'`:                            {"it's"},
		``:                                     nil,
	} {
		got, err := SplitArgs(in)
		if err != nil || !slices.Equal(got, want) {
			t.Errorf("SplitArgs(%q) = %q, %v; want %q", in, got, err, want)
		}
	}
	for _, in := range []string{`a 'b`, `a "b`, `a\`} {
		if got, err := SplitArgs(in); err == nil {
			t.Errorf("SplitArgs(%q) = %q, want an error", in, got)
		}
	}
}

func TestParsePeer(t *testing.T) {
	p, err := ParsePeer(`llama=$LLAMA/llama-bench -m {model} -p 0 -n {n} -o json --out {out}.x`)
	if err != nil {
		t.Fatal(err)
	}
	if p.Name != "llama" || p.Args[0] != "$LLAMA/llama-bench" || !p.Uses("model") || p.Uses("prompt") {
		t.Fatalf("%+v", p)
	}
	got := p.Expand(map[string]string{"model": "/m/a b.gguf", "n": "32", "prompt": "hi", "out": "o/01"})
	want := []string{"$LLAMA/llama-bench", "-m", "/m/a b.gguf", "-p", "0", "-n", "32", "-o", "json", "--out", "o/01.x"}
	if !slices.Equal(got, want) {
		t.Fatalf("Expand = %q, want %q", got, want)
	}
	for _, bad := range []string{"", "=x", "noequals", "a b=x", "x=", "x=   ", "x=a 'b", "x=a {modle}"} {
		if _, err := ParsePeer(bad); !errors.Is(err, ErrBadPeer) {
			t.Errorf("ParsePeer(%q) = %v, want ErrBadPeer", bad, err)
		}
	}
	if _, err := ParsePeer("x=a {modle}"); err == nil || !strings.Contains(err.Error(), "{modle}") {
		t.Errorf("unknown placeholder not named: %v", err)
	}
	// braces that are no placeholder pass through
	if p, err := ParsePeer(`x=a '{"k": 1}' {}`); err != nil || p.Args[1] != `{"k": 1}` || p.Args[2] != "{}" {
		t.Errorf("literal braces: %+v %v", p, err)
	}
}

// TestReadTail: a file longer than the limit yields only its last bytes, a
// shorter one all of them.
func TestReadTail(t *testing.T) {
	p := filepath.Join(t.TempDir(), "out")
	if err := os.WriteFile(p, []byte("0123456789"), 0o644); err != nil {
		t.Fatal(err)
	}
	for _, c := range []struct {
		limit int64
		want  string
	}{{4, "6789"}, {10, "0123456789"}, {64, "0123456789"}} {
		b, err := readTail(p, c.limit)
		if err != nil || string(b) != c.want {
			t.Errorf("readTail(%d) = %q, %v; want %q", c.limit, b, err, c.want)
		}
	}
}
