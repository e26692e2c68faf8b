package jinja

import (
	"context"
	"encoding/json"
	"os"
	"path/filepath"
	"sort"
	"strings"
	"testing"
	"time"
)

// llamaCppDir holds llama.cpp's models/templates (3f545becc), copied
// unchanged with its licence.
const llamaCppDir = "../../testdata/chat-templates/llamacpp"

// llamaCppResult is one golden render: upstream's output, or the error it
// gave.
type llamaCppResult struct {
	Output *string `json:"output"`
	Error  string  `json:"error"`
}

// llamaCppFailing are the renders upstream refuses, with the reason; the
// fork must refuse them too (and render everything else identically).
var llamaCppFailing = map[string]string{
	"google-gemma-2-2b-it/chat":           "raise_exception: Gemma 2 has no system role (llama.cpp merges the system message into the first user turn before rendering)",
	"google-gemma-2-2b-it/chat-nogen":     "raise_exception: no system role",
	"google-gemma-2-2b-it/chat-think-off": "raise_exception: no system role",
	"google-gemma-2-2b-it/tools":          "raise_exception: no system role",
	"google-gemma-2-2b-it/tools-pending":  "raise_exception: roles must alternate user/assistant (a tool turn breaks it)",
}

// TestLlamaCppTemplates renders every template of llama.cpp's
// models/templates with every conversation of testdata/llamacpp/contexts.json
// (system/user/assistant turns, with and without a generation prompt and
// thinking, reasoning_content, tools with a tool call and its result) under
// DefaultLimits and compares the output byte for byte with what the
// unmodified upstream v1.8.0 rendered (testdata/llamacpp/*.golden.json,
// recorded by testdata/upstream).
func TestLlamaCppTemplates(t *testing.T) {
	contexts := llamaCppContexts(t)
	files, err := filepath.Glob(filepath.Join(llamaCppDir, "*.jinja"))
	if err != nil {
		t.Fatal(err)
	}
	if len(files) != 68 {
		t.Fatalf("%s holds %d templates, want llama.cpp's 68", llamaCppDir, len(files))
	}
	rendered, failed := 0, 0
	for _, f := range files {
		name := strings.TrimSuffix(filepath.Base(f), ".jinja")
		golden := llamaCppGolden(t, name)
		if len(golden) != len(contexts) {
			t.Errorf("%s: golden has %d renders, contexts.json %d", name, len(golden), len(contexts))
		}
		src, err := os.ReadFile(f)
		if err != nil {
			t.Fatal(err)
		}
		tmpl, err := Compile(string(src))
		if err != nil {
			t.Errorf("%s: compile: %v", name, err)
			continue
		}
		for _, cn := range sortedKeys(contexts) {
			ok := checkLlamaCppRender(t, tmpl, name+"/"+cn, contexts[cn], golden[cn])
			if ok {
				rendered++
			} else {
				failed++
			}
		}
	}
	if failed != len(llamaCppFailing) {
		t.Errorf("%d renders failed in both, llamaCppFailing lists %d", failed, len(llamaCppFailing))
	}
	t.Logf("%d templates, %d renders identical to upstream, %d refused by both", len(files), rendered, failed)
}

// checkLlamaCppRender renders one template/context pair and compares it with
// its golden; it reports whether the render succeeded.
func checkLlamaCppRender(t *testing.T, tmpl *Template, key string, data map[string]any, want llamaCppResult) bool {
	t.Helper()
	out, err := tmpl.RenderContext(context.Background(), data, DefaultLimits())
	out = normalizeDates(out, time.Now())
	switch {
	case want.Output == nil && want.Error == "":
		t.Errorf("%s: no golden", key)
	case want.Output == nil:
		if err == nil {
			t.Errorf("%s: rendered, upstream failed with %q", key, want.Error)
		} else if _, listed := llamaCppFailing[key]; !listed {
			t.Errorf("%s: fails in both (%v) but is not in llamaCppFailing", key, err)
		}
	case err != nil:
		t.Errorf("%s: %v; upstream rendered it", key, err)
	case out != *want.Output:
		t.Errorf("%s: differs from upstream at byte %d:\n got %q\nwant %q", key, firstDiff(out, *want.Output), out, *want.Output)
	}
	return err == nil
}

func llamaCppContexts(t *testing.T) map[string]map[string]any {
	t.Helper()
	b, err := os.ReadFile("testdata/llamacpp/contexts.json")
	if err != nil {
		t.Fatal(err)
	}
	var contexts map[string]map[string]any
	if err := json.Unmarshal(b, &contexts); err != nil {
		t.Fatal(err)
	}
	return contexts
}

func llamaCppGolden(t *testing.T, name string) map[string]llamaCppResult {
	t.Helper()
	b, err := os.ReadFile(filepath.Join("testdata/llamacpp", name+".golden.json"))
	if err != nil {
		t.Fatal(err)
	}
	var golden map[string]llamaCppResult
	if err := json.Unmarshal(b, &golden); err != nil {
		t.Fatalf("%s: %v", name, err)
	}
	return golden
}

// normalizeDates replaces today's date, as the llama.cpp templates format
// strftime_now, with <DATE>, as testdata/upstream does for the goldens.
func normalizeDates(s string, now time.Time) string {
	for _, layout := range []string{"2006-01-02", "02 Jan 2006", "January 02, 2006"} {
		s = strings.ReplaceAll(s, now.Format(layout), "<DATE>")
	}
	return s
}

func sortedKeys[V any](m map[string]V) []string {
	keys := make([]string, 0, len(m))
	for k := range m {
		keys = append(keys, k)
	}
	sort.Strings(keys)
	return keys
}

func firstDiff(a, b string) int {
	i := 0
	for i < len(a) && i < len(b) && a[i] == b[i] {
		i++
	}
	return i
}
