package serve

import (
	"fmt"
	"path/filepath"
	"testing"

	"github.com/pipe-engine/pipe/decode"
	"github.com/pipe-engine/pipe/gguf"
	"github.com/pipe-engine/pipe/model"
	"github.com/pipe-engine/pipe/serve/toolcall"
)

// familyModels maps every registered architecture to its tiny Q4_K_M
// golden model in testdata (every family's goldens have one); a family
// without one fails the test.
func familyModels(t *testing.T) map[string]string {
	t.Helper()
	files, err := filepath.Glob("../testdata/golden/models/tiny-*-Q4_K_M.gguf")
	if err != nil {
		t.Fatal(err)
	}
	out := map[string]string{}
	for _, f := range files {
		g, err := gguf.Open(f)
		if err != nil {
			t.Fatal(err)
		}
		if a := g.Architecture(); out[a] == "" {
			out[a] = f
		}
	}
	for _, a := range model.Architectures() {
		if out[a] == "" {
			t.Errorf("architecture %s has no tiny Q4_K_M model in testdata/golden/models", a)
		}
	}
	return out
}

// TestEveryFamilyJSONSchemaAndRequiredTool: on every family's tiny model
// (random weights, so only the grammar makes the text valid), with the
// chat template the file carries run as Jinja (pipe serve's default), requiredRuns() seeds at temperature 1 of
// a chat with response_format json_schema each answer JSON that satisfies
// the schema, and of a chat with tool_choice "required" each answer one
// valid call of a given tool.
func TestEveryFamilyJSONSchemaAndRequiredTool(t *testing.T) {
	rf := `{"type": "json_schema", "json_schema": {"name": "a", "strict": true, "schema": ` + boundedSchema + `}}`
	for fam, path := range familyModels(t) {
		t.Run(fam, func(t *testing.T) {
			h := startModel(t, func(o *decode.Options) {
				o.Engine.Path = path
				o.Ctx = 2048
			}, func(o *Options) {
				o.Ctx = 2048
				tok := o.Model.Tokenizer()
				// As pipe serve does by default (--jinja): the file's own template.
				if err := tok.UseJinja(tok.ChatTemplate(), "GGUF key tokenizer.chat_template"); err != nil {
					t.Fatal(err)
				}
			})
			t.Logf("%s: tool-call format %v", filepath.Base(path), toolcall.Detect(h.m.Tokenizer().ToolTemplate()))
			for seed := range requiredRuns() {
				r := h.do("/v1/chat/completions", fmt.Sprintf(`{"messages":[{"role":"user","content":"Describe someone."}],"temperature":1,"seed":%d,"max_tokens":400,"response_format":%s}`, seed, rf), 200)
				ch := r["choices"].([]any)[0].(map[string]any)
				if ch["finish_reason"] != "stop" {
					t.Fatalf("json_schema seed %d: finish %v: %v", seed, ch["finish_reason"], ch)
				}
				checkAnswer(t, fmt.Sprintf("json_schema seed %d", seed), ch["message"].(map[string]any)["content"].(string))

				body := fmt.Sprintf(`{"messages":[{"role":"user","content":"Call a tool"}],"tools":%s,"tool_choice":"required","temperature":1,"seed":%d,"max_tokens":200}`, boundedTools, seed)
				r = h.do("/v1/chat/completions", body, 200)
				ch = r["choices"].([]any)[0].(map[string]any)
				if ch["finish_reason"] != "tool_calls" {
					t.Fatalf("required seed %d: finish_reason %v, want tool_calls: %v", seed, ch["finish_reason"], ch)
				}
				checkCall(t, fmt.Sprintf("required seed %d", seed), ch["message"].(map[string]any))
			}
		})
	}
}
