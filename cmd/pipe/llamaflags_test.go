package main

import (
	"bytes"
	"fmt"
	"os"
	"regexp"
	"strings"
	"testing"

	"github.com/alecthomas/kong"
)

// pipeFlags are the spellings kong accepts for pipe run and pipe serve
// (with the global flags).
func pipeFlags(t *testing.T) map[string]bool {
	var cli CLI
	k, err := parser(&cli, &bytes.Buffer{}, &bytes.Buffer{}, func(int) {})
	if err != nil {
		t.Fatal(err)
	}
	names := map[string]bool{}
	add := func(fs []*kong.Flag) {
		for _, f := range fs {
			names["--"+f.Name] = true
			for _, a := range f.Aliases {
				names["--"+a] = true
			}
			if f.Short != 0 {
				names["-"+string(f.Short)] = true
			}
			if f.Negated || f.Tag.Negatable != "" {
				names["--no-"+f.Name] = true
			}
		}
	}
	add(k.Model.Flags)
	for _, c := range k.Model.Children {
		if c.Name == "run" || c.Name == "serve" {
			add(c.Flags)
		}
	}
	return names
}

// TestLlamaTable checks every row of llama.cpp's flag table against the
// parser: a supported spelling is pipe's own or translated to one, an
// accepted one is dropped, a refused one stops the parse with one error
// that names it and says why; none of the latter two is a flag of pipe's.
func TestLlamaTable(t *testing.T) {
	own := pipeFlags(t)
	seen := map[string]bool{}
	for _, f := range llamaTable {
		for _, n := range strings.Fields(f.names) {
			if seen[n] {
				t.Errorf("%s: twice in the table", n)
			}
			seen[n] = true
			out, err := translateArgs([]string{"run", n})
			switch f.status {
			case llamaSupported:
				name := ""
				if err == nil && len(out) == 2 {
					name, _, _ = strings.Cut(out[1], "=")
				}
				if !own[name] {
					t.Errorf("%s (supported): translated to %q (%v), which is not a flag of pipe run or serve", n, out, err)
				}
			case llamaAccepted:
				if err != nil || len(out) != 1 || own[n] {
					t.Errorf("%s (accepted): %q, %v (a pipe flag: %v)", n, out, err, own[n])
				}
			case llamaRefused:
				if err == nil || !strings.Contains(err.Error(), n+" is a llama.cpp flag pipe cannot honour: "+f.what) || own[n] {
					t.Errorf("%s (refused): %v (a pipe flag: %v)", n, err, own[n])
				}
			}
		}
	}
	if len(seen) < 250 {
		t.Errorf("the table has %d spellings; llama.cpp's cli and server have about 280", len(seen))
	}
}

var llamaBlock = regexp.MustCompile("(?s)<!-- llama-flags:begin -->\n.*<!-- llama-flags:end -->")

// TestReadmeLlamaTable keeps README.md's table equal to llamaTable.
func TestReadmeLlamaTable(t *testing.T) {
	const path = "../../README.md"
	readme, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	want := "<!-- llama-flags:begin -->\n" + llamaMarkdown() + "<!-- llama-flags:end -->"
	got := llamaBlock.Find(readme)
	if string(got) == want {
		return
	}
	if *updateReadme && got != nil {
		if err := os.WriteFile(path, llamaBlock.ReplaceAllLiteral(readme, []byte(want)), 0o644); err != nil {
			t.Fatal(err)
		}
		return
	}
	t.Fatal("README.md's llama.cpp flag table is missing or out of date: run go test ./cmd/pipe -run TestReadme -update-readme")
}

// llamaMarkdown is README.md's table of llama.cpp's flags.
func llamaMarkdown() string {
	var b strings.Builder
	b.WriteString("| llama.cpp | pipe |\n|---|---|\n")
	for _, f := range llamaTable {
		names := strings.Fields(f.names)
		for i, n := range names {
			names[i] = "`" + n + "`"
		}
		what := strings.ReplaceAll(f.what, "|", "\\|")
		switch f.status {
		case llamaAccepted:
			what = "accepted, ignored: " + what
		case llamaRefused:
			what = "refused: " + what
		}
		fmt.Fprintf(&b, "| %s | %s |\n", strings.Join(names, " "), what)
	}
	return b.String()
}
