// Command upstreamgolden records what the unmodified upstream library,
// github.com/ardanlabs/jinja v1.8.0 (the version internal/jinja forked),
// renders for every template in testdata/chat-templates/llamacpp with every
// context of ../llamacpp/contexts.json, into ../llamacpp/NAME.golden.json.
// It is its own module (under testdata, outside pipe's build) so that pipe
// does not depend on upstream. Run from this directory:
//
//	GOFLAGS=-mod=mod go run . ../../../../testdata/chat-templates/llamacpp ../llamacpp
//
// Dates from strftime_now are replaced by <DATE> (as the test does).
package main

import (
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"sort"
	"strings"
	"time"

	"github.com/ardanlabs/jinja"
)

// result is one render: its output or upstream's error.
type result struct {
	Output *string `json:"output,omitempty"`
	Error  string  `json:"error,omitempty"`
}

func main() {
	if err := run(os.Args[1], os.Args[2]); err != nil {
		fmt.Fprintln(os.Stderr, err)
		os.Exit(1)
	}
}

func run(templates, out string) error {
	b, err := os.ReadFile(filepath.Join(out, "contexts.json"))
	if err != nil {
		return err
	}
	var contexts map[string]map[string]any
	if err := json.Unmarshal(b, &contexts); err != nil {
		return err
	}
	files, err := filepath.Glob(filepath.Join(templates, "*.jinja"))
	if err != nil {
		return err
	}
	for _, f := range files {
		golden, err := renderAll(f, contexts)
		if err != nil {
			return err
		}
		var js strings.Builder
		enc := json.NewEncoder(&js)
		enc.SetEscapeHTML(false)
		enc.SetIndent("", " ")
		if err := enc.Encode(golden); err != nil {
			return err
		}
		name := strings.TrimSuffix(filepath.Base(f), ".jinja") + ".golden.json"
		if err := os.WriteFile(filepath.Join(out, name), []byte(js.String()), 0o644); err != nil {
			return err
		}
	}
	return nil
}

func renderAll(file string, contexts map[string]map[string]any) (map[string]result, error) {
	src, err := os.ReadFile(file)
	if err != nil {
		return nil, err
	}
	golden := map[string]result{}
	tmpl, err := jinja.Compile(string(src))
	if err != nil {
		golden["compile"] = result{Error: err.Error()}
		return golden, nil
	}
	names := make([]string, 0, len(contexts))
	for n := range contexts {
		names = append(names, n)
	}
	sort.Strings(names)
	for _, n := range names {
		out, err := tmpl.Render(contexts[n])
		if err != nil {
			golden[n] = result{Error: err.Error()}
			continue
		}
		out = normalizeDates(out, time.Now())
		golden[n] = result{Output: &out}
	}
	return golden, nil
}

// normalizeDates replaces today's date, as the llama.cpp templates format
// strftime_now, with <DATE>; internal/jinja's test does the same.
func normalizeDates(s string, now time.Time) string {
	for _, layout := range []string{"2006-01-02", "02 Jan 2006", "January 02, 2006"} {
		s = strings.ReplaceAll(s, now.Format(layout), "<DATE>")
	}
	return s
}
