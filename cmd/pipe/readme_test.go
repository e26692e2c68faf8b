package main

import (
	"bytes"
	"context"
	"flag"
	"fmt"
	"os"
	"regexp"
	"strings"
	"testing"
)

var updateReadme = flag.Bool("update-readme", false, "rewrite README.md's flag reference from --help")

// readmeCommands are the commands whose --help the README reproduces.
func readmeCommands(t *testing.T) []string {
	var cli CLI
	k, err := parser(&cli, &bytes.Buffer{}, &bytes.Buffer{}, func(int) {})
	if err != nil {
		t.Fatal(err)
	}
	var names []string
	for _, n := range k.Model.Children {
		names = append(names, n.Name)
	}
	return names
}

func helpText(t *testing.T, cmd string) string {
	var out, errb bytes.Buffer
	args := []string{"--help"}
	if cmd != "" {
		args = []string{cmd, "--help"}
	}
	run(context.Background(), args, &out, &errb)
	return strings.TrimRight(out.String(), "\n")
}

var refBlock = regexp.MustCompile("(?s)<!-- flags:begin -->.*<!-- flags:end -->")

func flagReference(t *testing.T) string {
	var b strings.Builder
	b.WriteString("<!-- flags:begin -->\n")
	b.WriteString("Generated from `--help` by `go test ./cmd/pipe -run TestReadme -update-readme`; a test fails when it drifts.\n\n")
	b.WriteString("```text\n$ pipe --help\n" + helpText(t, "") + "\n```\n")
	for _, c := range readmeCommands(t) {
		fmt.Fprintf(&b, "\n### pipe %s\n\n```text\n$ pipe %s --help\n%s\n```\n", c, c, helpText(t, c))
	}
	b.WriteString("<!-- flags:end -->")
	return b.String()
}

// TestReadmeFlagReference keeps README.md's flag reference equal to --help.
func TestReadmeFlagReference(t *testing.T) {
	t.Setenv("COLUMNS", "100") // kong wraps help to the terminal width
	const path = "../../README.md"
	readme, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	if !refBlock.Match(readme) {
		t.Fatal("README.md has no <!-- flags:begin --> … <!-- flags:end --> block")
	}
	want := flagReference(t)
	got := refBlock.Find(readme)
	if string(got) == want {
		return
	}
	if *updateReadme {
		out := refBlock.ReplaceAllLiteral(readme, []byte(want))
		if err := os.WriteFile(path, out, 0o644); err != nil {
			t.Fatal(err)
		}
		return
	}
	t.Fatal("README.md's flag reference is out of date with --help: run go test ./cmd/pipe -run TestReadme -update-readme")
}
