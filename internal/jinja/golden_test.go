package jinja

import (
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"flag"
	"fmt"
	"os"
	"path/filepath"
	"sort"
	"strings"
	"testing"
	"time"
)

var update = flag.Bool("update", false, "rewrite testdata/golden.json from the current renderer")

// goldenTemplates are the real chat templates the fork must render exactly
// as upstream v1.8.0 did: upstream's own testdata, the GGUF templates of the
// repository's tiny models, the repository's chat-templates and llama.cpp's
// test-chat-template cases.
func goldenTemplates(t *testing.T) map[string]string {
	t.Helper()
	out := map[string]string{}
	for _, pat := range []string{"testdata/templates/*.jinja", "testdata/gguf/*.jinja", "../../testdata/chat-templates/*.jinja"} {
		files, err := filepath.Glob(pat)
		if err != nil {
			t.Fatal(err)
		}
		for _, f := range files {
			b, err := os.ReadFile(f)
			if err != nil {
				t.Fatal(err)
			}
			out[filepath.Base(f)] = string(b)
		}
	}
	// llama.cpp's test-chat-template.cpp cases (the templates of 36 model
	// families, extracted to JSON).
	b, err := os.ReadFile("../../testdata/chat-templates/test-chat-template-cases.json")
	if err != nil {
		t.Fatal(err)
	}
	var cases []struct {
		Name     string `json:"name"`
		Template string `json:"template_str"`
	}
	if err := json.Unmarshal(b, &cases); err != nil {
		t.Fatal(err)
	}
	for _, c := range cases {
		out["llama.cpp-case:"+c.Name] = c.Template
	}
	if len(out) < 50 {
		t.Fatalf("found %d real templates, want at least 50", len(out))
	}
	return out
}

// goldenContexts are the render inputs: every captured request in
// testdata/requests, and plain conversations as pipe renders them (with and
// without a system message, generation prompt and thinking).
func goldenContexts(t *testing.T) map[string]map[string]any {
	t.Helper()
	out := map[string]map[string]any{}
	files, err := filepath.Glob("testdata/requests/*.json")
	if err != nil {
		t.Fatal(err)
	}
	for _, f := range files {
		b, err := os.ReadFile(f)
		if err != nil {
			t.Fatal(err)
		}
		var req map[string]any
		if err := json.Unmarshal(b, &req); err != nil {
			t.Fatalf("%s: %v", f, err)
		}
		out[filepath.Base(f)] = requestData(req["messages"], req["tools"], true, false)
	}
	msg := func(role, content string) any { return map[string]any{"role": role, "content": content} }
	chat := []any{msg("system", "You are terse."), msg("user", "Hi <b>&\"there\"</b>"), msg("assistant", "Hello!"), msg("user", "Count to 3.")}
	for _, gen := range []bool{false, true} {
		for _, think := range []bool{false, true} {
			out[fmt.Sprintf("chat-gen%v-think%v", gen, think)] = requestData(chat, nil, gen, think)
			out[fmt.Sprintf("user-gen%v-think%v", gen, think)] = requestData(chat[1:2], nil, gen, think)
		}
	}
	return out
}

func requestData(messages, tools any, gen, think bool) map[string]any {
	return map[string]any{
		"messages": messages, "tools": tools, "add_generation_prompt": gen,
		"bos_token": "<s>", "eos_token": "</s>", "enable_thinking": think,
		"thinking": false, "reasoning_effort": "medium", "model_identity": "You are a helpful assistant.",
		"builtin_tools": []any{}, "date": "2024-01-01", "date_string": "2024-01-01", "tools_in_user_message": false,
	}
}

// TestGoldenRealTemplates renders every real template with every context and
// compares a digest of each output (or the fact of an error) with
// testdata/golden.json, recorded from upstream v1.8.0 before the fork's
// changes: the limits and fixes must not change what a real template renders.
func TestGoldenRealTemplates(t *testing.T) {
	templates, contexts := goldenTemplates(t), goldenContexts(t)
	got := map[string]string{}
	start := time.Now()
	for tn, src := range templates {
		tmpl, err := Compile(src)
		if err != nil {
			t.Fatalf("%s: compile: %v", tn, err)
		}
		for cn, data := range contexts {
			out, err := tmpl.Render(data)
			key := tn + "/" + cn
			if err != nil {
				got[key] = "error"
				continue
			}
			out = asRecorded(out, start, time.Now())
			sum := sha256.Sum256([]byte(out))
			got[key] = fmt.Sprintf("%d:%s", len(out), hex.EncodeToString(sum[:8]))
		}
	}
	const path = "testdata/golden.json"
	if *update {
		b, _ := json.MarshalIndent(got, "", " ")
		if err := os.WriteFile(path, append(b, '\n'), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	b, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	var want map[string]string
	if err := json.Unmarshal(b, &want); err != nil {
		t.Fatal(err)
	}
	keys := make([]string, 0, len(want))
	for k := range want {
		keys = append(keys, k)
	}
	sort.Strings(keys)
	errs := 0
	for _, k := range keys {
		if strings.HasSuffix(want[k], "error") {
			errs++
		}
		if got[k] != want[k] {
			t.Errorf("%s: rendered %s, golden %s", k, got[k], want[k])
		}
	}
	if len(got) != len(want) {
		t.Errorf("rendered %d template/context pairs, golden has %d", len(got), len(want))
	}
	t.Logf("%d template/context pairs (%d errors in golden)", len(want), errs)
}

// goldenRecorded is the day testdata/golden.json was recorded: the
// templates that call strftime_now (gpt-oss's "Current date") rendered it
// into the digests.
var goldenRecorded = time.Date(2026, 12, 6, 0, 0, 0, 0, time.UTC)

// asRecorded writes today's date in s, as strftime_now formats it for the
// real templates, as the day the golden was recorded, so the digests hold
// on any day. A render that crosses midnight may carry either day.
func asRecorded(s string, days ...time.Time) string {
	for _, d := range days {
		for _, layout := range []string{"2006-01-02", "02 Jan 2006", "January 02, 2006"} {
			s = strings.ReplaceAll(s, d.Format(layout), goldenRecorded.Format(layout))
		}
	}
	return s
}
