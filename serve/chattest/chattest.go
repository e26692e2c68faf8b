// Package chattest holds what the families' chat-template tests share: a
// conversation with a tool, a call of it and its result
// (testdata/tools-request.json, an OpenAI chat request), rendered through a
// real-shape preset's generated tokenizer metadata with pipe's Jinja
// (package tokenizer's ChatTools, as pipe serve renders it), and compared
// byte for byte with what llama.cpp's llama-server (3f545becc) answers on
// /apply-template for the same request and template
// (testdata/record-llama.sh writes those goldens into each family's
// testdata). Only tests import it.
package chattest

import (
	"context"
	"encoding/json"
	"os"
	"path/filepath"
	"runtime"
	"strings"
	"testing"

	"github.com/pipe-engine/pipe/model/gen"
	"github.com/pipe-engine/pipe/serve/toolcall"
	"github.com/pipe-engine/pipe/tokenizer"
)

// request is the part of an OpenAI chat request the conversation uses.
type request struct {
	Messages []struct {
		Role       string `json:"role"`
		Content    string `json:"content"`
		ToolCallID string `json:"tool_call_id"`
		ToolCalls  []struct {
			ID       string `json:"id"`
			Function struct {
				Name      string `json:"name"`
				Arguments string `json:"arguments"`
			} `json:"function"`
		} `json:"tool_calls"`
	} `json:"messages"`
	Tools json.RawMessage `json:"tools"`
}

// Conversation reads testdata/tools-request.json: its messages as pipe's
// tokenizer takes them, and its tools.
func Conversation(t *testing.T) ([]tokenizer.Message, json.RawMessage) {
	t.Helper()
	_, file, _, _ := runtime.Caller(0)
	b, err := os.ReadFile(filepath.Join(filepath.Dir(file), "testdata", "tools-request.json"))
	if err != nil {
		t.Fatal(err)
	}
	var r request
	if err := json.Unmarshal(b, &r); err != nil {
		t.Fatalf("tools-request.json: %v", err)
	}
	msgs := make([]tokenizer.Message, len(r.Messages))
	for i, m := range r.Messages {
		msgs[i] = tokenizer.Message{Role: m.Role, Content: m.Content, ToolCallID: m.ToolCallID}
		for _, c := range m.ToolCalls {
			msgs[i].ToolCalls = append(msgs[i].ToolCalls, tokenizer.ToolCall{ID: c.ID, Name: c.Function.Name, Arguments: c.Function.Arguments})
		}
	}
	return msgs, r.Tools
}

// CheckToolRender prepares preset's file (one block, a 1024-token
// vocabulary: the template does not depend on either), checks that its
// tokenizer.chat_template is want (the family's official template), builds
// the tokenizer from the file's metadata, renders the conversation with a
// generation prompt through the Jinja template and compares it with the
// llama.cpp render in golden.
func CheckToolRender(t *testing.T, preset, want, golden string) {
	t.Helper()
	m, err := gen.Prepare(gen.Options{Preset: preset, Layers: 1, VocabSize: 1024})
	if err != nil {
		t.Fatal(err)
	}
	get := func(key string) (any, bool) {
		for _, kv := range m.Vocab.KV {
			if kv.Key == key {
				return kv.Value.Any(), true
			}
		}
		return nil, false
	}
	if src, _ := get("tokenizer.chat_template"); src != want {
		t.Fatalf("%s writes tokenizer.chat_template %.80q…, want the family's official template", preset, src)
	}
	cfg, err := tokenizer.FromMetadata(get)
	if err != nil {
		t.Fatal(err)
	}
	tok, err := tokenizer.New(cfg)
	if err != nil {
		t.Fatal(err)
	}
	if err := tok.UseJinja(want, preset); err != nil {
		t.Fatal(err)
	}
	msgs, tools := Conversation(t)
	got, err := tok.ChatTools(context.Background(), msgs, tools, true, false)
	if err != nil {
		t.Fatal(err)
	}
	ref, err := os.ReadFile(golden)
	if err != nil {
		t.Fatal(err)
	}
	if got != string(ref) {
		t.Errorf("%s: pipe renders\n%s\n--- llama.cpp renders (%s)\n%s", preset, got, golden, ref)
	}
}

// CheckToolCall checks that pipe serve reads the family's tool calls:
// toolcall.Detect names format for the template tmpl, call (a call of the
// conversation's tool as the family's model writes it) appears verbatim in
// the llama.cpp render in golden (the template writes past calls the way
// the model is trained to), and Parse reads it back as the conversation's
// call, get_weather {"city":"Paris","days":2}.
func CheckToolCall(t *testing.T, tmpl string, format toolcall.Format, call, golden string) {
	t.Helper()
	if got := toolcall.Detect(tmpl); got != format {
		t.Fatalf("toolcall.Detect: %v, want %v", got, format)
	}
	ref, err := os.ReadFile(golden)
	if err != nil {
		t.Fatal(err)
	}
	if !strings.Contains(string(ref), call) {
		t.Fatalf("%s does not write the call as %q", golden, call)
	}
	_, raw := Conversation(t)
	var defs []struct {
		Function struct {
			Name       string          `json:"name"`
			Parameters json.RawMessage `json:"parameters"`
		} `json:"function"`
	}
	if err := json.Unmarshal(raw, &defs); err != nil {
		t.Fatal(err)
	}
	tools := make([]toolcall.Tool, len(defs))
	for i, d := range defs {
		tools[i] = toolcall.Tool{Name: d.Function.Name, Parameters: d.Function.Parameters}
	}
	content, calls, err := format.Parse(call, tools)
	if err != nil {
		t.Fatal(err)
	}
	if content != "" || len(calls) != 1 || calls[0].Name != "get_weather" || calls[0].Arguments != `{"city":"Paris","days":2}` {
		t.Errorf("Parse: content %q, calls %+v; want one get_weather {\"city\":\"Paris\",\"days\":2}", content, calls)
	}
}
